package ingest

import (
	"slices"
	"sync"
)

// readPool keeps a DirSource's read buffers for reuse. Records' payloads
// point into the buffers (lineReader.stable), so a buffer the reader is
// done with is retired, stamped with the Read that last returned records
// from it, and lent again only once the caller has said (Recycle) that
// every record returned up to that Read is done with. A caller that never
// says so gets fresh buffers, as without a pool.
//
// Reusing buffers spares the allocation, Go's zeroing of it, the kernel's
// page faults and zeroing, and the garbage collections they drive: every
// byte of input read would otherwise land in fresh memory.
//
// The pool is bounded (maxPooled bytes; the oldest buffers go first), and
// free buffers that no Read took between two marks are let go, so it
// holds about what the reads in flight use and memory stays flat.
type readPool struct {
	mu       sync.Mutex
	reads    uint64 // Read calls so far
	released uint64 // the records of Reads up to this one are done with
	period   uint64 // marks so far
	retired  []pooled
	free     []pooled
	bytes    int // the capacity of retired and free
}

// pooled is a buffer of the pool. stamp is, while retired, the Read that
// last returned records from it; while free, the period it became free in.
type pooled struct {
	buf   []byte
	stamp uint64
}

// maxPooled bounds the bytes a pool holds: more than the two batches in
// flight use (the stream's default 65,536 lines of ~170 bytes are ~11 MiB
// a batch); past it buffers are left to the garbage collector.
var maxPooled = 64 << 20

// read counts a Read: records it returns belong to it.
func (p *readPool) read() {
	p.mu.Lock()
	p.reads++
	p.mu.Unlock()
}

// get returns a buffer of at least size bytes (at most twice that), a
// recycled one if there is one.
func (p *readPool) get(size int) []byte {
	if p != nil {
		p.mu.Lock()
		p.promote()
		for i := len(p.free) - 1; i >= 0; i-- {
			if b := p.free[i].buf; size <= cap(b) && cap(b) <= 2*size {
				p.free = slices.Delete(p.free, i, i+1)
				p.bytes -= cap(b)
				p.mu.Unlock()
				return b[:cap(b)]
			}
		}
		p.mu.Unlock()
	}
	return make([]byte, size)
}

// put retires a buffer the reader no longer reads into: records of the
// current Read may still point into it.
func (p *readPool) put(b []byte) {
	if p == nil || cap(b) == 0 {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.retired = append(p.retired, pooled{buf: b, stamp: p.reads})
	p.bytes += cap(b)
	for p.bytes > maxPooled {
		list := &p.free
		if len(p.free) == 0 {
			list = &p.retired // dropping a retired buffer is safe: it is only not reused
		}
		p.bytes -= cap((*list)[0].buf)
		(*list)[0] = pooled{}
		*list = (*list)[1:]
	}
}

// promote moves the retired buffers whose records are done with to free.
// The caller holds mu.
func (p *readPool) promote() {
	n := 0
	for n < len(p.retired) && p.retired[n].stamp <= p.released {
		p.free = append(p.free, pooled{buf: p.retired[n].buf, stamp: p.period})
		p.retired[n] = pooled{}
		n++
	}
	p.retired = p.retired[n:]
}

// mark returns the Reads so far, ending a period: free buffers no Read
// took during the whole period that ends are more than the reads need.
func (p *readPool) mark() uint64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.period++
	p.free = slices.DeleteFunc(p.free, func(b pooled) bool {
		if b.stamp+1 < p.period {
			p.bytes -= cap(b.buf)
			return true
		}
		return false
	})
	p.promote()
	return p.reads
}

// drop lets every buffer go (the source reads no more): the garbage
// collector takes each once no record points into it.
func (p *readPool) drop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	clear(p.retired)
	clear(p.free)
	p.retired, p.free, p.bytes = nil, nil, 0
}

// recycle says that no record returned by the Reads up to mark is read any
// more. It may be called while another goroutine reads.
func (p *readPool) recycle(mark uint64) {
	p.mu.Lock()
	p.released = max(p.released, mark)
	p.mu.Unlock()
}
