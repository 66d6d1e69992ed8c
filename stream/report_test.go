package stream

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/klauspost/compress/gzip"

	"tidemark"
	"tidemark/stream/engine"
)

// TestOnProgressOnce follows a --once --drain run through its progress
// observer: the backlog counts down from every byte pending at the start to
// zero, the running totals add up to the summary, and the last call is the
// drain.
func TestOnProgressOnce(t *testing.T) {
	dir, lakeDir := t.TempDir(), t.TempDir()
	cfg := runnerConfig(t, dir, lakeDir)
	cfg.Once, cfg.Drain, cfg.MaxBatchRows = true, true, 7
	var total int64
	for f := 0; f < 3; f++ {
		var b strings.Builder
		for i := 0; i < 10; i++ {
			sec := f*10 + i
			fmt.Fprintf(&b, `{"event_time":"2026-01-01T00:00:%02dZ","page":"/a","value":1}`+"\n", sec)
		}
		if f == 1 {
			b.WriteString("not json\n")
		}
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("%d.ndjson", f)), []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		total += int64(b.Len())
	}
	var got []Progress
	cfg.OnProgress = func(p Progress) { got = append(got, p) }
	sum, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != int(sum.Batches) {
		t.Fatalf("got %d progress calls, want one per batch (%d)", len(got), sum.Batches)
	}
	var lastDone int64
	for i, p := range got {
		if !p.Backlog.Known || p.Backlog.Bytes != total || p.Backlog.Files != 3 {
			t.Fatalf("call %d: backlog %+v, want %d bytes in 3 files known", i, p.Backlog, total)
		}
		if p.Backlog.DoneBytes < lastDone {
			t.Errorf("call %d: done went back from %d to %d", i, lastDone, p.Backlog.DoneBytes)
		}
		lastDone = p.Backlog.DoneBytes
		if p.BatchID != int64(i) {
			t.Errorf("call %d: batch %d", i, p.BatchID)
		}
	}
	last := got[len(got)-1]
	if !last.Drain || last.Backlog.DoneBytes != total || last.Backlog.DoneFiles != 3 {
		t.Errorf("last call: drain %v, backlog %+v; want the drain with everything read", last.Drain, last.Backlog)
	}
	if last.Totals.Lines != 31 || last.Totals.Quarantined[tidemark.ReasonMalformed] != 1 || last.Totals.Emitted != sum.Emitted {
		t.Errorf("last totals %s, want the run's %s", last.Totals.Accounting(), sum.Accounting())
	}
	if want := time.Date(2026, 1, 1, 0, 0, 29, 0, time.UTC); !last.MaxEventTime.Equal(want) {
		t.Errorf("max event time %v, want %v", last.MaxEventTime, want)
	}
	beforeDrain := got[len(got)-2]
	if beforeDrain.Backlog.DoneBytes != total || beforeDrain.Backlog.DoneFiles != 3 {
		t.Errorf("after the last read: backlog %+v, want all %d bytes of 3 files read", beforeDrain.Backlog, total)
	}
	if mid := got[1].Backlog; mid.DoneBytes <= 0 || mid.DoneBytes >= total {
		t.Errorf("second batch: backlog %+v, want part of %d read", mid, total)
	}
	if want := time.Date(2026, 1, 1, 0, 0, 29, 0, time.UTC); !beforeDrain.Watermark.Equal(want) {
		t.Errorf("watermark before the drain %v, want %v (lateness 0)", beforeDrain.Watermark, want)
	}
	// The observer sees a copy: later batches did not change earlier totals.
	if got[0].Totals.Lines != 7 {
		t.Errorf("first call's totals: %d lines, want 7", got[0].Totals.Lines)
	}
}

