package main

import (
	"runtime"
	"runtime/debug"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"
)

// hugeHeapBytes is how much of the Go heap's address space backHeap asks
// the kernel to back with transparent huge pages: the heap of a stream
// under the default --memory-limit (320 MiB plus twice the state) stays in
// it, and address space that is never touched costs nothing.
const hugeHeapBytes = 512 << 20

// heapAdvice is the range backHeap advised, for settleHeap.
var heapAdvice struct {
	sync.Mutex
	base, n uintptr
	backed  bool
}

// backHeap asks Linux to back the Go heap's first hugeHeapBytes of address
// space with transparent huge pages (madvise MADV_HUGEPAGE), once per
// process. The Go runtime maps its heap in small 4 KiB pages unless the
// kernel's THP mode is "always", and on a virtual machine a first touch of
// each page is a fault that costs 10-15 µs: a 1M-event backlog's ~200 MiB
// were 0.6-0.8 of its ~2.1 CPU-seconds. A huge page is one fault per 2 MiB.
//
// The runtime has no setting for this, so backHeap grows the heap by one
// allocation it never touches (memory fresh from the kernel needs no
// zeroing), advises that range and gives it back: the advice stays with
// the mapping, and the allocations that follow reuse the range, lowest
// addresses first. With THP "never" (or no THP in the kernel) it changes
// nothing, and a refused advice (EINVAL without THP) is only a run with
// small pages, as without the flag.
func backHeap() {
	heapAdvice.Lock()
	defer heapAdvice.Unlock()
	if heapAdvice.backed {
		return
	}
	heapAdvice.backed = true
	b := make([]byte, hugeHeapBytes)
	if unix.Madvise(b, unix.MADV_HUGEPAGE) == nil {
		heapAdvice.base, heapAdvice.n = uintptr(unsafe.Pointer(unsafe.SliceData(b))), uintptr(len(b))
	}
	runtime.KeepAlive(b)
	debug.FreeOSMemory()
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
