package engine

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"
	"slices"

	"tidemark"
)

// State is a snapshot of an Engine for checkpointing: the watermark, each
// source's max event time and last activity, and every open (window, key)
// aggregate. It shares nothing with the engine it came from.
type State struct {
	Window       tidemark.WindowSpec // with Slide made explicit
	Watermark    int64               // tidemark.MinTime when HasWatermark is false
	HasWatermark bool
	Sources      []SourceState     // sorted by Name
	Open         []tidemark.Result // sorted by window and key; Final is false
	// Aggs: the engine has --agg aggregates, and every open pair its
	// State (the encoding then carries them).
	Aggs bool
}

// SourceState is one source's part of the watermark.
type SourceState struct {
	Name         string
	MaxEventTime int64 // µs; meaningful when HasEventTime
	HasEventTime bool  // false while the source has sent only quarantined lines
	LastSeen     int64 // unix ns of the last batch holding a line of the source
}

// State returns a deep copy of the engine's state, deterministic in order.
func (e *Engine) State() *State {
	if e.disk != nil {
		return e.diskStateCopy()
	}
	st := &State{
		Window:       e.cfg.Window,
		Watermark:    e.w,
		HasWatermark: e.hasW,
		Sources:      make([]SourceState, 0, len(e.sources)),
		Open:         make([]tidemark.Result, 0, e.index.Len()),
		Aggs:         e.aggs(),
	}
	st.Sources = e.sourceStates(st.Sources)
	for _, b := range e.buckets {
		from := len(st.Open)
		win := tidemark.Window{Start: b.start, End: b.start + e.cfg.Window.Size}
		for _, idx := range b.slots {
			s := e.slots.at(idx)
			st.Open = append(st.Open, tidemark.Result{Window: win, Key: e.keys[s.key].key, Agg: s.agg, State: e.stateOf(idx).Clone()})
		}
		slices.SortFunc(st.Open[from:], tidemark.CompareResults)
	}
	return st
}

// load replaces the engine's (fresh) state with a copy of st.
func (e *Engine) load(st *State) error {
	spec := st.Window.Normalized()
	if spec != e.cfg.Window {
		return fmt.Errorf("window spec %d/%dµs differs from the configured %d/%dµs",
			spec.Size, spec.Slide, e.cfg.Window.Size, e.cfg.Window.Slide)
	}
	if dup, ok := e.setState(st.Watermark, st.HasWatermark, st.Sources); !ok {
		return fmt.Errorf("source %q listed twice", dup)
	}
	if st.Aggs != e.aggs() && len(st.Open) > 0 {
		return errAggsDiffer(st.Aggs)
	}
	for _, r := range st.Open {
		if r.Window.End-r.Window.Start != e.cfg.Window.Size {
			return fmt.Errorf("open window %v does not match the window size %dµs", r.Window, e.cfg.Window.Size)
		}
		if e.closes(r.Window.Start) {
			return fmt.Errorf("open window %v is already closed by the watermark %d", r.Window, e.w)
		}
		pos, found := e.findBucket(r.Window.Start, 0)
		kid := e.internKey(r.Key)
		if found {
			if _, dup := e.index.get(&e.slots, e.buckets[pos].seq, kid); dup {
				return fmt.Errorf("open window %v key %s listed twice", r.Window, r.Key)
			}
		}
		idx := e.newSlot(pos, r.Window.Start, kid)
		e.slots.at(idx).agg = r.Agg
		if err := e.putState(idx, r.State.Clone()); err != nil {
			return fmt.Errorf("open window %v key %s: %w", r.Window, r.Key, err)
		}
	}
	return nil
}

// stateMagic starts every encoded State; the last byte is the format version.
const stateMagic = "TMST\x02"

// MarshalBinary encodes the state: a magic and version, varint fields, and
// a CRC-32C of everything before it.
func (s *State) MarshalBinary() ([]byte, error) {
	b := make([]byte, 0, 64+len(s.Sources)*32+len(s.Open)*48)
	b = appendSnapshotHeader(b, s.Window, s.HasWatermark, s.Watermark, s.Sources, int64(len(s.Open)), s.Aggs)
	for _, r := range s.Open {
		b = appendResult(b, r, s.Aggs)
	}
	return binary.LittleEndian.AppendUint32(b, crc32.Checksum(b, castagnoli)), nil
}

