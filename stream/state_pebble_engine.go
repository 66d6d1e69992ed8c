package stream

import (
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/cockroachdb/pebble/v2"

	"tidemark"
)

// The engine's side of the Pebble store: loading the pairs a batch
// touches, closing windows by range scan, flushing a batch with its
// marker, streaming a snapshot, and opening or rebuilding the database at
// a restart.

// diskBit in slot.seqf marks a pair the Pebble store also holds (loaded
// from it), so closing it counts it off the store's pairs.
const diskBit = 1 << 30

// fetch gives a new slot for (start, key) its stored aggregate, when the
// Pebble store has one.
func (e *Engine) fetch(idx int32, start int64, key tidemark.Key) {
	if e.disk == nil {
		return
	}
	agg, ok, err := e.disk.get(start, key)
	if err != nil {
		e.failDisk(err)
	}
	if ok {
		s := e.slots.at(idx)
		s.agg = agg
		s.seqf |= diskBit
		return
	}
	e.memNew++
}

// failDisk records the first failed read of the Pebble store (Err reports
// it) and deletes the store's marker, durably, so the next start rebuilds
// the database from the checkpoint instead of failing on it again.
func (e *Engine) failDisk(err error) {
	if e.diskErr != nil {
		return
	}
	e.diskErr = err
	_ = e.disk.db.Delete([]byte(markerName), pebble.Sync) // best effort: a store this broken may refuse
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
	err := scanPairs(d.db, d.lowerBound(), pairKey(nil, hi+1, ""), func(start int64, key tidemark.Key, agg tidemark.Agg) error {
		if pos, found := e.findBucket(start, 0); found {
			if kid, known := e.keyIDs.get(e.keys, key); known {
				if _, held := e.index.get(&e.slots, e.buckets[pos].seq, kid); held {
					return nil // the slab's copy is newer and closes there
				}
			}
		}
		d.open--
		if emit {
			out = append(out, tidemark.Result{Window: tidemark.Window{Start: start, End: start + size}, Key: key, Agg: agg, Final: true})
		}
		return nil
	})
	if err != nil {
		e.failDisk(fmt.Errorf("stream: local state %s: close windows: %w", d.dir, err))
	}
	d.closedTo, d.hasClosed = hi, true
	return out
}

