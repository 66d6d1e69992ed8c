package ingest

import (
	"time"

	"tidemark"
)

// Event-time alignment (SPEC §2, "Watermark"). Within a source, the files
// (or objects) are read so that event time advances evenly over them:
// each Read takes records from the file whose own event time lags most
// (the largest event time read from it, FilePosition.Max), and moves to
// another file as soon as this one passes it. A backlog spread over many
// files then arrives in about the order one file holding the same events
// would give, and no file buffers ahead of another: each is read straight
// from its position, only when it is the one behind.
//
// Reading alone is not enough when a file lagging behind has nothing to
// read right now (a live file waiting for its writer), so each Position
// also says which files hold the source's watermark back (Hold) and
// Frontier gives the event time the watermark must not pass: the stream
// caps the source's watermark there. A file stops holding once it cannot
// grow any more and is read to its end (compressed, an S3 object, every
// file under --once, a file rotated away), or when it has had no new line
// for SourceConfig.IdleTimeout.
//
// Everything here is a function of the Position and of the bytes read, so
// a replay from a logged Position reads the same records in the same order.

// Frontier returns the event time the source's watermark must not pass
// after the reads that led to p: the smallest Max over the files that hold
// it, tidemark.MinTime if one of them has no valid event yet. held is false
// when no file holds it (all read to their end, finished or idle); the
// source's own largest event time then rules.
func (p Position) Frontier() (t int64, held bool) {
	for i := range p.Files {
		f := &p.Files[i]
		if !f.Hold {
			continue
		}
		v, _ := f.Standing()
		if !held || v < t {
			t, held = v, true
		}
	}
	return t, held
}

// Standing returns the event time a file stands at in aligned reading and
// holds the frontier at: its Max once it has a valid event read, else the
// event time it will start at (Next, if peeked). ok is false when neither
// is known: t is then tidemark.MinTime (it holds the frontier at the
// bottom, and is read before the others).
func (p *FilePosition) Standing() (t int64, ok bool) {
	switch {
	case p.HasMax:
		return p.Max, true
	case p.HasNext:
		return p.Next, true
	}
	return tidemark.MinTime, false
}

// Holder returns the file that holds the source's watermark at the
// Frontier: of the files that hold it, the one with the smallest Standing
// (one without a known event time first), ties to the one whose last line is
// oldest. ok is false when no file holds it. It is what a stalled
// watermark's diagnosis names (how long the file has been silent is the
// Position's time minus LastLine); it changes nothing.
func (p Position) Holder() (f FilePosition, ok bool) {
	var best *FilePosition
	for i := range p.Files {
		c := &p.Files[i]
		if !c.Hold {
			continue
		}
		if best == nil || holdsLower(c, best) {
			best = c
		}
	}
	if best == nil {
		return FilePosition{}, false
	}
	f = *best
	f.Header = nil // the caller only reads; no alias into the Position
	return f, true
}

// holdsLower: a holds the frontier lower than b (see Holder).
func holdsLower(a, b *FilePosition) bool {
	at, aok := a.Standing()
	bt, bok := b.Standing()
	switch {
	case aok != bok:
		return !aok
	case aok && at != bt:
		return at < bt
	}
	return a.LastLine < b.LastLine
}

// saw notes a record read from the file: its read time, and its event
// time when it is a valid event.
func (p *FilePosition) saw(r *tidemark.Record, readTime int64) {
	p.LastLine = readTime
	if r.Reason != tidemark.ReasonNone {
		return
	}
	if !p.HasMax || r.EventTime > p.Max {
		p.Max, p.HasMax = r.EventTime, true
	}
}

// holds decides FilePosition.Hold. finished: the file cannot give more
// records (read to the end of an immutable input, or to its --once size);
// unread: bytes are known to be there beyond what was read; live: the file
// may still grow.
func holds(p *FilePosition, finished, unread, live bool, now int64, idle time.Duration) bool {
	switch {
	case finished:
		return false
	case unread:
		return true
	case !live || p.Rotated || !p.HasMax:
		return false // nothing more can come, or nothing valid came yet
	case idle > 0 && now-p.LastLine >= idle.Microseconds():
		return false
	}
	return true
}

// alignKey orders the files of a source for aligned reading: the one whose
// event time lags most first (a file not read yet by the event time it
// starts at, if peeked), a file without a known event time before all
// others, ties in path order (i is the index in path order).
type alignKey struct {
	t int64
	i int
}

func keyOf(p *FilePosition, i int) alignKey {
	t, _ := p.Standing()
	return alignKey{t, i}
}

func (a alignKey) less(b alignKey) bool { return a.t < b.t || a.t == b.t && a.i < b.i }

// alignQueue is a min-heap of the files a Read may still take records
// from (hand-written: container/heap boxes every element it moves).
type alignQueue []alignKey

// reset fills the queue with the given keys.
func (q *alignQueue) reset(keys []alignKey) {
	*q = append((*q)[:0], keys...)
	for i := len(*q)/2 - 1; i >= 0; i-- {
		q.down(i)
	}
}

// take removes and returns the file that lags most, and the key of the
// file after it (the bound: reading the taken file may go on while its key
// stays below). ok is false when the queue is empty.
func (q *alignQueue) take() (k, bound alignKey, ok bool) {
	h := *q
	if len(h) == 0 {
		return alignKey{}, alignKey{}, false
	}
	k = h[0]
	last := len(h) - 1
	h[0] = h[last]
	*q = h[:last]
	q.down(0)
	bound = alignKey{tidemark.MaxTime, int(^uint(0) >> 1)}
	if len(*q) > 0 {
		bound = (*q)[0]
	}
	return k, bound, true
}

// put adds a file back.
func (q *alignQueue) put(k alignKey) {
	*q = append(*q, k)
	h := *q
	for i := len(h) - 1; i > 0; {
		p := (i - 1) / 2
		if !h[i].less(h[p]) {
			break
		}
		h[i], h[p] = h[p], h[i]
		i = p
	}
}

func (q alignQueue) down(i int) {
	for {
		l := 2*i + 1
		if l >= len(q) {
			return
		}
		m := l
		if r := l + 1; r < len(q) && q[r].less(q[l]) {
			m = r
		}
		if !q[m].less(q[i]) {
			return
		}
		q[i], q[m] = q[m], q[i]
		i = m
	}
}

var (
	_ Limiter = (*DirSource)(nil)
	_ Limiter = (*s3Source)(nil)
)
