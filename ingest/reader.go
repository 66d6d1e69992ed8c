package ingest

import (
	"bytes"
	"errors"
	"io"
)

// lineReader cuts records out of one byte stream (a file, or a decompressed
// file) with a format-aware splitter. Offsets are in the stream; off is
// always the offset of the first byte not yet returned in a record, so it
// is a valid resume point after every record.
type lineReader struct {
	src   io.Reader
	final bool // the stream is finished: its end also ends the last record
	split splitter
	max   int // MaxLineBytes
	// stable makes returned records stay valid for good, so callers need
	// not copy them: the buffer is never compacted or overwritten, and a
	// full one is replaced by a new one that starts with the unreturned
	// tail. size is the buffer size (0: initialBuffer).
	stable bool
	size   int
	// pool, if set, lends the stable buffers and takes back each one the
	// reader has moved past (readPool: reused once its records are done
	// with).
	pool *readPool

	buf        []byte
	start, end int   // unreturned bytes are buf[start:end]
	off        int64 // stream offset of buf[start]
	eof        bool  // the last fill hit the end of the stream
	done       bool  // final stream fully returned

	long *longLine // non-nil while skipping the rest of a too-long record

	// noFill makes next return no record rather than read the source, and
	// set stalled when it did so (the caller cuts only buffered lines).
	noFill, stalled bool
}

// longLine is a record over the size limit: its first max bytes are kept
// and the rest is counted and dropped as it streams past.
type longLine struct {
	prefix []byte
	off    int64
	n      int64 // bytes of the record seen so far
}

const initialBuffer = 64 << 10

func newLineReader(src io.Reader, off int64, final bool, format string, max int) *lineReader {
	return &lineReader{src: src, final: final, split: newSplitter(format), max: max, off: off}
}

// next returns the next record: its bytes (truncated to max for a line
// over the limit; valid only until the next call unless stable, and capped
// so appending to them cannot overwrite what follows), its offset and its full
// length without the newline. ok is false when no complete record is
// available now; then done reports whether a finished stream is exhausted.
func (r *lineReader) next() (payload []byte, off, length int64, ok bool, err error) {
	for {
		if r.start < r.end {
			buf := r.buf[r.start:r.end]
			if i := r.split.next(buf); i >= 0 {
				return r.cut(i, i+1)
			}
			n := len(buf)
			switch {
			case r.long != nil:
				r.long.n += int64(n)
				r.split.discard(n)
				r.advance(n)
			case n > r.max:
				r.long = &longLine{prefix: bytes.Clone(buf[:r.max]), off: r.off, n: int64(n)}
				r.split.discard(n)
				r.advance(n)
			}
		}
		if r.done {
			return nil, 0, 0, false, nil
		}
		if r.noFill {
			r.stalled = true
			return nil, 0, 0, false, nil
		}
		n, err := r.fill()
		if n > 0 {
			continue
		}
		if errors.Is(err, io.EOF) {
			r.eof = true
			if !r.final {
				return nil, 0, 0, false, nil
			}
			r.done = true
			if r.start < r.end || r.long != nil {
				return r.cut(r.end-r.start, r.end-r.start) // the final line without "\n"
			}
			return nil, 0, 0, false, nil
		}
		if err != nil {
			return nil, 0, 0, false, err
		}
		return nil, 0, 0, false, nil // a reader that returned (0, nil): try again later
	}
}

// cut returns the record of n bytes at r.start and consumes n+skip bytes
// (skip covers the newline).
func (r *lineReader) cut(n, consume int) ([]byte, int64, int64, bool, error) {
	rec, off := r.buf[r.start:r.start+n], r.off
	r.advance(consume)
	r.split.reset()
	if l := r.long; l != nil {
		r.long = nil
		return l.prefix, l.off, l.n + int64(n), true, nil
	}
	if len(rec) > r.max {
		return rec[:r.max:r.max], off, int64(len(rec)), true, nil
	}
	return rec[:n:n], off, int64(len(rec)), true, nil
}

func (r *lineReader) advance(n int) {
	r.start += n
	r.off += int64(n)
}

// fill reads more bytes after the unreturned ones, compacting or growing
// the buffer first.
func (r *lineReader) fill() (int, error) {
	size := r.size
	if size <= 0 {
		size = initialBuffer
	}
	if r.buf == nil {
		r.buf = r.pool.get(size)
	}
	if r.stable {
		if r.end == len(r.buf) {
			tail := r.end - r.start
			nb := r.pool.get(max(size, 2*tail))
			r.end = copy(nb, r.buf[r.start:r.end])
			r.pool.put(r.buf)
			r.buf, r.start = nb, 0
		}
	} else if r.start > 0 {
		r.end = copy(r.buf, r.buf[r.start:r.end])
		r.start = 0
	}
	if r.end == len(r.buf) { // only when !stable: a stable buffer has room by now
		nb := make([]byte, 2*len(r.buf))
		copy(nb, r.buf[:r.end])
		r.buf = nb
	}
	n, err := r.src.Read(r.buf[r.end:])
	r.end += n
	if n > 0 {
		r.eof = false
	}
	return n, err
}

// release gives the buffer back to the pool: the reader is done with it.
func (r *lineReader) release() {
	r.pool.put(r.buf)
	r.buf, r.start, r.end = nil, 0, 0
}

// pending reports whether bytes are buffered that are not yet returned (a
// partial line waiting for its end).
func (r *lineReader) pending() bool { return r.start < r.end || r.long != nil }

// readOffset is the stream offset just past the buffered bytes.
func (r *lineReader) readOffset() int64 { return r.off + int64(r.end-r.start) }
