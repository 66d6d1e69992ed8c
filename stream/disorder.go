package stream

import (
	"bytes"
	"encoding/json"
	"fmt"

	"tidemark"
	"tidemark/ingest"
	"tidemark/stream/engine"
)

// Disorder as the watermark sees it (raw_events.disorder_us, SPEC §4.1).
// A row's disorder is how far its event time lies behind the event time
// its source's watermark follows when it is read: the lateness budget it
// needs not to be late. With one file per source that is the source's max
// event time so far (the engine sets it so). With several files, aligned
// reading (ingest/align.go) reads ahead of the watermark: a file is read
// while it lags the others, so
// the max event time seen counts events of files far ahead of the one
// being read, which the watermark does not follow (its frontier is the
// lagging file's). 8 files each holding a stretch of time gave a median
// disorder of 9h7m for events that one file gave 1.55 s.
//
// So for a source with several files, disorder is measured against the
// source's level: the highest event time its watermark has followed so
// far, the smaller of its max event time and its frontier (the smallest
// standing over the files that hold it, as ingest.Position.Frontier: a
// file's max, or the first event time peeked of a file not read yet),
// never going down. Within a batch the frontier is followed record by record: a
// file held at the batch's start (its logged start position) holds until
// its last record of the batch and then as its end position says; a file
// that did not hold joins at its first record. The batch starts from the
// level of the start position and the engine's max, and not below W plus
// the source's budget (a row under W is late by at least that much). It
// is a function of the logged positions and the records, so a replayed
// batch gets the same figures.
type disorderMeter struct {
	// prev is the last batch's decoded end positions with their logged
	// bytes: the next batch's start, decoded once.
	prev map[string]decodedPosition
}

type decodedPosition struct {
	raw json.RawMessage
	pos ingest.Position
}

// decode returns the positions of raws, reusing prev's where the bytes are
// the same.
func (m *disorderMeter) decode(raws map[string]json.RawMessage, what string) (map[string]decodedPosition, error) {
	out := make(map[string]decodedPosition, len(raws))
	for name, raw := range raws {
		if d, ok := m.prev[name]; ok && bytes.Equal(d.raw, raw) {
			out[name] = d
			continue
		}
		var pos ingest.Position
		if err := json.Unmarshal(raw, &pos); err != nil {
			return nil, fmt.Errorf("%s position of source %s: %w", what, name, err)
		}
		out[name] = decodedPosition{raw: raw, pos: pos}
	}
	return out, nil
}

// manyFiles reports whether a source has more than one file in start or
// end: only then does its level differ from its max event time.
func manyFiles(start, end map[string]decodedPosition) bool {
	for name, e := range end {
		if len(e.pos.Files) > 1 || len(start[name].pos.Files) > 1 {
			return true
		}
	}
	return false
}

// measure sets the Disorder of the valid records of every source with more
// than one file in start or end. before are the engine's source marks and
// w, hasW its watermark before the batch; lateness gives each source's
// budget (µs).
func (m *disorderMeter) measure(recs []tidemark.Record, start, end map[string]decodedPosition, before []engine.SourceMark, w int64, hasW bool, lateness func(string) int64) {
	m.prev = end
	var runs map[string]*sourceLevel
	for name, e := range end {
		s := start[name]
		if len(s.pos.Files) <= 1 && len(e.pos.Files) <= 1 {
			continue // one file: the source's max event time is its level (the engine's figure)
		}
		if runs == nil {
			runs = map[string]*sourceLevel{}
		}
		runs[name] = newSourceLevel(s.pos, e.pos)
	}
	if runs == nil {
		return
	}
	for _, mk := range before {
		lv := runs[mk.Name]
		if lv == nil {
			continue
		}
		if mk.HasEventTime {
			lv.max, lv.hasMax = mk.MaxEventTime, true
		}
		if hasW && w != tidemark.MaxTime && w > tidemark.MinTime {
			lv.raise(tidemark.AddSat(w, lateness(mk.Name)))
		}
	}
	for _, lv := range runs {
		lv.raiseToFrontier()
	}
	for i := range recs {
		if lv := runs[recs[i].Source]; lv != nil {
			lv.lastIndex(recs[i].File, i)
		}
	}
	for i := range recs {
		if lv := runs[recs[i].Source]; lv != nil {
			lv.observe(&recs[i], i)
		}
	}
}

// sourceLevel follows one source's level through a batch.
type sourceLevel struct {
	files   map[string]*fileLevel
	holding levelHeap // holding files with a valid event, by max
	noMax   int       // holding files without one (the frontier waits for them)
	max     int64     // the source's max event time so far
	hasMax  bool
	level   int64 // the highest level so far
	hasLvl  bool
	cur     *fileLevel // the file of the previous record: records come in runs
	curName string
}

type fileLevel struct {
	max     int64
	hasMax  bool
	hold    bool
	endHold bool
	last    int // index of its last record in the batch; -1 for none
	heapIdx int
}

