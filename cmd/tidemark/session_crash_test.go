package main

import (
	"cmp"
	"context"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"tidemark/lake"
)

// TestSessionCrashKill9 is the crash test for session windows: the binary,
// streaming --session-gap 6s over two growing sources (5 keys, each with
// an event about every 5 s, up to 2 s out of order, so sessions both close
// and merge), is killed with SIGKILL at random moments and restarted; then
// every input line is in raw_events or quarantine exactly once, and
// window_results (the sessions) equals an uninterrupted run's.
func TestSessionCrashKill9(t *testing.T) {
	if testing.Short() {
		t.Skip("crash test: not in -short")
	}
	in := newCrashInput(t.TempDir(), 0)
	lakeDir, refDir := t.TempDir(), t.TempDir()
	args := []string{"stream", "--source", filepath.Join(in.dir, "a"), "--source", filepath.Join(in.dir, "b"), "--key", "page", "--value", "value",
		"--session-gap", "6s", "--lateness", "30s", "--max-batch-rows", "150", "--rescan-interval", "50ms",
		"--lake", lakeDir, "--progress", filepath.Join(t.TempDir(), "progress.ndjson")}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	writeErr := make(chan error, 1)
	go func() { writeErr <- in.write(ctx, 4000, rand.New(rand.NewPCG(1, 2))) }()
	replays := 0
	survived := killLoop(t, 12, args, nil, rand.New(rand.NewPCG(42, 13)), 50*time.Millisecond, 400*time.Millisecond, nil, func(stderr string) {
		replays += strings.Count(stderr, "replaying a batch interrupted by a crash")
	})
	if err := <-writeErr; err != nil {
		t.Fatalf("writer: %v", err)
	}
	finishAndCompare(t, args, nil, lakeDir, refDir, survived)
	t.Logf("survived %d kill -9s; %d restarts replayed a batch the kill interrupted", survived, replays)

	lk := openTestLake(t, lakeDir)
	if lk.Config().SessionGap != 6*time.Second {
		t.Fatalf("the lake records session gap %s", lk.Config().SessionGap)
	}
	// The sessions are not trivial: some of one event, some merged from
	// several, and none of one key overlapping another.
	rows, err := lk.Windows(context.Background(), -1<<62, 1<<62, -1)
	if err != nil {
		t.Fatal(err)
	}
	slices.SortFunc(rows, func(a, b lake.WindowRow) int {
		return cmp.Or(a.Key.Compare(b.Key), cmp.Compare(a.Window.Start, b.Window.Start))
	})
	single, merged := 0, 0
	last := map[string]int64{}
	for _, r := range rows {
		if r.Agg.Count == 1 {
			single++
		} else {
			merged++
		}
		if end, ok := last[r.Key.String()]; ok && r.Window.Start < end {
			t.Fatalf("session %s of %s overlaps one ending at %d", r.Window, r.Key, end)
		}
		last[r.Key.String()] = r.Window.End
	}
	if single == 0 || merged == 0 {
		t.Fatalf("%d sessions of one event, %d of several: want both", single, merged)
	}
	t.Logf("%d sessions: %d of one event, %d of several", len(rows), single, merged)
	checkOnce(t, in.lines, lakeLines(t, lk, lake.RawQuery{Columns: []string{lake.ColSource, lake.ColFile, lake.ColOffset}}, nil))
}
