package engine

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"time"

	"tidemark"
)

// Engine aggregates records into event-time windows per key and closes
// windows as the watermark passes them (SPEC §2). It is pure: no I/O, no
// goroutines, no clock of its own (Process takes now), and not safe for
// concurrent use. The same records in the same batches with the same nows
// give the same output, byte for byte.
//
// Open state is one slot per (window, key) in a slab. Keys are interned to
// small ids (one string hash per record), each open window start gets a
// small sequence number, and a map from (sequence, key id) packed in a
// uint64 finds the slot (one integer hash per window of a record). Windows
// are listed by start in ascending order, each with its slots, so closing
// touches only the windows that close. Freed slots, key ids and sequence
// numbers are reused: memory is bounded by the peak number of open (window,
// key) pairs and of keys in them, not by history.
type Engine struct {
	watermarks // sources, W and the rule that advances it (watermark.go)

	keyIDs   keyTable // keys of open slots -> index into keys
	keys     []keyEntry
	freeKeys []int32

	index   slotTable // (bucket seq, key id) -> index into slots
	slots   slab
	free    []int32  // indices of freed slots, reused first
	buckets []bucket // open window starts, ascending, each with its slots
	spare   [][]int32
	seqs    []uint32 // freed bucket sequence numbers
	nextSeq uint32

	changed  []changedRef // slots changed in this batch: update-mode output and the changelog
	wins     []tidemark.Window
	keyBytes int64

	// disk, with a Store (OpenStore), holds the open state; the slab then
	// holds only the pairs touched since the last flush (store.go).
	disk    *stored
	memNew  int64 // slab pairs the store does not hold yet
	diskErr error // the first failed store read, reported by Err and the flush

	touched int32 // what touch read, kept so its reads are not optimized away

	// states holds, with --agg, each slot's aggregate state, by slot
	// index beside the slab (whose chunks stay pointer-free, so a state
	// without --agg costs the garbage collector nothing more); nil
	// without --agg.
	states []*tidemark.AggState
}

// aggs reports whether the engine has --agg aggregates.
func (e *Engine) aggs() bool { return !e.cfg.Aggs.Empty() }

// stateOf returns slot idx's aggregate state; nil without --agg.
func (e *Engine) stateOf(idx int32) *tidemark.AggState {
	if int(idx) >= len(e.states) {
		return nil
	}
	return e.states[idx]
}

// putState sets slot idx's aggregate state, which must be of the engine's
// list (a restored one is checked): the engine owns it from then on.
func (e *Engine) putState(idx int32, st *tidemark.AggState) error {
	if !e.aggs() {
		if st != nil {
			return errAggsDiffer(true)
		}
		return nil
	}
	if st == nil || !e.cfg.Aggs.Fits(st) {
		return fmt.Errorf("its aggregate state does not fit --agg %s: %w", e.cfg.Aggs.Describe(), errAggsDiffer(st != nil))
	}
	e.growStates(idx)
	e.states[idx] = st
	return nil
}

// growStates makes states hold slot idx.
func (e *Engine) growStates(idx int32) {
	if n := int(idx) + 1; n > len(e.states) {
		e.states = append(e.states, make([]*tidemark.AggState, n-len(e.states))...)
	}
}

// errAggsDiffer says that a checkpoint's aggregates are not the engine's:
// had tells whether it carries states.
func errAggsDiffer(had bool) error {
	if had {
		return errors.New("the checkpoint was written with other --agg aggregates than this run's (a stream keeps its --agg list; run with the lake's)")
	}
	return errors.New("the checkpoint was written without --agg aggregates, this run has some (a stream keeps its --agg list; run with the lake's)")
}

type keyEntry struct {
	key    tidemark.Key
	prefix uint64 // orderedPrefix(key): sortSlots orders by it without reading the key
	refs   int32  // open slots holding the key; -1 once the entry is freed
	// last is a hint: the slot the key was last given (mostly its pair in
	// the newest window, where most of its records land), checked against
	// the slot's own (window, key) before use, so add finds that pair
	// without probing the slot table.
	last int32
}

type slot struct {
	agg  tidemark.Agg
	key  int32  // key id
	seqf uint32 // the window's bucket sequence number, and changedBit
}

