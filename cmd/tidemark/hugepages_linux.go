package main

import (
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"
)

// hugeHeapBytes is how much of the Go heap's address space is asked to be
// backed with transparent huge pages: the heap of a stream under the
// default --memory-limit (320 MiB plus twice the state) stays in it, and
// address space that is never touched costs nothing.
const hugeHeapBytes = 512 << 20

// heapAdvice is the process's huge-page state: reserveHeap's allocation
// until backHeap lets it go, and the range backHeap advised, for
// settleHeap.
var heapAdvice struct {
	sync.Mutex
	reserved  []byte
	gcPercent int // the GC's setting before reserveHeap turned it off
	base, n   uintptr
}

// reserveHeap, first thing in main, grows the Go heap by one allocation of
// hugeHeapBytes that nothing touches, for backHeap to advise. The Go runtime
// maps its heap in small 4 KiB pages unless the kernel's THP mode is
// "always", and on a virtual machine a first touch of each page is a fault
// that costs 10-15 µs: a 1M-event backlog's ~200 MiB were 0.6-0.8 of its
// ~2.1 CPU-seconds. A huge page is one fault per 2 MiB. The runtime has no
// setting for this; an allocation's range can be advised instead, and the
// advice stays with the mapping when the allocation is let go, the heap
// reusing the range from its lowest addresses.
//
// The allocation must be fresh from the kernel: the runtime zeroes one
// that starts in memory used before (a freed span at the top of the heap),
// and zeroing 512 MiB in 4 KiB pages took 1.5 s and left 548 MB resident
// (GOGC=50, one start in four). Memory is used and freed only once a
// collection has run, so reserveHeap does nothing after the first one
// (with GOGC below ~60 one runs before main; no huge pages then). The
// GC stays off until backHeap: a collection that found the reservation
// live would size the heap for it (the runtime then puts its own metadata
// in huge pages too, past a 1 GiB heap goal). A 32-bit process has no
// room for the reservation and goes without.
func reserveHeap() {
	if unsafe.Sizeof(uintptr(0)) < 8 {
		return
	}
	cycles := []metrics.Sample{{Name: "/gc/cycles/total:gc-cycles"}}
	metrics.Read(cycles)
	if cycles[0].Value.Kind() != metrics.KindUint64 || cycles[0].Value.Uint64() != 0 {
		return
	}
	heapAdvice.Lock()
	defer heapAdvice.Unlock()
	heapAdvice.gcPercent = debug.SetGCPercent(-1)
	heapAdvice.reserved = make([]byte, hugeHeapBytes)
}

// backHeap asks Linux to back the reserved range with transparent huge
// pages (madvise MADV_HUGEPAGE) when advise is set, and gives the
// reservation back either way (debug.FreeOSMemory: its pages were never
// touched), the GC's setting restored. With THP "never" (or no THP in the
// kernel) the advice changes nothing, and a refused one (EINVAL without
// THP) is only a run with small pages, as without the flag.
func backHeap(advise bool) {
	heapAdvice.Lock()
	defer heapAdvice.Unlock()
	b := heapAdvice.reserved
	if b == nil {
		return
	}
	heapAdvice.reserved = nil
	if advise && unix.Madvise(b, unix.MADV_HUGEPAGE) == nil {
		heapAdvice.base, heapAdvice.n = uintptr(unsafe.Pointer(unsafe.SliceData(b))), uintptr(len(b))
	}
	debug.SetGCPercent(heapAdvice.gcPercent)
	debug.FreeOSMemory() // b is not used past the advice: this collection frees it
}

// settleHeap takes backHeap's advice back (MADV_NOHUGEPAGE) for a process
// that goes on running once its backlog is read: from then on the heap's
// new memory comes in 4 KiB pages again, and khugepaged does not rebuild
// 2 MiB pages around what the Go scavenger gives back (with the kernel's
// default max_ptes_none it would, and the memory a backlog once took would
// never be returned: golang/go#64332). The huge pages already in use stay
// until the scavenger releases parts of them.
func settleHeap() {
	heapAdvice.Lock()
	defer heapAdvice.Unlock()
	if heapAdvice.n == 0 {
		return
	}
	// The range is the heap's, not a Go object any more: a uintptr, as
	// madvise takes it. A kernel that took MADV_HUGEPAGE takes this too.
	unix.Syscall(unix.SYS_MADVISE, heapAdvice.base, heapAdvice.n, unix.MADV_NOHUGEPAGE)
	heapAdvice.n = 0
}