// MarshalSnapshot encodes the engine's state in State's encoding, straight
// from the engine: no copy of the state. Pairs come by window and within a
// window by key, each window's list sorted in place (mostly sorted already
// from the last snapshot), so the bytes are MarshalBinary's of State and
// the same as the Pebble store's scan writes: the checkpoint does not
// depend on the store. The checkpoint streams it instead (writeSnapshot).
func (e *Engine) MarshalSnapshot() []byte {
	if e.disk != nil {
		data, err := e.State().MarshalBinary()
		if err != nil {
			panic(err) // MarshalBinary never fails
		}
		return data
	}
	var buf bytes.Buffer
	if _, _, err := e.writeSnapshot(&buf); err != nil {
		panic(err) // a bytes.Buffer never fails
	}
	return buf.Bytes()
}

// writeSnapshot streams a memory engine's snapshot to w through a 64 KiB
// buffer, returning its size and the CRC-32C of all but its last four bytes
// (the frame's CRC).
func (e *Engine) writeSnapshot(w io.Writer) (int64, uint32, error) {
	sw := newSnapshotWriter(w, e, int64(e.index.Len()))
	size := e.cfg.Window.Size
	var order []keyOrder
	for i := range e.buckets {
		bk := &e.buckets[i]
		win := tidemark.Window{Start: bk.start, End: bk.start + size}
		order = e.sortSlots(bk, order)
		for _, idx := range bk.slots {
			s := e.slots.at(idx)
			if err := sw.add(tidemark.Result{Window: win, Key: e.keys[s.key].key, Agg: s.agg, State: e.stateOf(idx)}); err != nil {
				return sw.n, 0, err
			}
		}
	}
	return sw.finish()
}

// snapshotSize is the length of the memory engine's snapshot encoding,
// added up from the slab without encoding it.
func (e *Engine) snapshotSize() int64 {
	n := int64(len(appendSnapshotHeader(nil, e.cfg.Window, e.hasW, e.w, e.sourceStates(nil), int64(e.index.Len()), false))) + 4
	sizeLen := int64(varintLen(e.cfg.Window.Size))
	for _, bk := range e.buckets {
		startLen := int64(varintLen(bk.start))
		for _, idx := range bk.slots {
			s := e.slots.at(idx)
			k := len(e.keys[s.key].key)
			n += startLen + sizeLen + int64(uvarintLen(uint64(k))+k+varintLen(s.agg.Count)+varintLen(s.agg.Values)) + 32
		}
	}
	return n
}

// snapshotWriter encodes a snapshot to a writer in 64 KiB pieces, keeping
// the frame's running CRC.
type snapshotWriter struct {
	w      io.Writer
	buf    []byte
	n      int64
	sum    uint32
	states bool
}

func newSnapshotWriter(w io.Writer, e *Engine, open int64) *snapshotWriter {
	sw := &snapshotWriter{w: w, buf: make([]byte, 0, 64<<10), states: e.aggs()}
	sw.buf = appendSnapshotHeader(sw.buf, e.cfg.Window, e.hasW, e.w, e.sourceStates(nil), open, sw.states)
	return sw
}

func (sw *snapshotWriter) add(r tidemark.Result) error {
	sw.buf = appendResult(sw.buf, r, sw.states)
	if len(sw.buf) < 60<<10 {
		return nil
	}
	return sw.flush()
}

func (sw *snapshotWriter) flush() error {
	sw.sum = crc32.Update(sw.sum, castagnoli, sw.buf)
	k, err := sw.w.Write(sw.buf)
	sw.n += int64(k)
	sw.buf = sw.buf[:0]
	return err
}

// finish writes the rest and the frame's CRC; it returns the bytes written
// and that CRC.
func (sw *snapshotWriter) finish() (int64, uint32, error) {
	if err := sw.flush(); err != nil {
		return sw.n, 0, err
	}
	k, err := sw.w.Write(binary.LittleEndian.AppendUint32(nil, sw.sum))
	return sw.n + int64(k), sw.sum, err
}
