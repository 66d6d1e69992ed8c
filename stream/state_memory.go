package stream

import (
	"fmt"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
)

// The Go GC's soft memory limit (runtime/debug.SetMemoryLimit) is how a
// stream keeps its peak memory near what it holds live: without one the
// heap may grow to twice the live data before a collection (GOGC=100), and
// a per-user stream's batch pipeline plus state (~190 MB live) peaked at
// 420-550 MiB resident. StateOptions.MemoryLimit chooses it:
//
//	> 0  that many bytes, fixed
//	  0  auto: memoryBase plus twice the open state's heap estimate,
//	     raised after every batch as the state grows (so a large state never
//	     makes the GC run without pause against a fixed target)
//	< 0  off: Go's default, or GOMEMLIMIT
//
// A GOMEMLIMIT in the environment wins over auto. The limit is soft: the
// heap goes past it rather than fail, and the GC then takes at most about
// half the CPU.
const memoryBase = 320 << 20

// ParseMemoryLimit reads --memory-limit: "auto", "off", or a size in bytes
// with an optional KiB, MiB or GiB suffix.
func ParseMemoryLimit(s string) (int64, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "", "auto":
		return 0, nil
	case "off":
		return -1, nil
	}
	num, unit := s, int64(1)
	for suffix, u := range map[string]int64{"KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30} {
		if strings.HasSuffix(s, suffix) {
			num, unit = strings.TrimSuffix(s, suffix), u
		}
	}
	n, err := strconv.ParseInt(strings.TrimSpace(num), 10, 64)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("stream: --memory-limit %q: want auto, off or a size such as 512MiB", s)
	}
	return n * unit, nil
}

// applyMemoryLimit sets the GC's memory limit for a stream whose engine
// holds stateHeap bytes of open state (the heap estimate: the Pebble
// store's disk is not memory).
func applyMemoryLimit(limit, stateHeap int64) {
	switch {
	case limit > 0:
		debug.SetMemoryLimit(limit)
	case limit == 0 && os.Getenv("GOMEMLIMIT") == "":
		debug.SetMemoryLimit(memoryBase + 2*stateHeap)
	}
}

// afterProcess is what the runner does between an engine batch and its
// commit: stop on a failed read of the Pebble state (nothing of the batch
// is committed then), and move the memory limit with the state.
func (r *runner) afterProcess() error {
	if err := r.engine.Err(); err != nil {
		return err
	}
	applyMemoryLimit(r.cfg.State.MemoryLimit, r.engine.StateBytes())
	return nil
}

// holdGC turns the GC's pacing off until the returned func is called (nil
// with --memory-limit off), the memory limit still applying: a stream's
// first batch allocates what stays live (read buffers, records, the
// writer's buffers), and the collections a heap growing from nothing runs
// meanwhile find almost no garbage while each scans the batch's records
// (4 collections in the first 600 ms of the 1M-event run). GOGC is the
// process's: several runners in one process (tests) share one hold, the
// setting before the first restored when the last lets go.
func (r *runner) holdGC() func() {
	if r.cfg.State.MemoryLimit < 0 {
		return nil
	}
	applyMemoryLimit(r.cfg.State.MemoryLimit, 0)
	gcHold.Lock()
	defer gcHold.Unlock()
	if gcHold.n == 0 {
		gcHold.prev = debug.SetGCPercent(-1)
	}
	gcHold.n++
	var once sync.Once
	return func() {
		once.Do(func() {
			gcHold.Lock()
			defer gcHold.Unlock()
			if gcHold.n--; gcHold.n == 0 {
				debug.SetGCPercent(gcHold.prev)
			}
		})
	}
}

// gcHold counts the runners holding the GC's pacing off.
var gcHold struct {
	sync.Mutex
	n    int
	prev int
}
