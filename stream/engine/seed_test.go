package engine

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"tidemark"
)

// seedStep is one record of a seed walk-through, processed as its own batch
// (--max-batch-rows 1), with what must happen.
type seedStep struct {
	t       int64    // event time, in units after the base
	late    bool     // StatusLate
	w       int64    // W after the batch, in units after the base
	emitted []string // "start-end:count[F]" in units after the base
}

// TestSeedWalkthroughs replays SPEC §2 "Acceptance" one record per batch.
func TestSeedWalkthroughs(t *testing.T) {
	base := time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC).UnixMicro()
	minute, second := time.Minute.Microseconds(), time.Second.Microseconds()

	// Seed 000/003: window 10m, lateness 5m, times in minutes after 10:00.
	seed1 := func(rule LateRule, then ...seedStep) []seedStep {
		late6 := rule == LateEvent
		return append([]seedStep{
			{t: 0, w: -5},
			{t: 9, w: 4},
			{t: 11, w: 6},
			{t: 8, w: 6}, // accepted: 10:08 >= W 10:06
			{t: 14, w: 9},
			{t: 6, w: 9, late: late6}, // event rule: 10:06 < W 10:09; window rule: [10:00,10:10) still open
		}, then...)
	}
	// Seed 002: window 10s, lateness 5s, times in seconds after 10:00:00.
	seed2 := func(rule LateRule) []seedStep {
		ev := rule == LateEvent
		c2030 := "20-30:5F" // window rule: 22 and 25 land in the open [20,30)
		if ev {
			c2030 = "20-30:3F"
		}
		return []seedStep{
			{t: 12, w: 7},
			{t: 20, w: 15},
			{t: 27, w: 22, emitted: []string{"10-20:1F"}},
			{t: 13, w: 22, late: true}, // [10,20) is closed under both rules
			{t: 24, w: 22},
			{t: 33, w: 28},
			{t: 22, w: 28, late: ev},
			{t: 31, w: 28},
			{t: 25, w: 28, late: ev},
			{t: 38, w: 33, emitted: []string{c2030}},
		}
	}

	tests := []struct {
		name      string
		size      int64
		lateness  int64
		unit      int64
		rule      LateRule
		steps     []seedStep
		wantRows  [2]int64 // accepted, dropped
		wantOpen  []string // open after the steps, without drain
		wantDrain []string // emitted by Drain
	}{
		{
			name: "seed1 event rule", size: 10 * minute, lateness: 5 * minute, unit: minute, rule: LateEvent,
			steps: seed1(LateEvent), wantRows: [2]int64{5, 1},
			wantOpen: []string{"0-10:3", "10-20:2"}, wantDrain: []string{"0-10:3F", "10-20:2F"},
		},
		{
			name: "seed1 window rule", size: 10 * minute, lateness: 5 * minute, unit: minute, rule: LateWindow,
			steps: seed1(LateWindow), wantRows: [2]int64{6, 0},
			wantOpen: []string{"0-10:4", "10-20:2"}, wantDrain: []string{"0-10:4F", "10-20:2F"},
		},
		{
			// [10:00,10:10) closes exactly when W reaches 10:10, not before.
			name: "seed1 event rule then 10:15", size: 10 * minute, lateness: 5 * minute, unit: minute, rule: LateEvent,
			steps:    seed1(LateEvent, seedStep{t: 15, w: 10, emitted: []string{"0-10:3F"}}),
			wantRows: [2]int64{6, 1}, wantOpen: []string{"10-20:3"}, wantDrain: []string{"10-20:3F"},
		},
		{
			name: "seed1 window rule then 10:15", size: 10 * minute, lateness: 5 * minute, unit: minute, rule: LateWindow,
			steps:    seed1(LateWindow, seedStep{t: 15, w: 10, emitted: []string{"0-10:4F"}}),
			wantRows: [2]int64{7, 0}, wantOpen: []string{"10-20:3"}, wantDrain: []string{"10-20:3F"},
		},
		{
			name: "seed2 event rule", size: 10 * second, lateness: 5 * second, unit: second, rule: LateEvent,
			steps: seed2(LateEvent), wantRows: [2]int64{7, 3},
			wantOpen: []string{"30-40:3"}, wantDrain: []string{"30-40:3F"},
		},
		{
			name: "seed2 window rule", size: 10 * second, lateness: 5 * second, unit: second, rule: LateWindow,
			steps: seed2(LateWindow), wantRows: [2]int64{9, 1},
			wantOpen: []string{"30-40:3"}, wantDrain: []string{"30-40:3F"},
		},
	}
	for _, tt := range tests {
		for _, drain := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/drain=%v", tt.name, drain), func(t *testing.T) {
				e := mustNew(t, Config{
					Window:   tidemark.WindowSpec{Size: tt.size},
					Lateness: time.Duration(tt.lateness) * time.Microsecond,
					LateRule: tt.rule,
				}, nil)
				show := func(rs []tidemark.Result) []string { return showResults(rs, base, tt.unit) }
				var accepted, dropped int64
				now := time.Unix(0, 0)
				for i, step := range tt.steps {
					batch := []tidemark.Record{{Source: "s", EventTime: base + step.t*tt.unit}}
					res := e.Process(batch, now)
					if got := batch[0].Status == tidemark.StatusLate; got != step.late {
						t.Errorf("step %d (t=%d): got late %v, want %v", i+1, step.t, got, step.late)
					}
					if got, want := res.Dropped, boolInt(step.late); got != want {
						t.Errorf("step %d: got Dropped %d, want %d", i+1, got, want)
					}
					if !res.HasWatermark || res.Watermark != base+step.w*tt.unit {
						t.Errorf("step %d: got W %d (has %v), want %d", i+1, (res.Watermark-base)/tt.unit, res.HasWatermark, step.w)
					}
					if got := show(res.Emitted); !slices.Equal(got, step.emitted) {
						t.Errorf("step %d: got emitted %v, want %v", i+1, got, step.emitted)
					}
					accepted += res.Rows - res.Dropped
					dropped += res.Dropped
				}
				if got := [2]int64{accepted, dropped}; got != tt.wantRows {
					t.Errorf("got accepted/dropped %v, want %v", got, tt.wantRows)
				}
				if !drain {
					if got := show(e.State().Open); !slices.Equal(got, tt.wantOpen) {
						t.Errorf("got open %v, want %v", got, tt.wantOpen)
					}
					return
				}
				res := e.Drain()
				if got := show(res.Emitted); !slices.Equal(got, tt.wantDrain) {
					t.Errorf("got drained %v, want %v", got, tt.wantDrain)
				}
				if res.Watermark != tidemark.MaxTime || res.OpenWindows != 0 {
					t.Errorf("after drain got W %d, open %d; want MaxTime, 0", res.Watermark, res.OpenWindows)
				}
			})
		}
	}
}

// showResults renders results as "start-end:count[F]" in units after base.
func showResults(rs []tidemark.Result, base, unit int64) []string {
	var out []string
	for _, r := range rs {
		var b strings.Builder
		fmt.Fprintf(&b, "%d-%d:%d", (r.Window.Start-base)/unit, (r.Window.End-base)/unit, r.Agg.Count)
		if r.Key != "" {
			fmt.Fprintf(&b, ":%s", r.Key)
		}
		if r.Final {
			b.WriteString("F")
		}
		out = append(out, b.String())
	}
	return out
}

func boolInt(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

func mustNew(t testing.TB, cfg Config, st *State) *Engine {
	t.Helper()
	e, err := New(cfg, st)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return e
}
