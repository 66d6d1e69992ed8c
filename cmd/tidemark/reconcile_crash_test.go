package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"tidemark/lake"
)

// TestReconcileKill9 kills `tidemark reconcile` with SIGKILL at random
// moments of its run, each time on a fresh copy of one lake with hundreds
// of windows to correct, then reruns it to completion: every window
// reconcile wrote has exactly its one reconcile_log row, and
// window_results equals that of an uninterrupted run. On a lake with
// --agg, where reconcile rewrites every window exact, the --agg values
// and exact are compared too.
func TestReconcileKill9(t *testing.T) {
	if testing.Short() {
		t.Skip("full tier: a kill -9 loop on the real binary")
	}
	t.Run("plain", func(t *testing.T) { reconcileKill9(t, 32, nil) })
	t.Run("aggs", func(t *testing.T) {
		reconcileKill9(t, 16, []string{"--agg", "avg(v)", "--agg", "p99(v)", "--agg", "p50(v)", "--agg", "count_distinct(u)"})
	})
}

func reconcileKill9(t *testing.T, runs int, aggs []string) {
	// Events a second apart over 4 hours, 5 keys; every 4th line arrives
	// 2 hours late, so the stream (lateness 1m) drops it and reconcile
	// corrects hundreds of one-minute windows.
	in := t.TempDir()
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var b strings.Builder
	for i := range 4 * 3600 {
		ev := base.Add(time.Duration(i) * time.Second)
		if i%4 == 3 {
			ev = ev.Add(-2 * time.Hour)
		}
		fmt.Fprintf(&b, `{"event_time":%q,"k":"k%d","v":%d,"u":"u%d"}`+"\n", ev.Format(time.RFC3339), i%5, i%10, (i*7)%23)
	}
	if err := os.WriteFile(filepath.Join(in, "events.ndjson"), []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	orig := filepath.Join(t.TempDir(), "lake")
	args := append([]string{"stream", "--source", in, "--key", "k", "--value", "v", "--window", "1m",
		"--lateness", "1m", "--max-batch-rows", "500", "--once", "--drain", "--lake", orig, "--progress", "/dev/null"}, aggs...)
	if _, stderr, code := run(t, args...); code != 0 {
		t.Fatalf("stream: exit %d\n%s", code, stderr)
	}
	fresh := func() string {
		t.Helper()
		dir := filepath.Join(t.TempDir(), "lake")
		if err := os.CopyFS(dir, os.DirFS(orig)); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	reconcile := func(dir string) string {
		t.Helper()
		out, stderr, code := run(t, "reconcile", "--lake", dir, "--format", "json")
		if code != 0 {
			t.Fatalf("reconcile: exit %d\n%s", code, stderr)
		}
		return out
	}
	ref := fresh()
	start := time.Now()
	out := reconcile(ref)
	took := time.Since(start)
	if !strings.Contains(out, `"windows_corrected":`) || strings.Contains(out, `"windows_corrected":0`) {
		t.Fatalf("reference reconcile corrected nothing: %s", out)
	}
	want := exactSummary(t, openTestLake(t, ref))
	if aggs != nil && (strings.Contains(want, "exact=false") || !strings.Contains(want, "exact=true")) {
		t.Fatalf("reference reconcile left windows estimated:\n%s", want)
	}
	t.Logf("reference run: %s, %s", took.Round(time.Millisecond), out)

	wrVersion, err := openTestLake(t, orig).Version(context.Background(), lake.TableWindowResults)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(7, 33))
	killed, between := 0, 0
	for i := range runs {
		dir := fresh()
		cmd := exec.Command(binary, "reconcile", "--lake", dir)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		if i%2 == 0 {
			time.Sleep(time.Duration(rng.Int64N(int64(took)))) // a random moment of the run
		} else {
			// The moment the corrections are committed, before their
			// log is: the window a rerun must complete.
			next := filepath.Join(dir, "window_results", "_delta_log", fmt.Sprintf("%020d.json", wrVersion+1))
			for deadline := time.Now().Add(10 * took); time.Now().Before(deadline); time.Sleep(200 * time.Microsecond) {
				if _, err := os.Stat(next); err == nil {
					break
				}
			}
		}
		_ = cmd.Process.Signal(syscall.SIGKILL)
		_ = cmd.Wait()
		if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			killed++
		}
		lk := openTestLake(t, dir)
		wtx, err := lk.Txns(context.Background(), lake.TableWindowResults)
		if err != nil {
			t.Fatal(err)
		}
		ltx, err := lk.Txns(context.Background(), lake.TableReconcileLog)
		if err != nil {
			t.Fatal(err)
		}
		if wtx["tidemark-reconcile"] > ltx["tidemark-reconcile"] {
			between++ // killed between the corrections and their log
		}
		// A directory lake's lock is an flock: the killed run's is gone.
		reconcile(dir)
		lk = openTestLake(t, dir)
		if got := exactSummary(t, lk); got != want {
			t.Errorf("run %d: window_results after kill and rerun differ from an uninterrupted run:\n%s", i, diffLines(got, want))
		}
		if bad := logDisagreement(t, lk); bad != "" {
			t.Errorf("run %d: window_results and reconcile_log disagree after kill and rerun:\n%s", i, bad)
		}
	}
	t.Logf("%d runs, %d killed, %d killed between the window_results and reconcile_log commits", runs, killed, between)
	if killed == 0 || between == 0 {
		t.Error("no run was killed between the two commits: the test proves nothing")
	}
}

// exactSummary is windowSummary with the --agg values and exact of each
// row, on a lake with --agg.
func exactSummary(t *testing.T, lk *lake.Lake) string {
	t.Helper()
	if lk.Config().Aggs.Empty() {
		return windowSummary(t, lk)
	}
	rows, err := lk.Windows(context.Background(), lake.AllFrom, lake.AllTo, -1)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]string, len(rows))
	for i, r := range rows {
		out[i] = fmt.Sprintf("%s %s n=%d s=%g aggs=%v exact=%v", r.Window, r.Key, r.Agg.Count, r.Agg.Sum, r.Aggs, r.Exact)
	}
	slices.Sort(out)
	return strings.Join(out, "\n")
}

// logDisagreement lists the windows reconcile wrote (origin batch) without
// exactly one reconcile_log row of their value, and log rows without their
// window.
func logDisagreement(t *testing.T, lk *lake.Lake) string {
	t.Helper()
	ctx := context.Background()
	rows, err := lk.Windows(ctx, lake.AllFrom, lake.AllTo, 0)
	if err != nil {
		t.Fatal(err)
	}
	logRows, err := lk.ReconcileLog(ctx)
	if err != nil {
		t.Fatal(err)
	}
	logged := map[string]int{}
	for _, r := range logRows {
		logged[fmt.Sprintf("%s %s n=%d", r.Window, r.Key, r.New.Count)]++
	}
	var bad []string
	for _, r := range rows {
		if r.Origin != lake.OriginBatch {
			continue
		}
		k := fmt.Sprintf("%s %s n=%d", r.Window, r.Key, r.Agg.Count)
		if logged[k] != 1 {
			bad = append(bad, fmt.Sprintf("%s: %d log rows", k, logged[k]))
		}
		delete(logged, k)
	}
	for k := range logged {
		bad = append(bad, k+": log row without its window")
	}
	if len(bad) > 10 {
		bad = append(bad[:10], fmt.Sprintf("... %d more", len(bad)-10))
	}
	return strings.Join(bad, "\n")
}
