package stream

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"tidemark"
	"tidemark/stream/engine"
)

func TestCloseWatch(t *testing.T) {
	sec := time.Second.Microseconds()
	rec := func(src string, at float64) tidemark.Record {
		return tidemark.Record{Source: src, EventTime: int64(at * float64(sec))}
	}
	bad := tidemark.Record{Source: "b", EventTime: 99 * sec, Reason: tidemark.ReasonBadTime}
	tests := []struct {
		name    string
		engine  engine.Config
		batches [][]tidemark.Record // each observed, then checked, then sent
		want    []bool
	}{
		{"one source", engine.Config{},
			[][]tidemark.Record{{rec("a", 0.5)}, {rec("a", 0.7)}, {rec("a", 0.9), rec("a", 1.2)}, {rec("a", 1.5)}},
			[]bool{true, false, true, false}},
		{"min waits for the lagging source", engine.Config{},
			[][]tidemark.Record{{rec("a", 0.5), rec("b", 0.5)}, {rec("a", 3)}, {rec("a", 4)}, {rec("b", 1.1)}},
			[]bool{true, false, false, true}},
		{"max follows the leading source", engine.Config{Policy: engine.PolicyMax},
			[][]tidemark.Record{{rec("a", 0.5), rec("b", 0.5)}, {rec("a", 3)}, {rec("b", 1.1)}},
			[]bool{true, true, false}},
		{"lateness", engine.Config{Lateness: 2 * time.Second},
			[][]tidemark.Record{{rec("a", 2.2)}, {rec("a", 2.9)}, {rec("a", 3.1)}},
			[]bool{true, false, true}},
		{"quarantined lines move nothing", engine.Config{},
			[][]tidemark.Record{{rec("a", 0.5), rec("b", 0.5)}, {rec("a", 2), bad}},
			[]bool{true, false}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.engine.Window = tidemark.WindowSpec{Size: sec}
			w := newCloseWatch(RunnerConfig{Engine: tc.engine})
			for i, b := range tc.batches {
				w.observe(b, 0)
				if got := w.closes(); got != tc.want[i] {
					t.Errorf("batch %d: got closes=%v, want %v", i, got, tc.want[i])
				}
				w.batchSent()
			}
		})
	}
	if newCloseWatch(RunnerConfig{SessionGap: time.Second}) != nil {
		t.Error("a session stream got a close watch")
	}
}

// With a trigger of an hour, lines that close no window wait in the
// batch being gathered, and the line that closes one sends it at once: the
// window is printed, and the lines before it came in the same batch.
func TestTriggerSendsWhenAWindowCloses(t *testing.T) {
	dir, lakeDir := t.TempDir(), t.TempDir()
	cfg := runnerConfig(t, dir, lakeDir)
	cfg.Trigger = time.Hour
	p, w := newPrinted(t)
	cfg.Print = w
	var mu sync.Mutex
	var batches []int
	cfg.OnProgress = func(p Progress) {
		mu.Lock()
		batches = append(batches, p.Rows)
		mu.Unlock()
	}
	path := filepath.Join(dir, "events.ndjson")
	line := func(at string) string {
		return fmt.Sprintf(`{"event_time":"2026-01-01T00:00:%sZ","page":"/a","value":1}`, at)
	}
	appendLine(t, path, line("00.5"))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := Run(ctx, cfg)
		done <- err
	}()
	waitBatches := func(n int) {
		t.Helper()
		deadline := time.After(30 * time.Second)
		for {
			mu.Lock()
			got := len(batches)
			mu.Unlock()
			if got >= n {
				return
			}
			select {
			case err := <-done:
				t.Fatalf("stream ended: %v", err)
			case <-deadline:
				t.Fatalf("no batch %d within 30 s", n)
			case <-time.After(10 * time.Millisecond):
			}
		}
	}
	waitBatches(1) // the first batch goes at once
	appendLine(t, path, line("00.6"))
	appendLine(t, path, line("00.7"))
	appendLine(t, path, line("01.5")) // closes [0s, 1s)
	select {
	case got := <-p.lines:
		if !strings.Contains(got, `"count":3`) {
			t.Errorf("got window %s, want [0s,1s) with count 3", got)
		}
	case err := <-done:
		t.Fatalf("stream ended: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("no window within 30 s: the closing line did not send the batch")
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if fmt.Sprint(batches) != "[1 3]" {
		t.Errorf("got batches of %v rows, want [1 3]: the lines before the closing one gathered", batches)
	}
}
