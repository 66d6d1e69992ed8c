package stream

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"tidemark"
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
