package main

import (
	"runtime"
	"runtime/debug"
	"sync"

	"golang.org/x/sys/unix"
)

// hugeHeapBytes is how much of the Go heap's address space backHeap asks
// the kernel to back with transparent huge pages: the heap of a stream
// under the default --memory-limit (320 MiB plus twice the state) stays in
// it, and address space that is never touched costs nothing.
const hugeHeapBytes = 512 << 20

var backHeapOnce sync.Once

// backHeap asks Linux to back the Go heap's first hugeHeapBytes of address
// space with transparent huge pages (madvise MADV_HUGEPAGE), once per
// process. The Go runtime maps its heap in small 4 KiB pages unless the
// kernel's THP mode is "always", and on a virtual machine a first touch of
// each page is a fault that costs 10-15 µs: a 1M-event backlog's ~200 MiB
// were 0.6-0.8 of its 1.7 CPU-seconds. A huge page is one fault per 2 MiB.
//
// The runtime has no setting for this, so backHeap grows the heap by one
// allocation it never touches (memory fresh from the kernel needs no
// zeroing), advises that range and gives it back: the advice stays with
// the mapping, and the allocations that follow reuse the range, lowest
// addresses first. With THP "never" (or no THP in the kernel) it changes
// nothing, and a refused advice (EINVAL without THP) is only a run with
// small pages, as without the flag.
func backHeap() {
	backHeapOnce.Do(func() {
		b := make([]byte, hugeHeapBytes)
		_ = unix.Madvise(b, unix.MADV_HUGEPAGE)
		runtime.KeepAlive(b)
		debug.FreeOSMemory()
	})
}
