package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"tidemark/lake"
)

// TestAutoCompactKill9 kills the stream at random moments while its
// background compaction runs (two files of a partition are enough to
// merge, batches of 50 lines): after the kills and a final run, every line
// is in the lake exactly once and window_results equals an uninterrupted
// run's. Runs that compacted are counted from the stream's log.
func TestAutoCompactKill9(t *testing.T) {
	if testing.Short() {
		t.Skip("full tier: kills the binary")
	}
	in := newCrashInput(t.TempDir(), 0)
	in.step = 100 * time.Millisecond // many lines per raw_events partition (an event hour)
	lakeDir, refDir := t.TempDir(), t.TempDir()
	args := []string{"stream", "--source", filepath.Join(in.dir, "a"), "--source", filepath.Join(in.dir, "b"), "--key", "page", "--value", "value",
		"--window", "1m", "--lateness", "30s", "--max-batch-rows", "50", "--rescan-interval", "50ms", "--trigger", "0",
		"--auto-compact-min-files", "2", "--lake", lakeDir, "--progress", filepath.Join(t.TempDir(), "progress.ndjson")}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	writeErr := make(chan error, 1)
	go func() { writeErr <- in.write(ctx, 6000, rand.New(rand.NewPCG(5, 6))) }()
	compacted := 0
	survived := killLoop(t, 24, args, nil, rand.New(rand.NewPCG(7, 8)), 100*time.Millisecond, 600*time.Millisecond, nil, func(stderr string) {
		compacted += strings.Count(stderr, "auto compaction")
	})
	if err := <-writeErr; err != nil {
		t.Fatalf("writer: %v", err)
	}
	finishAndCompare(t, args, nil, lakeDir, refDir, survived)
	lk := openTestLake(t, lakeDir)
	checkOnce(t, in.lines, lakeLines(t, lk, lake.RawQuery{Columns: []string{lake.ColSource, lake.ColFile, lake.ColOffset}}, nil))
	optimized := optimizeVersions(t, filepath.Join(lakeDir, lake.TableRawEvents))
	t.Logf("survived %d kill -9s; %d compactions logged before the kills, %d in raw_events", survived, compacted, len(optimized))
	if len(optimized) < 2 {
		t.Errorf("raw_events has %d auto compactions, want several: the test killed nothing that compacted", len(optimized))
	}
	checkCompactionsKeepRows(t, lk, optimized)
}