// changedBit in slot.seqf marks a slot listed in Engine.changed; diskBit
// (store.go) one the Store holds too.
const changedBit = 1 << 31

func (s *slot) seq() uint32 { return s.seqf &^ (changedBit | diskBit) }

type bucket struct {
	start  int64
	seq    uint32
	sorted int32 // the first sorted slots are in key order (sortSlots)
	slots  []int32
}

type changedRef struct {
	start int64
	idx   int32
}

// New returns an engine with cfg, resuming from st when it is not nil (a
// snapshot taken by State, possibly through MarshalBinary). The state must
// have been built with the same window spec.
func New(cfg Config, st *State) (*Engine, error) {
	cfg, err := cfg.validate()
	if err != nil {
		return nil, err
	}
	e := &Engine{
		watermarks: newWatermarks(cfg),
		keyIDs:     newKeyTable(),
	}
	if st != nil {
		if err := e.load(st); err != nil {
			return nil, fmt.Errorf("stream: resume state: %w", err)
		}
	}
	return e, nil
}

// Process runs one micro-batch: it classifies each valid record with the
// watermark from the end of the previous batch, sets its Status and
// Disorder, folds it into its open windows, then updates the per-source
// maxima and W and closes every window with end <= W.
//
// Quarantined records (Reason != ReasonNone) count only as source activity
// for idle detection; they never move the watermark. Process with no
// records is how a caller lets idle sources stop holding W back.
//
// A record is StatusLate when the watermark left it out of at least one of
// its windows. With sliding windows and the window rule such a row may still
// count in its open windows; marking it late anyway means reconcile finds
// every window the stream got wrong.
func (e *Engine) Process(recs []tidemark.Record, now time.Time) BatchResult {
	if e.disk != nil && e.disk.flushed {
		e.evict()
	}
	e.resetChanged()
	b := e.begin(now)
	var hashes [touchAhead]int
	ahead := e.keyIDs.Len() >= touchMinKeys
	for i := range recs {
		if ahead && i%touchAhead == 0 {
			e.touch(recs[i:min(i+touchAhead, len(recs))], hashes[:])
		}
		r := &recs[i]
		if !e.observe(&b, r) {
			continue
		}
		h := hashes[i%touchAhead]
		if !ahead {
			h = e.keyIDs.hash(r.Key)
		}
		if e.add(r, h) {
			r.Status = tidemark.StatusLate
			b.res.Dropped++
		}
	}
	e.end(&b)
	res := b.res
	if e.cfg.OutputMode == Update {
		for _, c := range e.changed {
			if e.closes(c.start) {
				continue // closes below, emitted once as final
			}
			s := e.slots.at(c.idx)
			res.Emitted = append(res.Emitted, tidemark.Result{
				Window: tidemark.Window{Start: c.start, End: c.start + e.cfg.Window.Size},
				Key:    e.keys[s.key].key,
				Agg:    s.agg,
				// A copy: the pair stays open and changes on.
				State: e.stateOf(c.idx).Clone(),
			})
		}
	}
	// The slab closes windows in (start, key) order: output that is all
	// closeUpTo's is sorted as it comes (closeDisk's rows come first).
	ordered := len(res.Emitted) == 0 && e.disk == nil
	if e.hasW {
		res.Emitted = e.closeUpTo(e.w, res.Emitted)
	}
	e.finish(&res, ordered)
	return res
}

// Drain moves W to +infinity and emits every open window, final (the
// --once --drain backfill). W stays there: later records are all late.
func (e *Engine) Drain() BatchResult {
	if e.disk != nil && e.disk.flushed {
		e.evict()
	}
	e.resetChanged()
	e.w, e.hasW = tidemark.MaxTime, true
	var res BatchResult
	res.Emitted = e.closeUpTo(e.w, nil)
	e.finish(&res, e.disk == nil)
	return res
}

