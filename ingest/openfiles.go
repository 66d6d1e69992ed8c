package ingest

import (
	"tidemark"
)

// Open descriptors of a local source (docs/files-operations.md). Aligned
// reading moves from file to file as their event times pass each other,
// so a backlog of thousands of files would keep each one it touched open.
// A DirSource holds at most maxOpen readers: before opening another it
// closes the one used least recently (a plain file first: a compressed one
// reopens by decompressing up to its offset). A closed reader keeps the
// file's position, which only ever covers records returned, so reopening
// it there reads the same records in the same order: the answers do not
// depend on the cap.

// maxOpenFiles is the cap of a new DirSource: 64 files, or a sixteenth of
// the process's open-file limit when that is lower, and at least 8.
func maxOpenFiles() int {
	n := 64
	if lim := fdLimit(); lim > 0 {
		n = min(n, lim/16)
	}
	return max(n, 8)
}

// use notes that st is being read.
func (d *DirSource) use(st *fileState) {
	d.tick++
	st.used = d.tick
}

// room closes readers until fewer than maxOpen are open (all but keep
// when all is set), before st is opened.
func (d *DirSource) room(st *fileState, all bool) {
	d.opened = compactOpened(d.opened)
	limit := d.maxOpen - 1
	if all {
		limit = 0
	}
	for len(d.opened) > limit {
		i := lruIndex(d.opened, st)
		if i < 0 {
			return
		}
		d.opened[i].close() // its position stays: it is reopened there
		d.opened = compactOpened(d.opened)
	}
}

// opened notes a reader opened for st.
func (d *DirSource) track(st *fileState) { d.opened = append(d.opened, st) }

// compactOpened drops the states whose reader was closed elsewhere.
func compactOpened(s []*fileState) []*fileState {
	n := 0
	for _, st := range s {
		if st.r != nil {
			s[n] = st
			n++
		}
	}
	clear(s[n:])
	return s[:n]
}

// lruIndex returns the reader to close: the least recently used plain
// file, else the least recently used at all; never skip. -1: none.
func lruIndex(s []*fileState, skip *fileState) int {
	best, bestPlain := -1, -1
	for i, st := range s {
		if st == skip {
			continue
		}
		if best < 0 || st.used < s[best].used {
			best = i
		}
		if !st.compressed && (bestPlain < 0 || st.used < s[bestPlain].used) {
			bestPlain = i
		}
	}
	if bestPlain >= 0 {
		return bestPlain
	}
	return best
}

// peekRecords is how many records peek looks through for a valid event,
// peekBuffer the read buffer it starts with.
const (
	peekRecords = 16
	peekBuffer  = 1 << 10
)

// peek gives a file that has no valid event read yet the event time of the
// first valid record at its position (FilePosition.Next), without taking
// it: the file then waits its turn in aligned reading, and holds the
// watermark there, instead of every such file giving up a record to be
// placed (a backlog's first batch would take one line from each of
// thousands of files, one lake partition each). The position is left as it
// was, and the reader closed. It is a function of the bytes at the
// position, so a replay peeks the same.
func (d *DirSource) peek(st *fileState, idx int, arrival int64) {
	st.peeked = true
	if d.blocked(st) {
		return
	}
	saved, chunk := st.pos, st.chunk
	saved.Header = append([]byte(nil), saved.Header...)
	if st.r == nil && !d.openForRead(st) {
		return
	}
	st.r.size = min(st.r.size, peekBuffer) // its records are dropped: a small buffer, grown for a longer line
	c := lineRead{source: d.name, cfg: &d.cfg.DecoderConfig, decoders: d.json, arrival: arrival, idx: idx,
		bound: alignKey{tidemark.MaxTime, int(^uint(0) >> 1)}, scratch: &d.scratch}
	buf := d.peekBuf[:0]
	for range peekRecords {
		var stop lineStop
		var err error
		buf, _, stop, err = st.read(&c, buf[:0], 1)
		if len(buf) == 1 && buf[0].Valid() {
			saved.Next, saved.HasNext = buf[0].EventTime, true
			break
		}
		if err != nil || stop != stopMore || len(buf) == 0 {
			break
		}
	}
	clear(buf)
	d.peekBuf = buf[:0]
	st.close() // drops what was cut; reading starts again at the position
	if len(saved.Header) == 0 {
		saved.Header = nil
	}
	st.pos, st.chunk = saved, chunk
}

// peek gives an object that has no valid event read yet the event time of
// its first valid record at its position (FilePosition.Next), as
// DirSource.peek does for a file, so a backlog of objects waits in event
// time order instead of each object giving up a record to be placed: one
// GET from the position, up to peekRecords records decoded and dropped,
// the body closed, the position left as it was. It reports false when the
// GET or the read failed: the failure is handled as for a read (the object
// is retried after a backoff, or dropped until the next listing if it
// changed), and the object is left out of this Read and peeked again at
// the next one.
func (s *s3Source) peek(o *s3Object, idx int, arrival int64) bool {
	saved := o.pos
	saved.Header = append([]byte(nil), saved.Header...)
	if o.r == nil {
		s.room(o)
		if err := s.openObject(o); err != nil {
			s.getFailed(o, err)
			return false
		}
		if o.r == nil { // nothing left to read: Done
			o.peeked = true
			return true
		}
	}
	o.r.size = min(o.r.size, peekBuffer) // its records are dropped: a small buffer, grown for a longer line
	c := lineRead{source: s.name, cfg: &s.cfg.DecoderConfig, decoders: s.json, arrival: arrival, idx: idx,
		bound: alignKey{tidemark.MaxTime, int(^uint(0) >> 1)}, scratch: &s.scratch}
	buf := s.peekBuf[:0]
	var readErr error
	for range peekRecords {
		var stop lineStop
		var err error
		buf, _, stop, err = o.read(&c, buf[:0], 1)
		if len(buf) == 1 && buf[0].Valid() {
			saved.Next, saved.HasNext = buf[0].EventTime, true
			break
		}
		if stop == stopErr {
			readErr = err
		}
		if err != nil || stop != stopMore || len(buf) == 0 {
			break
		}
	}
	clear(buf)
	s.peekBuf = buf[:0]
	o.close() // drops what was cut; reading starts again at the position
	if len(saved.Header) == 0 {
		saved.Header = nil
	}
	o.pos = saved
	if readErr != nil && !saved.HasNext {
		s.readFailed(o, readErr)
		return false
	}
	o.peeked = true
	return true
}

// room closes GET bodies until fewer than maxOpen are open, before o's
// is opened: the least recently read first (a plain object first: a
// compressed one is fetched again from its start). An S3 backlog of
// thousands of objects holds as many connections otherwise.
func (s *s3Source) room(o *s3Object) {
	for {
		n := 0
		for _, x := range s.opened {
			if x.r != nil {
				s.opened[n] = x
				n++
			}
		}
		clear(s.opened[n:])
		s.opened = s.opened[:n]
		if n < s.maxOpen {
			return
		}
		best, bestPlain := -1, -1
		for i, x := range s.opened {
			if x == o {
				continue
			}
			if best < 0 || x.used < s.opened[best].used {
				best = i
			}
			if !x.compressed && (bestPlain < 0 || x.used < s.opened[bestPlain].used) {
				bestPlain = i
			}
		}
		if bestPlain >= 0 {
			best = bestPlain
		}
		if best < 0 {
			return
		}
		s.opened[best].close() // its position stays: a ranged GET reopens it there
	}
}