// flushDisk writes what the slab holds to the Pebble store in one Pebble
// batch: every pair it holds (all touched since the last flush), the
// deletion of closed pairs, and the marker (deleted when m is nil, so a
// database between markers is never mistaken for a committed state).
func (e *Engine) flushDisk(m *diskMarker) error {
	d := e.disk
	if e.diskErr != nil {
		return e.diskErr
	}
	b := d.db.NewBatch()
	defer b.Close()
	if d.hasClosed {
		if err := b.DeleteRange([]byte{pairPrefix}, pairKey(nil, d.closedTo+1, ""), nil); err != nil {
			return err
		}
	}
	for _, bk := range e.buckets {
		for _, idx := range bk.slots {
			s := e.slots.at(idx)
			d.kbuf = pairKey(d.kbuf[:0], bk.start, e.keys[s.key].key)
			d.vbuf = appendAgg(d.vbuf[:0], s.agg)
			if err := b.Set(d.kbuf, d.vbuf, nil); err != nil {
				return err
			}
		}
	}
	open := d.open + e.memNew
	if m != nil {
		m.Open = open
		if err := b.Set([]byte(markerName), m.marshal(), nil); err != nil {
			return err
		}
	} else if err := b.Delete([]byte(markerName), nil); err != nil {
		return err
	}
	if err := b.Commit(pebble.NoSync); err != nil {
		return fmt.Errorf("stream: write local state %s: %w", d.dir, err)
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
	e.keys, e.freeKeys = e.keys[:0], e.freeKeys[:0]
	e.seqs, e.nextSeq = e.seqs[:0], 0
	e.keyIDs.clear()
	e.index.clear()
	e.keyBytes = 0
	e.changed = e.changed[:0]
	e.disk.flushed = false
}

// diskMarkerFor is the marker of the engine's state after batch id.
func (e *Engine) diskMarkerFor(streamID string, id int64, token uint32, override *State) *diskMarker {
	m := &diskMarker{StreamID: streamID, BatchID: id, Token: token, Window: e.cfg.Window,
		Watermark: e.w, HasWatermark: e.hasW, Sources: e.sourceStates(nil)}
	if override != nil {
		m.Watermark, m.HasWatermark, m.Sources = override.Watermark, override.HasWatermark, override.Sources
	}
	return m
}

// writeDiskSnapshot streams the snapshot of a flushed Pebble engine to w,
// pair by pair from a scan of r (a Pebble snapshot of the store).
func (e *Engine) writeDiskSnapshot(r pebble.Reader, open int64, w io.Writer) (int64, uint32, error) {
	sw := newSnapshotWriter(w, e, open)
	size := e.cfg.Window.Size
	var count int64
	err := scanPairs(r, e.disk.lowerBound(), []byte{pairPrefix + 1}, func(start int64, key tidemark.Key, agg tidemark.Agg) error {
		count++
		return sw.add(tidemark.Result{Window: tidemark.Window{Start: start, End: start + size}, Key: key, Agg: agg})
	})
	if err != nil {
		return sw.n, 0, fmt.Errorf("stream: local state %s: snapshot: %w", e.disk.dir, err)
	}
	if count != open {
		return sw.n, 0, fmt.Errorf("stream: local state %s holds %d open pairs, its count says %d", e.disk.dir, count, open)
	}
	return sw.finish()
}

// openDiskEngine returns an engine on the Pebble state of stream streamID
// holding the state of commit (cs its checkpointed state; both nil on a
// fresh checkpoint). The database is reused when its marker names this
// stream, this batch, this batch's changes and these windows; anything
// else (stale, foreign, another checkpoint's, damaged, half rebuilt) is
// emptied and rebuilt from cs, streaming the snapshot's pairs in.
func openDiskEngine(cfg Config, opts StateOptions, streamID string, commit *commitEntry, cs *committedState) (*Engine, error) {
	e, err := New(cfg, nil)
	if err != nil {
		return nil, err
	}
	dir := opts.Dir
	if dir == "" {
		if dir, err = defaultStateDir(streamID); err != nil {
			return nil, err
		}
	}
	db, err := openPebble(dir)
	if err != nil {
		return nil, err
	}
	e.disk = &diskState{db: db, dir: dir}
	if err := e.resumeDisk(streamID, commit, cs); err != nil {
		return nil, errors.Join(err, e.Close())
	}
	return e, nil
}

func (e *Engine) resumeDisk(streamID string, commit *commitEntry, cs *committedState) error {
	d := e.disk
	m, ok := d.readMarker()
	if ok && commit != nil && commit.State != nil && m.StreamID == streamID && m.BatchID == commit.BatchID &&
		m.Token == commit.State.Token && m.Window == e.cfg.Window {
		e.setDiskHeader(m.Watermark, m.HasWatermark, m.Sources)
		d.open, d.reused = m.Open, true
		return nil
	}
	if err := d.wipe(); err != nil {
		return err
	}
	if cs == nil {
		return nil
	}
	st := cs.snapshot
	if st.Window.Normalized() != e.cfg.Window {
		return fmt.Errorf("window spec %d/%dµs differs from the configured %d/%dµs",
			st.Window.Size, st.Window.Slide, e.cfg.Window.Size, e.cfg.Window.Slide)
	}
	e.setDiskHeader(st.Watermark, st.HasWatermark, st.Sources)
	if err := e.loadDiskPairs(cs); err != nil {
		return err
	}
	var token uint32
	if commit.State != nil {
		token = commit.State.Token
	}
	marker := func(last bool) *diskMarker {
		if !last {
			return nil
		}
		return e.diskMarkerFor(streamID, commit.BatchID, token, nil)
	}
	if err := e.flushDisk(marker(len(cs.changelogs) == 0)); err != nil {
		return err
	}
	for i, ch := range cs.changelogs {
		e.evict()
		if err := e.Apply(ch); err != nil {
			return fmt.Errorf("replay changelog %d of %d: %w", i+1, len(cs.changelogs), err)
		}
		if err := e.flushDisk(marker(i == len(cs.changelogs)-1)); err != nil {
			return err
		}
	}
	return nil
}

// setDiskHeader sets the watermark and sources of a Pebble engine; every
// stored pair is in a window the watermark has not closed.
func (e *Engine) setDiskHeader(w int64, hasW bool, srcs []SourceState) {
	e.setState(w, hasW, srcs) // a marker or checkpoint that decoded lists each source once
	size := e.cfg.Window.Size
	e.disk.hasClosed = e.hasW && e.w >= tidemark.MinTime+size
	if e.disk.hasClosed {
		e.disk.closedTo = e.w - size
	}
}

// loadDiskPairs writes the snapshot's pairs into the (empty) store in
// Pebble batches of a few MiB, decoding one pair at a time.
func (e *Engine) loadDiskPairs(cs *committedState) error {
	d := e.disk
	size := e.cfg.Window.Size
	b := d.db.NewBatch()
	defer func() { b.Close() }()
	put := func(r tidemark.Result) error {
		if r.Window.End-r.Window.Start != size {
			return fmt.Errorf("open window %v does not match the window size %dµs", r.Window, size)
		}
		if e.closes(r.Window.Start) {
			return fmt.Errorf("open window %v is already closed by the watermark %d", r.Window, e.w)
		}
		d.kbuf = pairKey(d.kbuf[:0], r.Window.Start, r.Key)
		d.vbuf = appendAgg(d.vbuf[:0], r.Agg)
		if err := b.Set(d.kbuf, d.vbuf, nil); err != nil {
			return err
		}
		d.open++
		if b.Len() < 4<<20 {
			return nil
		}
		if err := b.Commit(pebble.NoSync); err != nil {
			return err
		}
		b.Close()
		b = d.db.NewBatch()
		return nil
	}
	if cs.pairs != nil {
		dec := decoder{b: cs.pairs}
		for range cs.n {
			if err := put(dec.result()); err != nil {
				return err
			}
		}
	} else {
		for _, r := range cs.snapshot.Open {
			if err := put(r); err != nil {
				return err
			}
		}
	}
	if err := b.Commit(pebble.NoSync); err != nil {
		return fmt.Errorf("stream: write local state %s: %w", d.dir, err)
	}
	return nil
}

// diskStateCopy is State for a Pebble engine: the stored pairs, with the
// slab's newer copies, sorted. It holds the whole state in memory: for
// inspection and tests, never on the batch path.
func (e *Engine) diskStateCopy() *State {
	st := &State{Window: e.cfg.Window, Watermark: e.w, HasWatermark: e.hasW, Sources: e.sourceStates(nil)}
	size := e.cfg.Window.Size
	err := scanPairs(e.disk.db, e.disk.lowerBound(), []byte{pairPrefix + 1}, func(start int64, key tidemark.Key, agg tidemark.Agg) error {
		if pos, found := e.findBucket(start, 0); found {
			if kid, known := e.keyIDs.get(e.keys, key); known {
				if _, held := e.index.get(&e.slots, e.buckets[pos].seq, kid); held {
					return nil
				}
			}
		}
		st.Open = append(st.Open, tidemark.Result{Window: tidemark.Window{Start: start, End: start + size}, Key: key, Agg: agg})
		return nil
	})
	if err != nil {
		e.failDisk(fmt.Errorf("stream: local state %s: %w", e.disk.dir, err))
	}
	for _, b := range e.buckets {
		win := tidemark.Window{Start: b.start, End: b.start + size}
		for _, idx := range b.slots {
			s := e.slots.at(idx)
			st.Open = append(st.Open, tidemark.Result{Window: win, Key: e.keys[s.key].key, Agg: s.agg})
		}
	}
	slices.SortFunc(st.Open, tidemark.CompareResults)
	return st
}

// afterDrain returns the engine to keep after the drain batch committed
// after: a fresh memory engine holding it, or this Pebble engine (its store
// emptied by the drain's flush) with the watermark set back from +infinity.
func (e *Engine) afterDrain(cfg Config, after *State) (*Engine, error) {
	if e.disk == nil {
		return New(cfg, after)
	}
	e.evict()
	e.setDiskHeader(after.Watermark, after.HasWatermark, after.Sources)
	return e, nil
}
