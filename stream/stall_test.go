package stream

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"tidemark"
	"tidemark/ingest"
	"tidemark/stream/engine"
)

// TestStallWatch, on read times given batch by batch: no stall while W
// moves or before StallAfter, nor without lines; then the source with the
// lowest watermark and the file at its frontier are named with their
// silence and the --idle-timeout that would release them, one warning per
// stallWarnEvery; an idle timeout already below the silence releases
// nothing more (no suggestion).
func TestStallWatch(t *testing.T) {
	var logBuf bytes.Buffer
	cfg := RunnerConfig{Logger: slog.New(slog.NewTextHandler(&logBuf, nil))}
	s := newStallWatch(cfg)
	sec := func(n int64) int64 { return n * 1e6 }
	pos := ingest.Position{Files: []ingest.FilePosition{
		{Path: "live.log", Max: sec(500), HasMax: true, Hold: true, LastLine: sec(1000)},
		{Path: "day-01.log", Max: sec(100), HasMax: true, Hold: true, LastLine: sec(10)},
		{Path: "old.log.gz", Max: sec(50), HasMax: true, Done: true},
	}}
	raw, _ := json.Marshal(pos)
	end := map[string]json.RawMessage{"logs": raw}
	marks := []engine.SourceMark{
		{Name: "logs", MaxEventTime: sec(500), HasEventTime: true, Watermark: sec(100), HasWatermark: true, LastSeen: sec(1000) * 1000},
		{Name: "web", MaxEventTime: sec(900), HasEventTime: true, Watermark: sec(890), HasWatermark: true, LastSeen: sec(1000) * 1000},
	}
	w := sec(100)
	if st := s.observe(sec(10), 5, w-1, true, end, marks); st != nil {
		t.Fatalf("W moved: got a stall %+v", st)
	}
	if st := s.observe(sec(20), 5, w, true, end, marks); st != nil {
		t.Fatalf("W moved: got a stall %+v", st)
	}
	if st := s.observe(sec(79), 5, w, true, end, marks); st != nil {
		t.Fatalf("59 s without W moving (under StallAfter): got a stall %+v", st)
	}
	st := s.observe(sec(80), 5, w, true, end, marks)
	want := Stall{Source: "logs", File: "day-01.log", Since: tidemark.FormatTime(sec(20)), For: "1m0s", Silent: "1m10s",
		HeldAt: tidemark.FormatTime(sec(100)), IdleTimeout: "0s", Release: "--idle-timeout 1m0s"}
	if st == nil || *st != want {
		t.Fatalf("stalled for 60 s: got %+v, want %+v", st, want)
	}
	for i := int64(1); i <= 5; i++ {
		if st := s.observe(sec(80+60*i), 1, w, true, end, marks); st == nil || st.File != "day-01.log" {
			t.Fatalf("still stalled: got %+v", st)
		}
	}
	if n := strings.Count(logBuf.String(), "watermark stalled"); n != 1 {
		t.Errorf("%d warnings over 5 minutes of one stall, want 1 (rate-limited):\n%s", n, logBuf.String())
	}
	if !strings.Contains(logBuf.String(), "file day-01.log of source logs holds it") || !strings.Contains(logBuf.String(), "--idle-timeout 1m0s would release it") {
		t.Errorf("the warning does not name the file and the release:\n%s", logBuf.String())
	}
	if st := s.observe(sec(80+60*11), 1, w, true, end, marks); st == nil || strings.Count(logBuf.String(), "watermark stalled") != 2 {
		t.Errorf("after %s the warning repeats: got %d", stallWarnEvery, strings.Count(logBuf.String(), "watermark stalled"))
	}

	// W moves: no stall. Without lines after it, none either.
	if st := s.observe(sec(1000), 1, w+1, true, end, marks); st != nil {
		t.Errorf("W moved: got %+v", st)
	}
	if st := s.observe(sec(2000), 0, w+1, true, end, marks); st != nil {
		t.Errorf("no lines since W moved: got %+v", st)
	}

	// A source with no file holding it: the source is named with its own
	// silence. An idle timeout already set below the silence is no advice.
	cfg.Engine.IdleTimeout = 30 * time.Minute
	s = newStallWatch(cfg)
	s.observe(sec(0), 1, w, true, nil, marks)
	marks[0].LastSeen = sec(100) * 1000
	st = s.observe(sec(4000), 1, w, true, nil, marks)
	if st == nil || st.Source != "logs" || st.File != "" || st.Silent != "1h5m0s" || st.Release != "" || st.IdleTimeout != "30m0s" {
		t.Errorf("a silent source: got %+v, want logs, silent 1h5m0s, no release (its idle timeout is under that)", st)
	}
}