func newSourceLevel(start, end ingest.Position) *sourceLevel {
	lv := &sourceLevel{files: make(map[string]*fileLevel, len(start.Files))}
	peeked := map[string]int64{} // files peeked in this batch: the event time they start at
	for _, f := range end.Files {
		lv.files[f.Path] = &fileLevel{endHold: f.Hold, last: -1, heapIdx: -1}
		if f.HasNext {
			peeked[f.Path] = f.Next
		}
	}
	for _, f := range start.Files {
		fl := lv.files[f.Path]
		if fl == nil {
			fl = &fileLevel{last: -1, heapIdx: -1} // gone by the end: holds no more after its records
			lv.files[f.Path] = fl
		}
		fl.max, fl.hasMax = f.Standing()
		if next, ok := peeked[f.Path]; ok && !fl.hasMax {
			// Not peeked yet at the start: the batch's Read peeks it
			// before it takes any record, so it holds at its first event
			// time from the start, as Frontier has it at the end.
			fl.max, fl.hasMax = next, true
		}
		if f.Hold {
			lv.join(fl)
		}
	}
	return lv
}

func (lv *sourceLevel) file(name string) *fileLevel {
	if lv.cur != nil && lv.curName == name {
		return lv.cur
	}
	fl := lv.files[name]
	if fl == nil {
		fl = &fileLevel{last: -1, heapIdx: -1}
		lv.files[name] = fl
	}
	lv.cur, lv.curName = fl, name
	return fl
}

func (lv *sourceLevel) lastIndex(name string, i int) { lv.file(name).last = i }

// join makes fl hold the frontier.
func (lv *sourceLevel) join(fl *fileLevel) {
	if fl.hold {
		return
	}
	fl.hold = true
	if fl.hasMax {
		lv.holding.push(fl)
	} else {
		lv.noMax++
	}
}

// leave makes fl stop holding it.
func (lv *sourceLevel) leave(fl *fileLevel) {
	if !fl.hold {
		return
	}
	fl.hold = false
	if fl.heapIdx >= 0 {
		lv.holding.remove(fl)
	} else {
		lv.noMax--
	}
}

func (lv *sourceLevel) raise(t int64) {
	if !lv.hasLvl || t > lv.level {
		lv.level, lv.hasLvl = t, true
	}
}

// raiseToFrontier raises the level to min(max event time, frontier).
func (lv *sourceLevel) raiseToFrontier() {
	switch {
	case !lv.hasMax || lv.noMax > 0:
	case len(lv.holding) == 0:
		lv.raise(lv.max)
	default:
		lv.raise(min(lv.max, lv.holding[0].max))
	}
}

// observe sets the record's disorder against the level before it, then
// moves its file's max, the files that hold and the level.
func (lv *sourceLevel) observe(r *tidemark.Record, i int) {
	fl := lv.file(r.File)
	if r.Reason == tidemark.ReasonNone {
		t := r.EventTime
		r.Disorder = 0
		if lv.hasLvl && lv.level > t {
			r.Disorder = lv.level - t
		}
		if !lv.hasMax || t > lv.max {
			lv.max, lv.hasMax = t, true
		}
		switch {
		case !fl.hasMax:
			fl.max, fl.hasMax = t, true
			if fl.hold { // it held without an event: now it holds at t
				lv.noMax--
				lv.holding.push(fl)
			}
		case t > fl.max:
			fl.max = t
			if fl.heapIdx >= 0 {
				lv.holding.down(fl.heapIdx)
			}
		}
	}
	lv.join(fl) // a file read from holds while it has records
	if i == fl.last && !fl.endHold {
		lv.leave(fl)
	}
	lv.raiseToFrontier()
}

// levelHeap is a min-heap of files by max, each knowing its index.
// Hand-written: container/heap (its interface calls) cost 12-20% more
// CPU in BenchmarkDisorderMeasure (user time, 8 files: 1.60-1.64 s
// against 1.33-1.43 s for 3000 batches, 4 alternating runs).
type levelHeap []*fileLevel

func (h *levelHeap) push(f *fileLevel) {
	f.heapIdx = len(*h)
	*h = append(*h, f)
	h.up(f.heapIdx)
}

func (h *levelHeap) remove(f *fileLevel) {
	i, last := f.heapIdx, len(*h)-1
	h.swap(i, last)
	*h = (*h)[:last]
	f.heapIdx = -1
	if i < last {
		h.down(i)
		h.up(i)
	}
}

func (h levelHeap) swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].heapIdx, h[j].heapIdx = i, j
}

func (h levelHeap) up(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if h[p].max <= h[i].max {
			return
		}
		h.swap(i, p)
		i = p
	}
}

func (h levelHeap) down(i int) {
	for {
		l := 2*i + 1
		if l >= len(h) {
			return
		}
		m := l
		if r := l + 1; r < len(h) && h[r].max < h[l].max {
			m = r
		}
		if h[i].max <= h[m].max {
			return
		}
		h.swap(i, m)
		i = m
	}
}