// finish sorts the emitted windows, unless they are ordered already (all
// from the slab's closeUpTo, window after window, each window's pairs in
// key order: checking 222k of them was a third of a per-user drain's engine
// time), and fills in the state figures.
func (e *Engine) finish(res *BatchResult, ordered bool) {
	if !ordered && !slices.IsSortedFunc(res.Emitted, tidemark.CompareResults) {
		slices.SortFunc(res.Emitted, tidemark.CompareResults)
	}
	res.Watermark, res.HasWatermark = e.w, e.hasW
	res.OpenWindows = int(e.OpenRows())
	res.StateBytes = e.StateBytes()
	if e.disk != nil {
		res.StateBytes += e.disk.st.Bytes()
	}
}

// OpenRows is the number of open (window, key) pairs, on either store.
func (e *Engine) OpenRows() int64 {
	if e.disk != nil {
		return e.disk.open + e.memNew
	}
	return int64(e.index.Len())
}

// Err reports a failure of the state store during the last Process or
// Drain (a Store read); its result must then not be used. The memory engine
// never fails.
func (e *Engine) Err() error { return e.diskErr }

// Close releases the state store (Store.Close); the engine is not
// usable after it. Closing a memory engine or a nil one does nothing.
func (e *Engine) Close() error {
	if e == nil || e.disk == nil {
		return nil
	}
	err := e.disk.st.Close()
	e.disk = nil
	return err
}

// resetChanged starts a batch for change tracking: the slots the previous
// one changed lose their mark (closed ones were cleared when freed).
func (e *Engine) resetChanged() {
	for _, c := range e.changed {
		if !e.closes(c.start) {
			e.slots.at(c.idx).seqf &^= changedBit
		}
	}
	e.changed = e.changed[:0]
}

// add folds a valid record into its open windows and reports whether the
// watermark left it out of at least one of them.
func (e *Engine) add(r *tidemark.Record, h int) (late bool) {
	if e.cfg.LateRule == LateEvent && e.hasW && r.EventTime < e.w {
		return true
	}
	e.wins = e.cfg.Window.Assign(e.wins[:0], r.EventTime)
	kid, known := e.keyIDs.getHashed(e.keys, r.Key, h)
	pos := 0
	for _, win := range e.wins {
		if e.hasW && win.End <= e.w {
			late = true
			continue
		}
		var found bool
		pos, found = e.findBucket(win.Start, pos)
		var idx int32
		var s *slot
		if found && known {
			seq := e.buckets[pos].seq
			if l := e.keys[kid].last; uint(l) < uint(e.slots.len()) {
				if p := e.slots.at(l); p.matches(seq, kid) {
					idx, s = l, p
				}
			}
			if s == nil {
				idx, found = e.index.get(&e.slots, seq, kid)
			}
		} else {
			found = false
		}
		if !found {
			if !known {
				kid, known = e.newKey(r.Key, h), true
			}
			idx = e.newSlot(pos, win.Start, kid)
			e.fetch(idx, win.Start, r.Key)
		}
		if s == nil {
			s = e.slots.at(idx)
		}
		s.agg.Add(r.Value, r.HasValue)
		if e.aggs() {
			e.addState(idx, r.Fields)
		}
		if s.seqf&changedBit == 0 {
			s.seqf |= changedBit
			e.changed = append(e.changed, changedRef{start: win.Start, idx: idx})
		}
		pos++ // the next window starts later
	}
	return late
}

// addState folds a record's --agg inputs into slot idx's state, making it.
func (e *Engine) addState(idx int32, fields []tidemark.AggValue) {
	e.growStates(idx)
	st := e.states[idx]
	if st == nil {
		st = e.cfg.Aggs.NewState()
		e.states[idx] = st
	}
	e.cfg.Aggs.Add(st, fields)
}

// findBucket returns the position of the window starting at start in
// e.buckets, or where it would be inserted, searching from hint (windows of
// a record come in ascending order, and mostly land in the newest bucket).
func (e *Engine) findBucket(start int64, hint int) (int, bool) {
	n := len(e.buckets)
	if n > 0 && e.buckets[n-1].start == start {
		return n - 1, true
	}
	if hint < n && e.buckets[hint].start == start {
		return hint, true
	}
	return slices.BinarySearchFunc(e.buckets, start, func(b bucket, s int64) int {
		return cmp.Compare(b.start, s)
	})
}