// TestRunnerNamesStalledFile runs a stream on an injected clock over two
// live files: web.log keeps getting lines, day.log stops. The watermark
// stays at day.log's frontier; once that lasts StallAfter, the progress
// lines name day.log, how long it has been silent and the --idle-timeout
// that would release it, and the log warns once.
func TestRunnerNamesStalledFile(t *testing.T) {
	dir, lakeDir := t.TempDir(), t.TempDir()
	cfg := runnerConfig(t, dir, lakeDir)
	cfg.StallAfter = 30 * time.Second
	var tick atomic.Int64
	base := time.Date(2026, 1, 1, 1, 0, 0, 0, time.UTC)
	cfg.Clock = func() time.Time { return base.Add(time.Duration(tick.Add(1)) * time.Second) }
	var logBuf syncBuf
	cfg.Logger = slog.New(slog.NewTextHandler(&logBuf, nil))
	log := newProgressLog()
	cfg.Progress = log
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := Run(ctx, cfg)
		done <- err
	}()
	web, day := filepath.Join(dir, "web.log"), filepath.Join(dir, "day.log")
	// The two files' lines differ (their page): files are identified by
	// content, and a file that is a byte prefix of another present file is
	// a copy being made of it (docs/file-identity.md), not a second input.
	ev := func(page string, sec int) string {
		return fmt.Sprintf(`{"event_time":%q,"page":%q,"value":1}`, time.Date(2026, 1, 1, 0, 0, sec, 0, time.UTC).Format(time.RFC3339), page)
	}
	var rows int64
	for i := range 3 {
		appendLine(t, web, ev("/web", i))
		appendLine(t, day, ev("/day", i))
		rows += 2
		log.waitRows(t, rows, done)
	}
	for i := 3; i < 40; i++ {
		appendLine(t, web, ev("/web", i))
		rows++
		log.waitRows(t, rows, done)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	lines, _ := log.snapshot()
	var first *Stall
	stalled := 0
	for _, p := range lines {
		if p.Stalled != nil {
			stalled++
			if first == nil {
				first = p.Stalled
			}
		}
		if p.EventTime.Watermark != "2026-01-01T00:00:02Z" && p.Stalled != nil {
			t.Errorf("batch %d: watermark %s, stalled %+v: a moving watermark is no stall", p.BatchID, p.EventTime.Watermark, p.Stalled)
		}
	}
	if first == nil {
		t.Fatalf("no progress line names a stall over %d batches", len(lines))
	}
	if first.Source != dir || first.File != "day.log" || first.HeldAt != "2026-01-01T00:00:02Z" || first.Silent == "" || !strings.HasPrefix(first.Release, "--idle-timeout ") {
		t.Errorf("stall: got %+v, want day.log of %s held at 00:00:02, silent, with an --idle-timeout", first, dir)
	}
	silent, err := time.ParseDuration(first.Silent)
	if err != nil || silent < cfg.StallAfter {
		t.Errorf("day.log silent for %q, want at least %s (W stopped with its last line)", first.Silent, cfg.StallAfter)
	}
	if n := strings.Count(logBuf.String(), "watermark stalled"); n < 1 || n >= stalled {
		t.Errorf("%d warnings for %d stalled batches: want at least one, rate-limited:\n%s", n, stalled, logBuf.String())
	}

	// The checkpoint names it too (what `tidemark checkpoint` prints).
	st, err := Inspect(context.Background(), openCheckpoint(t, filepath.Join(lakeDir, "_checkpoints", "stream")))
	if err != nil {
		t.Fatal(err)
	}
	if st.HeldBy != dir || len(st.Sources) != 1 || st.Sources[0].HeldBy == nil || st.Sources[0].HeldBy.Path != "day.log" ||
		st.Sources[0].HeldBy.EventTime == nil || st.Sources[0].HeldBy.EventTime.Format(time.RFC3339) != "2026-01-01T00:00:02Z" {
		t.Fatalf("checkpoint: held by %q, sources %+v; want %s, file day.log at 00:00:02", st.HeldBy, st.Sources, dir)
	}
	h := st.Sources[0].HeldBy
	if got := h.Advice(h.LastLine.Add(12*time.Minute + 5*time.Second)); got != "last line read 12m5s ago; if it is not written any more, --idle-timeout 10m0s (or less) releases it" {
		t.Errorf("advice 12 minutes on: %q", got)
	}
	if got := h.Advice(h.LastLine.Add(5 * time.Second)); got != "last line read 5s ago" {
		t.Errorf("advice 5 s on: %q", got)
	}
}

// syncBuf is a bytes.Buffer the stream's logger writes from its goroutines.
type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
