package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"tidemark/lake"
	"tidemark/lake/store"
)

// TestCrashKill9 kills the real binary with SIGKILL at random moments while
// another process keeps appending, restarts it each time, and checks that
// every input line ends up in raw_events or quarantine exactly once and that
// window_results equals an uninterrupted run on the same input.
func TestCrashKill9(t *testing.T) {
	if testing.Short() {
		t.Skip("crash test: not in -short")
	}
	crashKill9(t, 20, t.TempDir(), t.TempDir(), nil, nil)
}

// TestCrashKill9HighCardinality is the crash test with a key per pair of
// lines (3000 keys) and 10-minute windows open for 30 minutes: a state of
// thousands of (window, key) pairs, so batches write changelogs between
// snapshots and the kills land between them, in them and in cleanups.
func TestCrashKill9HighCardinality(t *testing.T) {
	if testing.Short() {
		t.Skip("crash test: not in -short")
	}
	crashKill9With(t, 12, 3000, t.TempDir(), t.TempDir(), nil, []string{"--window", "10m", "--lateness", "30m"})
}

// TestCrashKill9S3Lake is the same with the lake and its checkpoint in a
// bucket of a real S3-compatible server (versitygw).
func TestCrashKill9S3Lake(t *testing.T) {
	if testing.Short() {
		t.Skip("crash test: not in -short")
	}
	srv, env := versityEnv(t)
	bucket := srv.Bucket(t)
	crashKill9(t, 10, "s3://"+bucket+"/crash", "s3://"+bucket+"/reference", env,
		[]string{"--s3-endpoint", srv.Endpoint})
}

// TestCrashKill9HighCardinalityS3 is the high-cardinality crash test with
// the lake and checkpoint on versitygw.
func TestCrashKill9HighCardinalityS3(t *testing.T) {
	if testing.Short() {
		t.Skip("crash test: not in -short")
	}
	srv, env := versityEnv(t)
	bucket := srv.Bucket(t)
	crashKill9With(t, 6, 3000, "s3://"+bucket+"/crash", "s3://"+bucket+"/reference", env,
		[]string{"--s3-endpoint", srv.Endpoint, "--window", "10m", "--lateness", "30m"})
}

// crashKill9 runs the crash test on the lake at lakeURL; refURL is a fresh
// lake for the uninterrupted run; env and flags go to every run.
func crashKill9(t *testing.T, kills int, lakeURL, refURL string, env, flags []string) {
	crashKill9With(t, kills, 0, lakeURL, refURL, env, flags)
}

// crashKill9With is crashKill9 with keys distinct page values (0: 5);
// flags may override the window and lateness (the last value wins).
func crashKill9With(t *testing.T, kills, keys int, lakeURL, refURL string, env, flags []string) {
	in := newCrashInput(t.TempDir(), keys)
	lakeDir := lakeURL
	rng := rand.New(rand.NewPCG(42, 9))
	args := append([]string{"stream", "--source", filepath.Join(in.dir, "a"), "--source", filepath.Join(in.dir, "b"), "--key", "page", "--value", "value",
		"--window", "1m", "--lateness", "30s", "--max-batch-rows", "150", "--rescan-interval", "50ms",
		"--lake", lakeDir, "--progress", filepath.Join(t.TempDir(), "progress.ndjson")}, flags...)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	writeErr := make(chan error, 1)
	go func() { writeErr <- in.write(ctx, 6000, rand.New(rand.NewPCG(1, 2))) }()

	replays := 0
	kinds := map[string]int{} // state files seen after kills, by extension
	survived := killLoop(t, kills, args, env, rng, 50*time.Millisecond, 400*time.Millisecond, nil, func(stderr string) {
		replays += strings.Count(stderr, "replaying a batch interrupted by a crash")
		if keys > 0 && !strings.HasPrefix(lakeURL, "s3://") { // what the kill left in the checkpoint's state/
			files, _ := filepath.Glob(filepath.Join(lakeURL, "_checkpoints", "stream", "state", "*"))
			for _, f := range files {
				kinds[filepath.Ext(f)]++
			}
		}
	})
	if err := <-writeErr; err != nil {
		t.Fatalf("writer: %v", err)
	}
	// Finish (process everything, close every window); window_results
	// equals an uninterrupted run over the same files.
	finishAndCompare(t, args, env, lakeDir, refURL, survived)
	t.Logf("survived %d kill -9s; %d restarts replayed a batch the kill interrupted", survived, replays)
	if keys > 0 && !strings.HasPrefix(lakeURL, "s3://") {
		t.Logf("state files seen after the kills: %v", kinds)
		if kinds[".snapshot"] == 0 || kinds[".changelog"] == 0 {
			t.Errorf("state files seen after the kills: %v; want snapshots and changelogs", kinds)
		}
	}

	// Every line exactly once, by file and offset.
	lk := openTestLake(t, lakeDir)
	checkOnce(t, in.lines, lakeLines(t, lk, lake.RawQuery{Columns: []string{lake.ColSource, lake.ColFile, lake.ColOffset}}, nil))
}