// internKey returns the id of key, making one.
func (e *Engine) internKey(key tidemark.Key) int32 {
	h := e.keyIDs.hash(key)
	if id, ok := e.keyIDs.getHashed(e.keys, key, h); ok {
		return id
	}
	return e.newKey(key, h)
}

// newKey gives key, absent from the key table and hashed to h, an id.
func (e *Engine) newKey(key tidemark.Key, h int) int32 {
	var id int32
	if n := len(e.freeKeys); n > 0 {
		id = e.freeKeys[n-1]
		e.freeKeys = e.freeKeys[:n-1]
	} else {
		id = int32(len(e.keys))
		e.keys = append(e.keys, keyEntry{})
	}
	var scratch [16]byte
	e.keys[id] = keyEntry{key: key, prefix: orderedPrefix(key, scratch[:0])}
	e.keyIDs.putHashed(e.keys, id, h)
	e.keyBytes += int64(len(key))
	return id
}

// releaseKey drops one reference to a key id, freeing it at zero.
func (e *Engine) releaseKey(id int32) {
	k := &e.keys[id]
	if k.refs--; k.refs > 0 {
		return
	}
	e.keyIDs.del(k.key, id)
	e.keyBytes -= int64(len(k.key))
	*k = keyEntry{refs: -1} // freed: the key table's rehash skips it
	e.freeKeys = append(e.freeKeys, id)
}

// newSlot takes a free slot for (start, key id) and lists it under its
// window at position pos of e.buckets, inserting the window if needed.
func (e *Engine) newSlot(pos int, start int64, kid int32) int32 {
	if pos == len(e.buckets) || e.buckets[pos].start != start {
		var list []int32
		if n := len(e.spare); n > 0 {
			list = e.spare[n-1]
			e.spare = e.spare[:n-1]
		}
		var seq uint32
		if n := len(e.seqs); n > 0 {
			seq = e.seqs[n-1]
			e.seqs = e.seqs[:n-1]
		} else {
			seq = e.nextSeq
			e.nextSeq++
		}
		e.buckets = slices.Insert(e.buckets, pos, bucket{start: start, seq: seq, slots: list})
	}
	var idx int32
	if n := len(e.free); n > 0 {
		idx = e.free[n-1]
		e.free = e.free[:n-1]
	} else {
		idx = e.slots.push()
	}
	b := &e.buckets[pos]
	*e.slots.at(idx) = slot{key: kid, seqf: b.seq}
	if int(idx) < len(e.states) {
		e.states[idx] = nil
	}
	e.keys[kid].refs++
	e.keys[kid].last = idx
	b.slots = append(b.slots, idx)
	e.index.put(&e.slots, idx)
	return idx
}

// Approximate memory per open (window, key): the slot (56 B with the
// compensated sum; the slab's chunks leave no growth slack worth counting),
// its entry in the slot table with load-factor slack (~6-10 B) and the
// bucket list entry (4 B). Per open key: the key table entry (32 B: the
// key, its ordered prefix, its reference count and last slot) and its slot
// in the intern table (~6 B), less what the slack estimates leave over, and
// the key bytes. BenchmarkStateBytes (73 B per pair, 1k keys in 100
// windows) and BenchmarkStateBytesPerUser (103 B, a key per pair) measure
// the real figure; the estimate is within ~10% of both.
const (
	bytesPerSlot = 68
	bytesPerKey  = 32
)

// bytesPerAggState is the heap of a --agg state holding a few values
// (BenchmarkStateBytesAggs: 291 B per pair with one row for p95, avg and
// count_distinct against 73 B without --agg; 531 B with ten rows, 2.7 KB
// with a hundred, once the sketches take over). StateBytes counts this
// much per open pair: the per-user shape's pairs hold a row or two; a pair
// with many rows costs more than counted, but such pairs are few beside
// the keys that make the state large.
const bytesPerAggState = 220

// StateBytes estimates the memory the open state holds in the slab.
func (e *Engine) StateBytes() int64 {
	n := int64(e.index.Len())*bytesPerSlot + int64(e.keyIDs.Len())*bytesPerKey + e.keyBytes
	if e.aggs() {
		n += int64(e.index.Len()) * bytesPerAggState
	}
	return n
}
