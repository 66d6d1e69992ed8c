package engine

import (
	"testing"
	"time"

	"tidemark"
)

// TestSourceMarks: each source's watermark is its max event time minus the
// budget, the idle flag follows IdleTimeout on the batch clock, and W is the
// min over the active sources' watermarks.
func TestSourceMarks(t *testing.T) {
	e, err := New(Config{Window: tidemark.WindowSpec{Size: 1e6}, Lateness: 2 * time.Second, IdleTimeout: 5 * time.Second}, nil)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Unix(1000, 0)
	rec := func(src string, sec int64) tidemark.Record {
		return tidemark.Record{Source: src, EventTime: sec * 1e6}
	}
	e.Process([]tidemark.Record{rec("a", 10), rec("b", 20), {Source: "c", Reason: tidemark.ReasonMalformed}}, now)
	res := e.Process([]tidemark.Record{rec("a", 30)}, now.Add(6*time.Second))
	marks := e.SourceMarks(now.Add(6 * time.Second))
	want := []SourceMark{
		{Name: "a", MaxEventTime: 30e6, Watermark: 28e6, HasEventTime: true, HasWatermark: true, LastSeen: now.Add(6 * time.Second).UnixNano()},
		{Name: "b", MaxEventTime: 20e6, Watermark: 18e6, HasEventTime: true, HasWatermark: true, Idle: true, LastSeen: now.UnixNano()},
		{Name: "c", Idle: true, LastSeen: now.UnixNano()},
	}
	if len(marks) != len(want) {
		t.Fatalf("got %+v, want %+v", marks, want)
	}
	for i := range want {
		if marks[i] != want[i] {
			t.Errorf("source %d: got %+v, want %+v", i, marks[i], want[i])
		}
	}
	if res.Watermark != 28e6 {
		t.Errorf("W %d, want a's watermark 28s (b is idle)", res.Watermark)
	}
}

// TestSourceMarksOwnBudget: a source with a budget of its own (and one
// capped by its frontier) shows the watermark W is computed from, not max
// event time minus the global budget.
func TestSourceMarksOwnBudget(t *testing.T) {
	e, err := New(Config{Window: tidemark.WindowSpec{Size: 1e6}, Lateness: 2 * time.Second, SourceLateness: map[string]time.Duration{"slow": 10 * time.Second}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Unix(1000, 0)
	res := e.Process([]tidemark.Record{{Source: "fast", EventTime: 50e6}, {Source: "slow", EventTime: 40e6}}, now)
	marks := e.SourceMarks(now)
	want := map[string]int64{"fast": 48e6, "slow": 30e6}
	for _, m := range marks {
		if !m.HasWatermark || m.Watermark != want[m.Name] {
			t.Errorf("source %s: watermark %d (has %v), want %d", m.Name, m.Watermark, m.HasWatermark, want[m.Name])
		}
	}
	if res.Watermark != 30e6 {
		t.Errorf("W %d, want the slow source's 30s", res.Watermark)
	}
}