// optimizeVersions lists the versions of a table's log that are auto
// compactions (OPTIMIZE with auto=true).
func optimizeVersions(t *testing.T, table string) []int64 {
	t.Helper()
	names, err := filepath.Glob(filepath.Join(table, "_delta_log", "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	var out []int64
	for _, name := range names {
		data, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range bytes.Split(data, []byte("\n")) {
			var a struct {
				CommitInfo *struct {
					Operation  string            `json:"operation"`
					Parameters map[string]string `json:"operationParameters"`
				} `json:"commitInfo"`
			}
			if json.Unmarshal(line, &a) == nil && a.CommitInfo != nil && a.CommitInfo.Operation == "OPTIMIZE" && a.CommitInfo.Parameters["auto"] == "true" {
				v, err := strconv.ParseInt(strings.TrimSuffix(filepath.Base(name), ".json"), 10, 64)
				if err != nil {
					t.Fatal(err)
				}
				out = append(out, v)
			}
		}
	}
	slices.Sort(out)
	return out
}

// checkCompactionsKeepRows fails t unless raw_events reads the same rows
// (by source, file and offset) just before and at each version given.
func checkCompactionsKeepRows(t *testing.T, lk *lake.Lake, versions []int64) {
	t.Helper()
	cols := []string{lake.ColSource, lake.ColFile, lake.ColOffset, lake.ColEventTime}
	rows := func(v int64) []string {
		var out []string
		err := lk.ScanRaw(context.Background(), lake.RawQuery{Columns: cols, Version: v}, func(b lake.RawBatch) error {
			for i := range b.N {
				out = append(out, fmt.Sprintf("%s/%s@%d %d", b.Source[i], b.File[i], b.Offset[i], b.EventTime[i]))
			}
			return nil
		})
		if err != nil {
			t.Fatalf("read raw_events at version %d: %v", v, err)
		}
		slices.Sort(out)
		return out
	}
	for _, v := range versions {
		before, after := rows(v-1), rows(v)
		if !slices.Equal(before, after) {
			t.Errorf("raw_events: %d rows before the compaction of version %d, %d after, or other rows", len(before), v, len(after))
		}
	}
}

// TestSoakFollowingStream feeds a following stream with the default
// batching ~1,000 lines/s of current event times for a few minutes, with
// auto compaction merging 4 files of a tier (16 by default: the same
// mechanism, sooner). raw_events' active files stay bounded where one file
// per batch would grow, its commits do not grow with the lake, and readers
// see the same rows before and after each background compaction.
func TestSoakFollowingStream(t *testing.T) {
	if testing.Short() {
		t.Skip("full tier: a following stream for minutes")
	}
	const rate, seconds, trigger = 1000, 150, 2 * time.Second
	dir, lakeDir := t.TempDir(), t.TempDir()
	files := []string{filepath.Join(dir, "a.ndjson"), filepath.Join(dir, "b.ndjson")}
	for _, f := range files {
		if err := os.WriteFile(f, nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	needBinary(t)
	args := []string{"stream", "--source", files[0], "--source", files[1], "--key", "page", "--value", "value",
		"--window", "10s", "--trigger", trigger.String(), "--auto-compact-min-files", "4", "--lake", lakeDir,
		"--progress", filepath.Join(t.TempDir(), "progress.ndjson")}
	cmd := exec.Command(binary, append(args, "--metrics-addr", "off")...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()

	outs := make([]*os.File, len(files))
	for i, f := range files {
		var err error
		if outs[i], err = os.OpenFile(f, os.O_WRONLY|os.O_APPEND, 0); err != nil {
			t.Fatal(err)
		}
		defer outs[i].Close()
	}
	const tick = 10 * time.Millisecond
	perTick := rate * int(tick) / int(time.Second) / len(files)
	maxFiles, batchFiles := 0, 0
	var commitSizes []int64
	written := 0
	next := time.Now()
	for n := range seconds * int(time.Second/tick) {
		next = next.Add(tick)
		time.Sleep(time.Until(next)) // the feeder's pacing, not a test wait
		stamp := time.Now().UTC().Format(time.RFC3339Nano)
		for _, out := range outs {
			var b strings.Builder
			for range perTick {
				fmt.Fprintf(&b, `{"event_time":%q,"page":"/p%d","value":%d,"id":%d}`+"\n", stamp, written%20, written%100, written)
				written++
			}
			if _, err := out.WriteString(b.String()); err != nil {
				t.Fatal(err)
			}
		}
		if n%500 == 499 { // every 5 s, past the first minute: what the lake holds
			files, sizes := rawEventsShape(t, lakeDir)
			if n > 6000 {
				maxFiles = max(maxFiles, files)
			}
			batchFiles = max(batchFiles, len(sizes))
			commitSizes = sizes
		}
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("stream: %v\n%s", err, stderr.String())
	}
	// Lines still being gathered at the stop are not committed: the next
	// start reads them.
	if _, stderr, code := runEnv(t, nil, append(args, "--once")...); code != 0 {
		t.Fatalf("restart: exit %d\n%s", code, stderr)
	}
	lk := openTestLake(t, lakeDir)
	ids := map[int]int{}
	err := lk.ScanRaw(context.Background(), lake.RawQuery{Columns: []string{lake.ColPayload}}, func(b lake.RawBatch) error {
		for i := range b.N {
			var l struct{ ID int }
			if err := json.Unmarshal(b.Payload[i], &l); err != nil {
				return err
			}
			ids[l.ID]++
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for id := range written {
		if ids[id] != 1 {
			t.Fatalf("line %d is in raw_events %d times, want once", id, ids[id])
		}
	}
	optimized := optimizeVersions(t, filepath.Join(lakeDir, lake.TableRawEvents))
	checkCompactionsKeepRows(t, lk, optimized)
	// The number of commits is the log's; every commit is small, and
	// later ones are no bigger than early ones (nothing grows with age).
	early, late := slices.Max(commitSizes[:len(commitSizes)/4]), slices.Max(commitSizes[len(commitSizes)*3/4:])
	t.Logf("%d lines in %d s; %d raw_events commits, %d auto compactions; at most %d active files after the first minute; commit bytes: early max %d, late max %d",
		written, seconds, batchFiles, len(optimized), maxFiles, early, late)
	if len(optimized) == 0 {
		t.Fatal("no auto compaction in raw_events")
	}
	// Without compaction: one file per batch, a batch per 2 s (75 in the
	// run). With it: under 4 files per size tier (about 4 tiers) per
	// partition, and the run may span an hour boundary (2 partitions).
	if maxFiles > 2*4*4 {
		t.Errorf("raw_events held up to %d active files, want at most %d", maxFiles, 2*4*4)
	}
	if late > 2*early+1024 {
		t.Errorf("raw_events commits grew from %d to %d bytes", early, late)
	}
}

// rawEventsShape is raw_events' active file count and the size of each
// JSON commit of its log, in version order.
func rawEventsShape(t *testing.T, lakeDir string) (int, []int64) {
	t.Helper()
	names, err := filepath.Glob(filepath.Join(lakeDir, lake.TableRawEvents, "_delta_log", "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	var sizes []int64
	for _, n := range names {
		if fi, err := os.Stat(n); err == nil {
			sizes = append(sizes, fi.Size())
		}
	}
	tables, err := openTestLake(t, lakeDir).Tables(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, tb := range tables {
		if tb.Name == lake.TableRawEvents {
			return tb.Files, sizes
		}
	}
	t.Fatal("no raw_events")
	return 0, nil
}
