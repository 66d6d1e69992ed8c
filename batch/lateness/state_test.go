package lateness

import (
	"math"
	"slices"
	"testing"
	"time"

	"tidemark"
	"tidemark/stream/engine"
)

// TestWhatIfCost checks the what-if's costs: keys per window against an
// exact count, open windows per key from the window spec, and the state
// rows estimate against what a keyed stream engine really holds with that
// budget over the same batches (median over batches, within a third).
func TestWhatIfCost(t *testing.T) {
	d := makeLake(t, genConfig{n: 6_000, sources: []string{"s1"}, lateness: 30 * usSecond, seed: 14, maxBatch: 50})
	rep := run(t, d, Config{StateRowBytes: 97})
	g := rep.Groups[0]
	keys := map[int64]map[tidemark.Key]bool{}
	for _, r := range d.recs {
		w := r.EventTime - mod(r.EventTime, testWindow)
		if keys[w] == nil {
			keys[w] = map[tidemark.Key]bool{}
		}
		keys[w][r.Key] = true
	}
	var pairs int
	for _, k := range keys {
		pairs += len(k)
	}
	if want := math.Round(float64(pairs)/float64(len(keys))*100) / 100; g.KeysPerWindow != want {
		t.Errorf("keys per window %v, want %v", g.KeysPerWindow, want)
	}
	checked := 0
	for _, w := range g.WhatIf {
		b := int64(math.Round(w.Lateness * 1e6))
		if want := (b + testWindow + testWindow - 1) / testWindow; w.OpenWindowsPerKey != want {
			t.Errorf("lateness %s: %d open windows per key, want %d", FormatDuration(w.Lateness), w.OpenWindowsPerKey, want)
		}
		if w.StateBytes != 97*w.StateRows {
			t.Errorf("lateness %s: %d state bytes for %d rows at 97 bytes", FormatDuration(w.Lateness), w.StateBytes, w.StateRows)
		}
		if b < usMinute || b > 10*usMinute {
			continue
		}
		e, err := engine.New(engine.Config{Window: tidemark.WindowSpec{Size: testWindow}, Lateness: time.Duration(b) * time.Microsecond}, nil)
		if err != nil {
			t.Fatal(err)
		}
		var open []int
		for _, bt := range d.batches {
			res := e.Process(slices.Clone(bt), time.UnixMicro(bt[len(bt)-1].Arrival))
			open = append(open, res.OpenWindows)
		}
		slices.Sort(open)
		real := float64(open[len(open)/2])
		if est := float64(w.StateRows); est < real*2/3 || est > real*3/2 {
			t.Errorf("lateness %s: estimated %v state rows, the stream holds %v (median over batches)", FormatDuration(w.Lateness), est, real)
		}
		t.Logf("lateness %s: estimated %d state rows, the stream holds %v", FormatDuration(w.Lateness), w.StateRows, real)
		checked++
	}
	if checked == 0 {
		t.Fatal("no budget between 1m and 10m checked")
	}
}
