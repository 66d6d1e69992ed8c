package engine

import (
	"fmt"
	"io"
	"slices"

	"tidemark"
)

// Store holds an Engine's open (window, key) aggregates outside its slab
// (--state-store pebble): the engine then keeps in memory only the pairs
// the current batch touches, reads a pair from the store the first time a
// batch touches it, and writes the batch's pairs back with Flush. The
// memory engine (New) has no Store: its slab holds everything.
//
// The Store does the I/O; the engine does none and never learns what
// stores the pairs. stream's Pebble database is the implementation
// (stream/state_pebble.go); MemStore is one on the heap, for tests.
type Store interface {
	// Get returns the stored aggregate of the pair (start, key), and its
	// --agg state (nil without --agg), which the caller then owns.
	Get(start int64, key tidemark.Key) (agg tidemark.Agg, st *tidemark.AggState, ok bool, err error)
	// Scan calls fn for every stored pair whose window starts in [lo, hi],
	// in window-start order, then key order (tidemark.Key.Compare).
	Scan(lo, hi int64, fn PairFunc) error
	// View returns a read-only view of the store as it is now, unchanged
	// by later writes, and a function releasing it.
	View() (Scanner, func())
	// Write applies, atomically: the deletion of every pair starting at or
	// before deleteTo (when del), the pairs put gives, and the marker
	// (deleted when marker is nil). It need not be durable: the checkpoint
	// is the durable record, and the marker says which state it is.
	Write(deleteTo int64, del bool, pairs func(put PairFunc) error, marker []byte) error
	// Load adds pairs to an empty store, in as many writes as it likes.
	Load(pairs func(put PairFunc) error) error
	// Marker returns the marker of the last Write; ok is false when there is
	// none or it cannot be read.
	Marker() (marker []byte, ok bool)
	// DropMarker deletes the marker durably, so the next open rebuilds the
	// store rather than trusting it.
	DropMarker() error
	// Clear deletes every pair and the marker.
	Clear() error
	// Bytes is the store's size (on disk).
	Bytes() int64
	// String names the store in errors (its directory).
	String() string
	Close() error
}

// Scanner reads stored pairs; see Store.Scan.
type Scanner interface {
	Scan(lo, hi int64, fn PairFunc) error
}

// PairFunc receives one open pair: its window start, key, aggregate and
// --agg state (nil without --agg). A Store's Scan hands over a state the
// receiver may keep; a put does not keep the one it is given (it stores
// a copy or the encoding).
type PairFunc func(start int64, key tidemark.Key, agg tidemark.Agg, st *tidemark.AggState) error

// stored is the engine's bookkeeping of its Store.
type stored struct {
	st Store

	open int64 // open pairs in the store (closed ones not yet deleted excluded)
	// Pairs starting at or before closedTo are closed: the scan that closed
	// them emitted them, and the next flush deletes them.
	closedTo  int64
	hasClosed bool

	flushed bool // memory holds only pairs already stored: the next batch evicts them
	reused  bool // opened on a store whose marker matched the last commit
}

// lowerBound is the first window start that can be open in the store.
func (d *stored) lowerBound() int64 {
	if !d.hasClosed {
		return tidemark.MinTime
	}
	return d.closedTo + 1
}

// diskBit in slot.seqf marks a pair the store also holds (loaded from it),
// so closing it counts it off the store's pairs.
const diskBit = 1 << 30

// fetch gives a new slot for (start, key) its stored aggregate, when the
// store has one.
func (e *Engine) fetch(idx int32, start int64, key tidemark.Key) {
	if e.disk == nil {
		return
	}
	agg, st, ok, err := e.disk.st.Get(start, key)
	if err != nil {
		e.failDisk(err)
	}
	if ok {
		s := e.slots.at(idx)
		s.agg = agg
		s.seqf |= diskBit
		if err := e.putState(idx, st); err != nil {
			e.failDisk(fmt.Errorf("stream: local state %s: window %d key %s: %w", e.disk.st, start, key, err))
		}
		return
	}
	e.memNew++
}

// failDisk records the first failed read of the store (Err reports it) and
// drops the store's marker, durably, so the next start rebuilds the store
// from the checkpoint instead of failing on it again.
func (e *Engine) failDisk(err error) {
	if e.diskErr != nil {
		return
	}
	e.diskErr = err
	_ = e.disk.st.DropMarker() // best effort: a store this broken may refuse
}

// closeDisk appends, final, every stored pair starting at or before hi that
// the engine does not hold (those it holds close with the slab), and marks
// them closed: the next flush deletes them.
func (e *Engine) closeDisk(hi int64, out []tidemark.Result, emit bool) []tidemark.Result {
	d := e.disk
	if d.hasClosed && hi <= d.closedTo {
		return out
	}
	size := e.cfg.Window.Size
	err := d.st.Scan(d.lowerBound(), hi, func(start int64, key tidemark.Key, agg tidemark.Agg, st *tidemark.AggState) error {
		if e.holds(start, key) {
			return nil // the slab's copy is newer and closes there
		}
		d.open--
		if emit {
			out = append(out, tidemark.Result{Window: tidemark.Window{Start: start, End: start + size}, Key: key, Agg: agg, Final: true, State: st})
		}
		return nil
	})
	if err != nil {
		e.failDisk(fmt.Errorf("stream: local state %s: close windows: %w", d.st, err))
	}
	d.closedTo, d.hasClosed = hi, true
	return out
}

// holds reports whether the slab holds the pair (start, key).
func (e *Engine) holds(start int64, key tidemark.Key) bool {
	if pos, found := e.findBucket(start, 0); found {
		if kid, known := e.keyIDs.get(e.keys, key); known {
			_, held := e.index.get(&e.slots, e.buckets[pos].seq, kid)
			return held
		}
	}
	return false
}