// TestOnProgressContinuous: without Once there is no backlog to count down.
func TestOnProgressContinuous(t *testing.T) {
	dir, lakeDir := t.TempDir(), t.TempDir()
	cfg := runnerConfig(t, dir, lakeDir)
	appendLine(t, filepath.Join(dir, "e.ndjson"), `{"event_time":"2026-01-01T00:00:00Z","page":"/a","value":1}`)
	ctx, cancel := context.WithCancel(context.Background())
	calls := make(chan Progress, 16)
	cfg.OnProgress = func(p Progress) {
		calls <- p
		cancel()
	}
	if _, err := Run(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	p := <-calls
	if p.Backlog.Known || p.Rows != 1 || p.Duration <= 0 {
		t.Errorf("got %+v, want 1 row, a duration and no backlog", p)
	}
}

// BenchmarkProgressOf measures the observer's cost per batch of 100k
// records over a source of 10k files.
func BenchmarkProgressOf(b *testing.B) {
	const files, rows = 10_000, 100_000
	r := &runner{cfg: RunnerConfig{OnProgress: func(Progress) {}, Once: true}, sum: &Summary{Quarantined: map[tidemark.Reason]int64{}}}
	t := r.tracker()
	t.files = map[fileKey]*fileProgress{}
	paths := make([]string, files)
	for i := range files {
		paths[i] = fmt.Sprintf("logs/2026/01/%05d.ndjson", i)
		t.files[fileKey{"logs", paths[i]}] = &fileProgress{size: 1 << 40}
	}
	recs := make([]tidemark.Record, rows)
	payload := make([]byte, 100)
	for i := range recs {
		recs[i] = tidemark.Record{Source: "logs", File: paths[i*files/rows], Payload: payload}
	}
	b.ResetTimer()
	for n := range b.N {
		for i := range recs {
			recs[i].Offset = int64(n * 101)
		}
		r.progressOf(offsetsEntry{}, recs, engine.BatchResult{}, time.Millisecond)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*rows), "ns/record")
}

// TestOnProgressResume: a second --once run counts only what the checkpoint
// does not cover yet.
func TestOnProgressResume(t *testing.T) {
	dir, lakeDir := t.TempDir(), t.TempDir()
	cfg := runnerConfig(t, dir, lakeDir)
	cfg.Once = true
	path := filepath.Join(dir, "e.ndjson")
	appendLine(t, path, `{"event_time":"2026-01-01T00:00:00Z","page":"/a","value":1}`)
	if _, err := Run(context.Background(), cfg); err != nil {
		t.Fatal(err)
	}
	more := `{"event_time":"2026-01-01T00:00:05Z","page":"/a","value":1}`
	appendLine(t, path, more)
	appendLine(t, filepath.Join(dir, "f.ndjson"), more)
	var got []Progress
	cfg.OnProgress = func(p Progress) { got = append(got, p) }
	if _, err := Run(context.Background(), cfg); err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 {
		t.Fatalf("got %d calls, want 1", len(got))
	}
	want := Backlog{Known: true, Bytes: 2 * int64(len(more)+1), DoneBytes: 2 * int64(len(more)+1), Files: 2, DoneFiles: 2}
	if got[0].Backlog != want {
		t.Errorf("backlog %+v, want %+v", got[0].Backlog, want)
	}
}

// TestOnProgressCompressed: a compressed input counts once the source has
// read it to its end (looked up at most once a second of the stream's clock).
func TestOnProgressCompressed(t *testing.T) {
	dir, lakeDir := t.TempDir(), t.TempDir()
	cfg := runnerConfig(t, dir, lakeDir)
	cfg.Once, cfg.MaxBatchRows = true, 3
	var plain, packed bytes.Buffer
	zw := gzip.NewWriter(&packed)
	for i := range 5 {
		fmt.Fprintf(zw, `{"event_time":"2026-01-01T00:00:%02dZ","page":"/a"}`+"\n", i)
		fmt.Fprintf(&plain, `{"event_time":"2026-01-01T00:00:%02dZ","page":"/b"}`+"\n", 10+i)
	}
	zw.Close()
	os.WriteFile(filepath.Join(dir, "a.ndjson.gz"), packed.Bytes(), 0o644)
	os.WriteFile(filepath.Join(dir, "b.ndjson"), plain.Bytes(), 0o644)
	var ticks atomic.Int64 // the clock is read by the reader and the committer
	cfg.Clock = func() time.Time {
		return time.Date(2026, 1, 1, 0, 1, 0, 0, time.UTC).Add(time.Duration(ticks.Add(1)) * time.Second)
	}
	var got []Progress
	cfg.OnProgress = func(p Progress) { got = append(got, p) }
	if _, err := Run(context.Background(), cfg); err != nil {
		t.Fatal(err)
	}
	total := int64(packed.Len() + plain.Len())
	first, last := got[0].Backlog, got[len(got)-1].Backlog
	// Aligned reading interleaves the two files, so the first batch may hold
	// lines of the plain file; none of the unfinished .gz may count.
	if first.Bytes != total || first.DoneBytes > int64(plain.Len()) || first.DoneFiles != 0 {
		t.Errorf("first batch (the .gz not finished): %+v, want at most the %d plain bytes of %d, no file done", first, plain.Len(), total)
	}
	if last.DoneBytes != total || last.DoneFiles != 2 {
		t.Errorf("last batch: %+v, want all %d bytes of 2 files", last, total)
	}
}
