package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"tidemark"
	"tidemark/lake"
)

// alignInput appends lines round-robin to several growing files of two
// sources (three "hosts" in a/, one file in b/) while the stream runs and
// is killed: a small disorder within each file, a malformed line every
// 41st, some lines written in two pieces. written counts the lines done.
type alignInput struct {
	dir     string
	files   []string
	mu      sync.Mutex
	grew    *sync.Cond      // broadcast after each line, and when the writer ends
	lines   map[string]bool // "file@offset" -> malformed
	written int
	done    bool
}

// waitWritten blocks until n lines are written or the writer has ended.
func (in *alignInput) waitWritten(n int) {
	in.mu.Lock()
	defer in.mu.Unlock()
	for in.written < n && !in.done {
		in.grew.Wait()
	}
}

func (in *alignInput) count() int {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.written
}

func (in *alignInput) write(ctx context.Context, total int, rng *rand.Rand) error {
	defer func() {
		in.mu.Lock()
		in.done = true
		in.mu.Unlock()
		in.grew.Broadcast()
	}()
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	offsets := make([]int64, len(in.files))
	handles := make([]*os.File, len(in.files))
	for i, name := range in.files {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(in.dir, name)), 0o755); err != nil {
			return err
		}
		f, err := os.OpenFile(filepath.Join(in.dir, name), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return err
		}
		defer f.Close()
		handles[i] = f
	}
	for n := 0; n < total; n++ {
		fi := n % len(in.files)
		var line string
		bad := n%41 == 40
		if bad {
			line = fmt.Sprintf(`{"event_time": "broken %d"`, n)
		} else {
			t := base.Add(time.Duration(n)*250*time.Millisecond - time.Duration(rng.IntN(3))*time.Second)
			line = fmt.Sprintf(`{"event_time":%q,"page":"/p%d","value":%d}`, t.Format(time.RFC3339Nano), n%5, n%100)
		}
		data := line + "\n"
		cut := len(data)
		if n%7 == 3 {
			cut = len(data) / 2
		}
		if _, err := handles[fi].WriteString(data[:cut]); err != nil {
			return err
		}
		if cut < len(data) {
			time.Sleep(time.Millisecond) // the writer's pacing, not a test wait
			if _, err := handles[fi].WriteString(data[cut:]); err != nil {
				return err
			}
		}
		in.mu.Lock()
		in.lines[fmt.Sprintf("%s@%d", in.files[fi], offsets[fi])] = bad
		in.written++
		in.mu.Unlock()
		in.grew.Broadcast()
		offsets[fi] += int64(len(data))
		if n%10 == 9 {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(3 * time.Millisecond):
			}
		}
	}
	return nil
}

// TestCrashKill9AlignedFiles is the kill -9 test with several growing files
// per source and one restart after a downtime (a backlog spread over the
// files, caught up in batches of 100): every line lands once, and
// window_results equals an uninterrupted run's, with no row late (no
// file's own disorder exceeds the budget, so none may be).
func TestCrashKill9AlignedFiles(t *testing.T) {
	if testing.Short() {
		t.Skip("crash test: not in -short")
	}
	in := &alignInput{dir: t.TempDir(), files: []string{"a/host0.log", "a/host1.log", "a/host2.log", "b/events.ndjson"}, lines: map[string]bool{}}
	in.grew = sync.NewCond(&in.mu)
	lakeDir := t.TempDir()
	rng := rand.New(rand.NewPCG(43, 10))
	args := []string{"stream", "--source", filepath.Join(in.dir, "a"), "--source", filepath.Join(in.dir, "b"), "--key", "page", "--value", "value",
		"--window", "10s", "--lateness", "5s", "--max-batch-rows", "100", "--rescan-interval", "50ms",
		"--lake", lakeDir, "--progress", filepath.Join(t.TempDir(), "progress.ndjson")}
	const total = 8000
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	writeErr := make(chan error, 1)
	go func() { writeErr <- in.write(ctx, total, rand.New(rand.NewPCG(3, 4))) }()

	survived := 0
	for i := 0; i < 12; i++ {
		if i == 4 {
			// Downtime: the stream stays down while 2000 more lines arrive.
			in.waitWritten(in.count() + 2000)
		}
		cmd := exec.Command(binary, args...)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Duration(100+rng.IntN(400)) * time.Millisecond) // a random moment to kill at
		if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		err := cmd.Wait()
		if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			survived++
		} else {
			t.Fatalf("run %d ended before the kill (%v):\n%s", i, err, stderr.String())
		}
	}
	if err := <-writeErr; err != nil {
		t.Fatalf("writer: %v", err)
	}
	_, stderr, code := run(t, append(args, "--once", "--drain")...)
	if code != 0 {
		t.Fatalf("final run: exit %d\n%s", code, stderr)
	}

	lk := openTestLake(t, lakeDir)
	late := 0
	got := lakeLines(t, lk, lake.RawQuery{Columns: []string{lake.ColSource, lake.ColFile, lake.ColOffset, lake.ColStatus}}, func(b lake.RawBatch, i int) {
		if b.Status[i] == tidemark.StatusLate {
			late++
		}
	})
	checkOnce(t, in.lines, got)
	if late != 0 {
		t.Errorf("%d rows late after %d kills and a downtime; no file's own disorder exceeds the budget", late, survived)
	}
	refLake := t.TempDir()
	ref := append([]string{}, args...)
	for i := range ref {
		if ref[i] == lakeDir {
			ref[i] = refLake
		}
	}
	if _, stderr, code := run(t, append(ref, "--once", "--drain")...); code != 0 {
		t.Fatalf("reference run: exit %d\n%s", code, stderr)
	}
	if gotW, wantW := windowSummary(t, lk), windowSummary(t, openTestLake(t, refLake)); gotW != wantW {
		t.Errorf("window_results after %d kills differ from an uninterrupted run:\n%s", survived, diffLines(gotW, wantW))
	}
	t.Logf("survived %d kill -9s and a downtime of 2000 lines", survived)
}