// FlushTag names the state a Flush writes: the stream, the committed batch
// it is the state after, and that batch's changes (their CRC-32C, the
// checkpoint's Token). After, when set, replaces the engine's watermark
// and sources (the drain batch's checkpointed state).
type FlushTag struct {
	StreamID string
	BatchID  int64
	Token    uint32
	After    *State
}

// Flush writes what the slab holds to the engine's Store in one write:
// every pair it holds (all touched since the last flush), the deletion of
// closed pairs, and a marker naming tag, so a restart knows which
// committed state the store holds. The next batch starts from an empty
// slab. Without a Store it does nothing.
func (e *Engine) Flush(tag FlushTag) error {
	if e.disk == nil {
		return nil
	}
	return e.flushDisk(e.diskMarkerFor(tag))
}

// flushDisk is Flush with a marker m (nil: the marker is deleted, so a
// store between markers is never mistaken for a committed state).
func (e *Engine) flushDisk(m *Marker) error {
	d := e.disk
	if e.diskErr != nil {
		return e.diskErr
	}
	open := d.open + e.memNew
	var marker []byte
	if m != nil {
		m.Open = open
		marker = m.MarshalBinary()
	}
	pairs := func(put PairFunc) error {
		for _, bk := range e.buckets {
			for _, idx := range bk.slots {
				s := e.slots.at(idx)
				if err := put(bk.start, e.keys[s.key].key, s.agg, e.stateOf(idx)); err != nil {
					return err
				}
			}
		}
		return nil
	}
	if err := d.st.Write(d.closedTo, d.hasClosed, pairs, marker); err != nil {
		return err
	}
	d.open, e.memNew = open, 0
	for _, bk := range e.buckets {
		for _, idx := range bk.slots {
			e.slots.at(idx).seqf |= diskBit
		}
	}
	d.flushed = true
	return nil
}

// evict empties the slab after a flush: the next batch holds only what it
// touches. Capacity is kept (a batch touches about as many pairs as the
// last), and the tables are cleared in place.
func (e *Engine) evict() {
	for i := range e.buckets {
		e.spare = append(e.spare, e.buckets[i].slots[:0])
	}
	e.buckets = e.buckets[:0]
	e.free = e.free[:0]
	e.slots.truncate()
	clear(e.states)
	e.states = e.states[:0]
	e.keys, e.freeKeys = e.keys[:0], e.freeKeys[:0]
	e.seqs, e.nextSeq = e.seqs[:0], 0
	e.keyIDs.clear()
	e.index.clear()
	e.keyBytes = 0
	e.changed = e.changed[:0]
	e.disk.flushed = false
}

// diskMarkerFor is the marker of the engine's state tagged tag.
func (e *Engine) diskMarkerFor(tag FlushTag) *Marker {
	m := &Marker{StreamID: tag.StreamID, BatchID: tag.BatchID, Token: tag.Token, Window: e.cfg.Window,
		Watermark: e.w, HasWatermark: e.hasW, Sources: e.sourceStates(nil)}
	if tag.After != nil {
		m.Watermark, m.HasWatermark, m.Sources = tag.After.Watermark, tag.After.HasWatermark, tag.After.Sources
	}
	return m
}

// writeDiskSnapshot streams the snapshot of a flushed store engine to w,
// pair by pair from a scan of r (a view of the store).
func (e *Engine) writeDiskSnapshot(r Scanner, open int64, w io.Writer) (int64, uint32, error) {
	sw := newSnapshotWriter(w, e, open)
	size := e.cfg.Window.Size
	var count int64
	err := r.Scan(e.disk.lowerBound(), tidemark.MaxTime, func(start int64, key tidemark.Key, agg tidemark.Agg, st *tidemark.AggState) error {
		count++
		return sw.add(tidemark.Result{Window: tidemark.Window{Start: start, End: start + size}, Key: key, Agg: agg, State: st})
	})
	if err != nil {
		return sw.n, 0, fmt.Errorf("stream: local state %s: snapshot: %w", e.disk.st, err)
	}
	if count != open {
		return sw.n, 0, fmt.Errorf("stream: local state %s holds %d open pairs, its count says %d", e.disk.st, count, open)
	}
	return sw.finish()
}

// diskStateCopy is State for a store engine: the stored pairs, with the
// slab's newer copies, sorted. It holds the whole state in memory: for
// inspection and tests, never on the batch path.
func (e *Engine) diskStateCopy() *State {
	st := &State{Window: e.cfg.Window, Watermark: e.w, HasWatermark: e.hasW, Sources: e.sourceStates(nil), Aggs: e.aggs()}
	size := e.cfg.Window.Size
	err := e.disk.st.Scan(e.disk.lowerBound(), tidemark.MaxTime, func(start int64, key tidemark.Key, agg tidemark.Agg, as *tidemark.AggState) error {
		if e.holds(start, key) {
			return nil
		}
		st.Open = append(st.Open, tidemark.Result{Window: tidemark.Window{Start: start, End: start + size}, Key: key, Agg: agg, State: as})
		return nil
	})
	if err != nil {
		e.failDisk(fmt.Errorf("stream: local state %s: %w", e.disk.st, err))
	}
	for _, b := range e.buckets {
		win := tidemark.Window{Start: b.start, End: b.start + size}
		for _, idx := range b.slots {
			s := e.slots.at(idx)
			st.Open = append(st.Open, tidemark.Result{Window: win, Key: e.keys[s.key].key, Agg: s.agg, State: e.stateOf(idx).Clone()})
		}
	}
	slices.SortFunc(st.Open, tidemark.CompareResults)
	return st
}
