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
)

// aggFlags asks for sketched aggregates over the crash input's value.
var aggFlags = []string{"--agg", "p95(value)", "--agg", "p50(value)", "--agg", "count_distinct(value)", "--agg", "avg(value)"}

// TestCrashKill9Aggs is the high-cardinality crash test with percentile
// and distinct-count sketches in the state (snapshots, changelogs and
// restarts carry them): after the kills every window's aggregates equal an
// uninterrupted run's, and each sketch absorbed exactly one value per row
// the window counted (every valid line has a value): none lost, none
// doubled.
func TestCrashKill9Aggs(t *testing.T) {
	if testing.Short() {
		t.Skip("crash test: not in -short")
	}
	lakeDir, refDir := t.TempDir(), t.TempDir()
	crashAggs(t, 12, lakeDir, refDir, append([]string{"--window", "10m", "--lateness", "30m"}, aggFlags...))
}

// TestCrashKill9AggsPebble is TestCrashKill9Aggs with the open state in
// Pebble (--state-store pebble), whose values carry the sketches.
func TestCrashKill9AggsPebble(t *testing.T) {
	if testing.Short() {
		t.Skip("crash test: not in -short")
	}
	lakeDir, refDir := t.TempDir(), t.TempDir()
	flags := append([]string{"--window", "10m", "--lateness", "30m", "--state-store", "pebble", "--state-dir", filepath.Join(t.TempDir(), "state")}, aggFlags...)
	crashAggs(t, 8, lakeDir, refDir, flags)
}

// crashAggs is crashKill9With's loop (300 keys, two growing sources) with
// kills 0.3-1.2 s into each run, late enough on a loaded machine for the
// runs to commit batches, and so state files, before they die; then the
// checks of crashKill9With and checkAggsAfterKills.
func crashAggs(t *testing.T, kills int, lakeDir, refDir string, flags []string) {
	in := newCrashInput(t.TempDir(), 300)
	args := append([]string{"stream", "--source", filepath.Join(in.dir, "a"), "--source", filepath.Join(in.dir, "b"), "--key", "page", "--value", "value",
		"--max-batch-rows", "150", "--rescan-interval", "50ms", "--lake", lakeDir, "--progress", filepath.Join(t.TempDir(), "progress.ndjson")}, flags...)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	writeErr := make(chan error, 1)
	go func() { writeErr <- in.write(ctx, 6000, rand.New(rand.NewPCG(1, 2))) }()
	kinds := map[string]int{}
	survived := killLoop(t, kills, args, nil, rand.New(rand.NewPCG(42, 10)), 300*time.Millisecond, 900*time.Millisecond, nil, func(string) {
		files, _ := filepath.Glob(filepath.Join(lakeDir, "_checkpoints", "stream", "state", "*"))
		for _, f := range files {
			kinds[filepath.Ext(f)]++
		}
	})
	if err := <-writeErr; err != nil {
		t.Fatalf("writer: %v", err)
	}
	finishAndCompare(t, args, nil, lakeDir, refDir, survived)
	t.Logf("survived %d kill -9s; state files seen after the kills: %v", survived, kinds)
	if kinds[".snapshot"] == 0 || kinds[".changelog"] == 0 {
		t.Errorf("state files seen after the kills: %v; want snapshots and changelogs (the sketches went through no checkpoint)", kinds)
	}
	checkOnce(t, in.lines, lakeLines(t, openTestLake(t, lakeDir), lake.RawQuery{Columns: []string{lake.ColSource, lake.ColFile, lake.ColOffset}}, nil))
	checkAggsAfterKills(t, lakeDir, refDir)
}

func checkAggsAfterKills(t *testing.T, lakeDir, refDir string) {
	t.Helper()
	got, want := aggSummary(t, openTestLake(t, lakeDir)), aggSummary(t, openTestLake(t, refDir))
	if got != want {
		t.Errorf("aggregates after the kills differ from an uninterrupted run:\n%s", diffLines(got, want))
	}
	if n := strings.Count(got, "\n") + 1; n < 100 {
		t.Errorf("only %d window rows", n)
	}
}

// aggSummary renders every window row's aggregates and how many values its
// sketch absorbed, sorted, failing t on a row whose sketch absorbed another
// number of values than the rows it counted.
func aggSummary(t *testing.T, lk *lake.Lake) string {
	t.Helper()
	rows, err := lk.Windows(context.Background(), lake.AllFrom, lake.AllTo, -1)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]string, len(rows))
	for i, r := range rows {
		if r.State == nil {
			t.Fatalf("window %v %s has no aggregate state", r.Window, r.Key)
		}
		absorbed := r.State.Absorbed()
		if absorbed[0] != r.Agg.Count || r.State.Moments[0].Values != r.Agg.Count {
			t.Errorf("window %v %s: the sketch absorbed %d values, the moments %d, the window counted %d rows", r.Window, r.Key, absorbed[0], r.State.Moments[0].Values, r.Agg.Count)
		}
		out[i] = fmt.Sprintf("%s %s n=%d aggs=%v absorbed=%v exact=%v", r.Window, r.Key, r.Agg.Count, r.Aggs, absorbed, r.Exact)
	}
	sort.Strings(out)
	return strings.Join(out, "\n")
}
