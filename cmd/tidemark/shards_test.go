package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"tidemark"
	"tidemark/lake"
	"tidemark/lake/store"
	"tidemark/lake/store/storetest"
)

// writeHostFiles writes n events per host, in order but for a jitter of
// up to 20 s, over 234 minutes, and returns the files and the lines'
// "file@offset" keys.
func writeHostFiles(t *testing.T, hosts, n int) ([]string, map[string]bool) {
	t.Helper()
	dir := t.TempDir()
	rng := rand.New(rand.NewPCG(17, 0))
	base := time.Date(2026, 3, 1, 8, 0, 0, 0, time.UTC)
	var files []string
	lines := map[string]bool{}
	for h := range hosts {
		var b strings.Builder
		for i := range n {
			et := base.Add(time.Duration(i) * 234 * time.Minute / time.Duration(n)).Add(-time.Duration(rng.IntN(20000)) * time.Millisecond)
			lines[fmt.Sprintf("host-%d.ndjson@%d", h, b.Len())] = true
			fmt.Fprintf(&b, `{"event_time":%q,"page":"/p%d","value":%d}`+"\n", et.Format(time.RFC3339Nano), rng.IntN(3), rng.IntN(100))
		}
		f := filepath.Join(dir, fmt.Sprintf("host-%d.ndjson", h))
		if err := os.WriteFile(f, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	return files, lines
}

// checkShardedLake checks a lake the host streams wrote: every line once in
// raw_events, each window key once in window_results, and sum(count) equal
// to the rows the streams accepted and to the sum of every shard's partials
// (nothing lost, doubled or merged twice).
func checkShardedLake(t *testing.T, lk *lake.Lake, lines map[string]bool) {
	t.Helper()
	ctx := context.Background()
	var ok int64
	got := lakeLines(t, lk, lake.RawQuery{Columns: []string{lake.ColSource, lake.ColFile, lake.ColOffset, lake.ColStatus}}, func(b lake.RawBatch, i int) {
		if b.Status[i] == tidemark.StatusOK {
			ok++
		}
	})
	byFile := map[string]int{}
	for k, n := range got {
		_, fileAt, _ := strings.Cut(k, "/")
		byFile[fileAt] += n
	}
	checkOnce(t, lines, byFile)
	rows, err := lk.Windows(ctx, lake.AllFrom, lake.AllTo, 0)
	if err != nil {
		t.Fatal(err)
	}
	var sum int64
	seen := map[string]bool{}
	for _, r := range rows {
		id := r.Window.String() + r.Key.String()
		if seen[id] {
			t.Errorf("window %s key %s twice", r.Window, r.Key)
		}
		seen[id] = true
		sum += r.Agg.Count
	}
	parts, err := lk.Partials(ctx, lake.AllFrom, lake.AllTo, 0)
	if err != nil {
		t.Fatal(err)
	}
	var psum int64
	for _, p := range parts {
		psum += p.Agg.Count
	}
	if sum != ok || psum != ok {
		t.Errorf("window_results sum(count) = %d, partials %d, want the %d rows the streams accepted (%d lines)", sum, psum, ok, len(lines))
	}
}

// TestThreeStreamsS3Lake: three `tidemark stream --name host-N` run at the
// same time into one S3 lake on versitygw; window_results holds every
// event once, `tidemark shards` lists them, and a plain reconcile leaves
// nothing to correct.
func TestThreeStreamsS3Lake(t *testing.T) {
	needBinary(t) // here, not in its goroutines: only the test goroutine may skip
	srv := storetest.StartVersity(t)
	env := []string{"AWS_ACCESS_KEY_ID=" + srv.AccessKey, "AWS_SECRET_ACCESS_KEY=" + srv.SecretKey, "AWS_REGION=" + srv.Region, "AWS_ENDPOINT_URL=" + srv.Endpoint}
	lakeURL := "s3://" + srv.Bucket(t) + "/lake"
	files, written := writeHostFiles(t, 3, 4000)
	var wg sync.WaitGroup
	for h, f := range files {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, stderr, code := runEnv(t, env, "stream", "--name", fmt.Sprintf("host-%d", h), "--source", f, "--key", "page", "--value", "value",
				"--window", "1m", "--lateness", "1m", "--max-batch-rows", "500", "--once", "--drain", "--lake", lakeURL, "--progress", "/dev/null")
			if code != 0 {
				t.Errorf("stream host-%d: exit %d\n%s", h, code, stderr)
			}
		}()
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	checkShardedLake(t, openTestLakeEnv(t, lakeURL, srv), written)
	out, stderr, code := runEnv(t, env, "shards", "--lake", lakeURL, "--format", "csv")
	if code != 0 {
		t.Fatalf("shards: exit %d\n%s", code, stderr)
	}
	for h := range 3 {
		if !strings.Contains(out, fmt.Sprintf("host-%d,", h)) {
			t.Errorf("shards does not list host-%d:\n%s", h, out)
		}
	}
	if n := len(lines(out)); n != 4 {
		t.Errorf("shards: %d lines, want a header and 3 shards:\n%s", n, out)
	}
	out, stderr, code = runEnv(t, env, "reconcile", "--lake", lakeURL, "--format", "json")
	if code != 0 {
		t.Fatalf("reconcile: exit %d\n%s", code, stderr)
	}
	var rep struct {
		Checked   int64 `json:"windows_checked"`
		Corrected int64 `json:"windows_corrected"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("reconcile --format json: %v\n%s", err, out)
	}
	if rep.Checked == 0 || rep.Corrected != 0 {
		t.Errorf("reconcile checked %d windows and corrected %d; want the closed windows checked and none wrong:\n%s", rep.Checked, rep.Corrected, out)
	}
}

func openTestLakeEnv(t *testing.T, loc string, srv *storetest.Server) *lake.Lake {
	t.Helper()
	t.Setenv("AWS_ACCESS_KEY_ID", srv.AccessKey)
	t.Setenv("AWS_SECRET_ACCESS_KEY", srv.SecretKey)
	t.Setenv("AWS_REGION", srv.Region)
	t.Setenv("AWS_ENDPOINT_URL", srv.Endpoint)
	return openTestLake(t, loc)
}

// TestShardKill9: one of two streams on a shared lake is killed -9 at
// random moments while the other runs, then restarted to the end: every
// line is in raw_events once and window_results holds each accepted row
// once (nothing lost, doubled or merged twice).
func TestShardKill9(t *testing.T) {
	needBinary(t)
	t.Parallel() // waits mostly on fsync and kills, beside the other slow binary tests
	lakeDir := filepath.Join(t.TempDir(), "lake")
	files, lines := writeHostFiles(t, 2, 3000)
	args := hostArgs(files, lakeDir, "7")
	killBeside(t, args(1), args(0), 6, rand.New(rand.NewPCG(9, 9)), 100, 500)
	checkShardedLake(t, openTestLake(t, lakeDir), lines)
}

// TestShardHandOverKill9: host-0 writes the lake alone (window rows
// straight into window_results, no window_partials) and keeps writing while
// host-1 starts, is killed with SIGKILL early in its run (where it hands the
// lake over to window_partials) several times, and finishes: every line
// once, and window_results and the partials both hold every accepted row
// once.
func TestShardHandOverKill9(t *testing.T) {
	needBinary(t)
	t.Parallel() // waits mostly on fsync and kills, beside the other slow binary tests
	lakeDir := filepath.Join(t.TempDir(), "lake")
	files, lines := writeHostFiles(t, 2, 1200)
	args := hostArgs(files, lakeDir, "10")
	// host-0 first reads the first half of its file alone (no drain), then
	// the rest, appended, while host-1 starts.
	data, err := os.ReadFile(files[0])
	if err != nil {
		t.Fatal(err)
	}
	half := strings.IndexByte(string(data[len(data)/2:]), '\n') + len(data)/2 + 1
	if err := os.WriteFile(files[0], data[:half], 0o644); err != nil {
		t.Fatal(err)
	}
	if _, stderr, code := run(t, slices.DeleteFunc(args(0), func(a string) bool { return a == "--drain" })...); code != 0 {
		t.Fatalf("host-0 alone: exit %d\n%s", code, stderr)
	}
	lk := openTestLake(t, lakeDir)
	if parts, err := lk.Partials(context.Background(), lake.AllFrom, lake.AllTo, 0); err != nil || len(parts) != 0 {
		t.Fatalf("a lone stream wrote %d window_partials rows (%v), want none", len(parts), err)
	}
	appendFile(t, files[0], string(data[half:]))
	// host-0 again: it commits solo until host-1's hand-over, then as a shard.
	killBeside(t, args(0), args(1), 3, rand.New(rand.NewPCG(4, 2)), 30, 300)
	checkShardedLake(t, openTestLake(t, lakeDir), lines)
}

// hostArgs returns the arguments of host h's `stream --once --drain` over
// its file into lakeDir, maxBatch rows a batch.
func hostArgs(files []string, lakeDir, maxBatch string) func(h int) []string {
	return func(h int) []string {
		return []string{"stream", "--name", fmt.Sprintf("host-%d", h), "--source", files[h], "--key", "page", "--value", "value",
			"--window", "1m", "--lateness", "1m", "--max-batch-rows", maxBatch, "--once", "--drain", "--lake", lakeDir, "--progress", "/dev/null"}
	}
}

// killBeside runs the stream steady to its end while it starts the stream
// victim n times, killing each run with SIGKILL after a random lo to
// lo+spread milliseconds, then runs victim to its end; at least one run
// must have died by the signal (one that finished first must not have
// failed).
func killBeside(t *testing.T, steady, victim []string, n int, rng *rand.Rand, lo, spread int) {
	t.Helper()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		if _, stderr, code := run(t, steady...); code != 0 {
			t.Errorf("%v: exit %d\n%s", steady, code, stderr)
		}
	}()
	kills := 0
	for range n {
		needBinary(t)
		cmd := exec.Command(binary, victim...)
		cmd.Dir = repoRoot(t)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Duration(lo+rng.IntN(spread)) * time.Millisecond)
		_ = cmd.Process.Signal(syscall.SIGKILL)
		_ = cmd.Wait()
		if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			kills++
		} else if strings.Contains(stderr.String(), "level=ERROR") {
			t.Fatalf("%v failed before the kill:\n%s", victim, stderr.String())
		}
	}
	if _, stderr, code := run(t, victim...); code != 0 {
		t.Fatalf("%v final run: exit %d\n%s", victim, code, stderr)
	}
	wg.Wait()
	t.Logf("%v survived %d kill -9s", victim[:3], kills)
	if kills == 0 {
		t.Fatal("no run was killed; the test proved nothing")
	}
}

// TestShardIdleFlag: --shard-idle decides which shard `tidemark shards`
// (and so reconcile, through the same lake.Config.ShardIdle) calls idle; a
// non-positive value is refused by every command that takes it.
func TestShardIdleFlag(t *testing.T) {
	needBinary(t)
	ctx := context.Background()
	dir := t.TempDir()
	st, err := store.OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	lk, err := lake.Open(ctx, st, lake.Config{Keys: []string{"page"}, Window: tidemark.WindowSpec{Size: 60e6}})
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	// b's last commit is 2 minutes older than a's: active under the
	// default 5 minutes, idle under --shard-idle 1m.
	for i, id := range []string{"id-b", "id-a"} {
		w := t0.UnixMicro()
		rec := tidemark.Record{EventTime: w, Key: tidemark.MakeKey(tidemark.KeyPart{Value: "/p"}), Status: tidemark.StatusOK, Source: "s", File: "f", Offset: int64(i)}
		if err := lk.AppendBatch(ctx, lake.Batch{AppID: id, BatchID: 0, Records: []tidemark.Record{rec}, Watermark: &w,
			IngestTime: t0.Add(time.Duration(i) * 2 * time.Minute).UnixMicro()}); err != nil {
			t.Fatal(err)
		}
	}
	states := func(args ...string) string {
		t.Helper()
		out, stderr, code := run(t, append([]string{"shards", "--lake", dir, "--format", "csv"}, args...)...)
		if code != 0 {
			t.Fatalf("shards %v: exit %d\n%s", args, code, stderr)
		}
		var got []string
		for _, l := range lines(out)[1:] {
			f := strings.Split(l, ",")
			got = append(got, f[1]+"="+f[len(f)-1])
		}
		return strings.Join(got, " ")
	}
	if got, want := states(), "id-a=active id-b=active"; got != want {
		t.Errorf("shards: %s, want %s", got, want)
	}
	if got, want := states("--shard-idle", "1m"), "id-a=active id-b=idle"; got != want {
		t.Errorf("shards --shard-idle 1m: %s, want %s", got, want)
	}
	for _, args := range [][]string{
		{"shards", "--lake", dir, "--shard-idle", "0s"},
		{"reconcile", "--lake", dir, "--dry-run", "--shard-idle", "-1m"},
		{"stream", "--lake", dir, "--source", dir, "--key", "page", "--window", "1m", "--once", "--shard-idle", "0s"},
	} {
		if _, stderr, code := run(t, args...); code == 0 || !strings.Contains(stderr, "--shard-idle") {
			t.Errorf("%v: exit %d, want a refusal naming --shard-idle:\n%s", args, code, stderr)
		}
	}
}