func head(s []string) []string {
	if len(s) > 5 {
		return s[:5]
	}
	return s
}

func openTestLake(t *testing.T, loc string) *lake.Lake {
	t.Helper()
	st, err := store.Open(context.Background(), loc, store.S3Config{})
	if err != nil {
		t.Fatal(err)
	}
	lk, err := lake.Open(context.Background(), st, lake.Config{})
	if err != nil {
		t.Fatal(err)
	}
	return lk
}

// windowSummary renders every window row's key and aggregate, sorted.
func windowSummary(t *testing.T, lk *lake.Lake) string {
	t.Helper()
	rows, err := lk.Windows(context.Background(), -1<<62, 1<<62, -1)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]string, len(rows))
	for i, r := range rows {
		out[i] = fmt.Sprintf("%s %s n=%d s=%g", r.Window, r.Key, r.Agg.Count, r.Agg.Sum)
	}
	sort.Strings(out)
	return strings.Join(out, "\n")
}

// diffLines lists the lines only in got or only in want (at most 10 each).
func diffLines(got, want string) string {
	g, w := map[string]bool{}, map[string]bool{}
	for _, l := range lines(got) {
		g[l] = true
	}
	for _, l := range lines(want) {
		w[l] = true
	}
	var b strings.Builder
	fmt.Fprintf(&b, "got %d rows, want %d\n", len(g), len(w))
	n := 0
	for _, l := range lines(got) {
		if !w[l] && n < 10 {
			fmt.Fprintf(&b, "only in got:  %s\n", l)
			n++
		}
	}
	n = 0
	for _, l := range lines(want) {
		if !g[l] && n < 10 {
			fmt.Fprintf(&b, "only in want: %s\n", l)
			n++
		}
	}
	return b.String()
}

// lakeLines counts the lines the lake holds by "source/file@offset": every
// raw_events row the query reads (also passed to onRaw, when set) and every
// quarantine row.
func lakeLines(t *testing.T, lk *lake.Lake, q lake.RawQuery, onRaw func(b lake.RawBatch, i int)) map[string]int {
	t.Helper()
	got := map[string]int{}
	err := lk.ScanRaw(context.Background(), q, func(b lake.RawBatch) error {
		for i := 0; i < b.N; i++ {
			got[fmt.Sprintf("%s/%s@%d", filepath.Base(b.Source[i]), b.File[i], b.Offset[i])]++
			if onRaw != nil {
				onRaw(b, i)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	err = lk.ScanQuarantine(context.Background(), func(q lake.QuarantineRow) error {
		got[fmt.Sprintf("%s/%s@%d", filepath.Base(q.Source), q.File, q.Offset)]++
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// checkOnce fails t unless every line written is in got exactly once and got
// holds no other line.
func checkOnce(t *testing.T, written map[string]bool, got map[string]int) {
	t.Helper()
	var missing, doubled, extra []string
	for key := range written {
		switch got[key] {
		case 0:
			missing = append(missing, key)
		case 1:
		default:
			doubled = append(doubled, key)
		}
	}
	for key := range got {
		if _, ok := written[key]; !ok {
			extra = append(extra, key)
		}
	}
	sort.Strings(missing)
	sort.Strings(doubled)
	if len(missing)+len(doubled)+len(extra) > 0 {
		t.Errorf("%d lines written; missing %d %v, doubled %d %v, unknown %d %v", len(written),
			len(missing), head(missing), len(doubled), head(doubled), len(extra), head(extra))
	}
}
