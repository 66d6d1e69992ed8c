package stream

import (
	"runtime/debug"
	"testing"
)

// TestHoldGC: runners holding the GC's pacing off (their first batch)
// share one hold, released in any order; the GOGC before the first hold is
// back once the last lets go, and --memory-limit off holds nothing.
func TestHoldGC(t *testing.T) {
	t.Cleanup(func() { debug.SetMemoryLimit(-1) }) // holdGC applies the auto limit
	before := debug.SetGCPercent(77)
	t.Cleanup(func() { debug.SetGCPercent(before) })
	gcNow := func() int {
		v := debug.SetGCPercent(-1)
		debug.SetGCPercent(v)
		return v
	}
	a, b := &runner{}, &runner{}
	releaseA := a.holdGC()
	releaseB := b.holdGC()
	if got := gcNow(); got != -1 {
		t.Fatalf("GOGC while held: got %d, want -1 (off)", got)
	}
	releaseA()
	releaseA() // a second call does nothing
	if got := gcNow(); got != -1 {
		t.Fatalf("GOGC with one hold left: got %d, want -1 (off)", got)
	}
	releaseB()
	if got := gcNow(); got != 77 {
		t.Fatalf("GOGC after the last hold: got %d, want 77", got)
	}
	off := &runner{cfg: RunnerConfig{State: StateOptions{MemoryLimit: -1}}}
	if release := off.holdGC(); release != nil {
		t.Fatalf("--memory-limit off: holdGC returned a release, want nil")
	}
	if got := gcNow(); got != 77 {
		t.Fatalf("GOGC after --memory-limit off: got %d, want 77", got)
	}
}
