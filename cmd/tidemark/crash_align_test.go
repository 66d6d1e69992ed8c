package main

import (
	"context"
	"math/rand/v2"
	"path/filepath"
	"testing"
	"time"

	"tidemark"
	"tidemark/lake"
)

// TestCrashKill9AlignedFiles is the kill -9 test with several growing files
// per source and one restart after a downtime (a backlog spread over the
// files, caught up in batches of 100): every line lands once, and
// window_results equals an uninterrupted run's, with no row late (no
// file's own disorder exceeds the budget, so none may be).
func TestCrashKill9AlignedFiles(t *testing.T) {
	if testing.Short() {
		t.Skip("crash test: not in -short")
	}
	// Several growing files per source (three "hosts" in a/, one file in
	// b/), round-robin, four events a second, a malformed line every 41st.
	in := newAppender(&appender{dir: t.TempDir(), files: []string{"a/host0.log", "a/host1.log", "a/host2.log", "b/events.ndjson"},
		badEvery: 41, step: 250 * time.Millisecond, pauseEvery: 10, pause: 3 * time.Millisecond})
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

	survived := killLoop(t, 12, args, nil, rng, 100*time.Millisecond, 400*time.Millisecond, func(i int) {
		if i == 4 {
			// Downtime: the stream stays down while 2000 more lines arrive.
			in.waitWritten(in.count() + 2000)
		}
	}, nil)
	if err := <-writeErr; err != nil {
		t.Fatalf("writer: %v", err)
	}
	finishAndCompare(t, args, nil, lakeDir, t.TempDir(), survived)

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
	t.Logf("survived %d kill -9s and a downtime of 2000 lines", survived)
}
