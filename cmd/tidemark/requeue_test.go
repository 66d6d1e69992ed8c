package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"tidemark/lake"
)

// lineCount is where each line of a lake is, by (file, offset): the
// number of lines in raw_events and in quarantine, failing t on a line in
// both tables or twice in one.
func lineCount(t *testing.T, lakeDir string) (raw, quarantined int) {
	t.Helper()
	lk := openTestLake(t, lakeDir)
	type at struct {
		file   string
		offset int64
	}
	seen := map[at]string{}
	err := lk.ScanRaw(context.Background(), lake.RawQuery{Columns: []string{lake.ColFile, lake.ColOffset}}, func(b lake.RawBatch) error {
		for i := range b.N {
			k := at{b.File[i], b.Offset[i]}
			if seen[k] != "" {
				t.Errorf("line %v twice in raw_events", k)
			}
			seen[k] = "raw"
			raw++
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	err = lk.ScanQuarantine(context.Background(), func(r lake.QuarantineRow) error {
		k := at{r.File, r.Offset}
		if seen[k] != "" {
			t.Errorf("line %v in %s and quarantine", k, seen[k])
		}
		seen[k] = "quarantine"
		quarantined++
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return raw, quarantined
}

// The CLI: a stream with the wrong --time-field quarantines every line
// (the first-batch check off); requeue --dry-run says what would move and
// moves nothing; requeue with the fix moves every line, as late; a second
// run moves nothing; reconcile then runs clean.
func TestRequeueCLI(t *testing.T) {
	if testing.Short() {
		t.Skip("full tier: runs the binary")
	}
	src := mistakeInput(t, "a.ndjson", 40, func(i int) string {
		return fmt.Sprintf(`{"ts":"2026-01-01T10:%02d:00Z","page":"/p%d","v":%d}`, i, i%3, i)
	})
	lakeDir := filepath.Join(t.TempDir(), "lake")
	if _, stderr, code := run(t, "stream", "--source", src, "--lake", lakeDir, "--once", "--window", "1m", "--key", "page", "--value", "v",
		"--no-first-batch-check", "--progress", "/dev/null"); code != 0 || !strings.Contains(stderr, "quarantined 40 (missing_time 40)") {
		t.Fatalf("stream: exit %d\n%s", code, stderr)
	}
	stdout, stderr, code := run(t, "requeue", "--lake", lakeDir, "--time-field", "ts", "--dry-run")
	if code != 0 || !strings.Contains(stdout, "quarantine rows read 40 = would move 40 + stay 0") || !strings.Contains(stdout, "would move to raw_events (status late): missing_time 40") {
		t.Fatalf("dry run: exit %d\n%s%s", code, stdout, stderr)
	}
	if raw, q := lineCount(t, lakeDir); raw != 0 || q != 40 {
		t.Fatalf("after the dry run: raw %d, quarantine %d; want 0, 40", raw, q)
	}
	stdout, stderr, code = run(t, "requeue", "--lake", lakeDir, "--time-field", "ts")
	if code != 0 || !strings.Contains(stdout, "quarantine rows read 40 = moved 40 + stay 0") {
		t.Fatalf("requeue: exit %d\n%s%s", code, stdout, stderr)
	}
	if raw, q := lineCount(t, lakeDir); raw != 40 || q != 0 {
		t.Fatalf("after requeue: raw %d, quarantine %d; want 40, 0", raw, q)
	}
	if stdout, _, code := run(t, "requeue", "--lake", lakeDir, "--time-field", "ts"); code != 0 || !strings.Contains(stdout, "quarantine rows read 0 = moved 0") {
		t.Errorf("second requeue: exit %d\n%s", code, stdout)
	}
	if _, stderr, code := run(t, "reconcile", "--lake", lakeDir); code != 0 {
		t.Errorf("reconcile: exit %d\n%s", code, stderr)
	}
	if _, stderr, code := run(t, "requeue", "--lake", lakeDir, "--max-future", "0s"); code == 0 || !strings.Contains(stderr, "--max-future 0s: want a positive duration") {
		t.Errorf("requeue --max-future 0s: exit %d\n%s", code, stderr)
	}
}

// requeue killed with SIGKILL at random moments: after every kill no line
// is in both tables or in neither (as readers see them), and the next run
// completes the interrupted one, so every line ends in raw_events once.
func TestRequeueKill9(t *testing.T) {
	if testing.Short() {
		t.Skip("full tier: a kill -9 loop on the binary")
	}
	const n = 20000
	src := mistakeInput(t, "a.ndjson", n, func(i int) string {
		return fmt.Sprintf(`{"ts":"2026-01-01T%02d:%02d:%02d.123Z","page":"/p%d","v":%d}`, i/3600%24, i/60%60, i%60, i%5, i)
	})
	base := filepath.Join(t.TempDir(), "base")
	if _, stderr, code := run(t, "stream", "--source", src, "--lake", base, "--once", "--window", "1m", "--key", "page", "--value", "v",
		"--no-first-batch-check", "--max-batch-rows", "5000", "--progress", "/dev/null"); code != 0 {
		t.Fatalf("stream: exit %d\n%s", code, stderr)
	}
	// How long one uninterrupted run takes: the kills land within it.
	timed := filepath.Join(t.TempDir(), "timed")
	copyDir(t, base, timed)
	start := time.Now()
	if _, stderr, code := run(t, "requeue", "--lake", timed, "--time-field", "ts"); code != 0 {
		t.Fatalf("requeue: exit %d\n%s", code, stderr)
	}
	full := time.Since(start)
	rng := rand.New(rand.NewPCG(3, 30))
	killed, completed := 0, 0
	for round := range 8 {
		lakeDir := filepath.Join(t.TempDir(), fmt.Sprintf("round%d", round))
		copyDir(t, base, lakeDir)
		for kill := range 1 + rng.IntN(3) { // kill it again while it completes the last one
			cmd := exec.Command(binary, "requeue", "--lake", lakeDir, "--time-field", "ts")
			var stderr strings.Builder
			cmd.Stderr = &stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			time.Sleep(time.Duration(rng.Int64N(int64(full)))) // a random moment to kill at
			cmd.Process.Signal(syscall.SIGKILL)
			err := cmd.Wait()
			if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
				killed++
			} else if err != nil {
				t.Fatalf("round %d, run %d: %v\n%s", round, kill, err, stderr.String())
			}
			raw, q := lineCount(t, lakeDir)
			if raw+q != n {
				t.Fatalf("round %d after kill %d: raw %d + quarantine %d != %d lines", round, kill, raw, q, n)
			}
		}
		stdout, stderr, code := run(t, "requeue", "--lake", lakeDir, "--time-field", "ts")
		if code != 0 {
			t.Fatalf("round %d, final run: exit %d\n%s", round, code, stderr)
		}
		if strings.Contains(stdout, "completed 1 interrupted") {
			completed++
		}
		if raw, q := lineCount(t, lakeDir); raw != n || q != 0 {
			t.Fatalf("round %d, after the final run: raw %d, quarantine %d; want %d, 0", round, raw, q, n)
		}
	}
	t.Logf("one run %s; %d kills; %d final runs completed an interrupted run", full, killed, completed)
	if killed == 0 {
		t.Error("no run was killed: the loop tested nothing")
	}
}

// copyDir copies a lake directory (cp -a keeps it byte for byte).
func copyDir(t *testing.T, from, to string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("cp", "-a", from, to).CombinedOutput(); err != nil {
		t.Fatalf("cp -a: %v\n%s", err, out)
	}
}

// requeue on CSV input, on the binary: a CSV stream with the wrong
// --time-field quarantines every record; requeue --time-field ts reads the
// header of each file again and moves them all (the lake's format is
// CSV, no --format needed). CSV files streamed as NDJSON quarantine every
// line, the header too; requeue --format csv finds the header in
// quarantine (the files are gone by then) and moves the records, and the
// header line stays. Reconcile then runs clean.
func TestRequeueCSVCLI(t *testing.T) {
	if testing.Short() {
		t.Skip("full tier: runs the binary")
	}
	csvLine := func(i int) string {
		if i == 0 {
			return "ts,page,v"
		}
		return fmt.Sprintf("2026-01-01T10:%02d:00Z,/p%d,%d", i%60, i%3, i)
	}
	for _, tc := range []struct {
		name, streamFormat, requeueFormat string
		removeFiles                       bool
		want                              string
	}{
		{"csv lake: header from the files", "csv", "", false, "quarantine rows read 40 = moved 40 + stay 0"},
		{"read as ndjson: header from quarantine", "ndjson", "csv", true,
			"quarantine rows read 41 = moved 40 + stay 1\n  moved to raw_events (status late): malformed 40\n  stay in quarantine: csv_header (the first line of its file, not a record) 1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := mistakeInput(t, "a.csv", 41, csvLine)
			lakeDir := filepath.Join(t.TempDir(), "lake")
			if _, stderr, code := run(t, "stream", "--source", src, "--lake", lakeDir, "--once", "--window", "1m", "--key", "page", "--value", "v",
				"--format", tc.streamFormat, "--no-first-batch-check", "--progress", "/dev/null"); code != 0 || !strings.Contains(stderr, "ok 0 + late 0 + quarantined") {
				t.Fatalf("stream: exit %d\n%s", code, stderr)
			}
			if tc.removeFiles {
				os.RemoveAll(src)
			}
			args := []string{"requeue", "--lake", lakeDir, "--time-field", "ts"}
			if tc.requeueFormat != "" {
				args = append(args, "--format", tc.requeueFormat)
			}
			stdout, stderr, code := run(t, append(args, "--dry-run")...)
			if code != 0 || !strings.Contains(stdout, strings.ReplaceAll(tc.want, "moved", "would move")) {
				t.Fatalf("dry run: exit %d\n%s%s\nwant %s", code, stdout, stderr, tc.want)
			}
			stdout, stderr, code = run(t, args...)
			if code != 0 || !strings.Contains(stdout, tc.want) {
				t.Fatalf("requeue: exit %d\n%s%s\nwant %s", code, stdout, stderr, tc.want)
			}
			raw, q := lineCount(t, lakeDir)
			if raw != 40 || q != 41-40-strings.Count(tc.streamFormat, "csv") {
				t.Errorf("after requeue: raw %d, quarantine %d; want 40 and the header line only when it was read as a line", raw, q)
			}
			// The stream saw no valid event, so it closed no window: reconcile
			// remembers the moved rows' 40 windows as pending, and the
			// windows recomputed from raw_events hold the records.
			out, stderr, code := run(t, "reconcile", "--lake", lakeDir, "--format", "json")
			if code != 0 || !strings.Contains(out, `"windows_pending":40`) {
				t.Fatalf("reconcile: exit %d\n%s%s\nwant 40 windows pending", code, out, stderr)
			}
			windows, _, _ := run(t, "recompute", "--lake", lakeDir, "--format", "csv")
			if n := len(lines(windows)) - 1; n != 40 || !strings.Contains(windows, "2026-01-01T10:07:00Z,2026-01-01T10:08:00Z,/p1,1,7,7,7") {
				t.Errorf("recomputed: %d windows, want 40 (one per minute, 10:07 holding /p1 with v=7)\n%s", n, windows)
			}
		})
	}
}
