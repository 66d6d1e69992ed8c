package engine

// Opening an engine on a Store at a restart: reuse the store when its marker
// names the last commit, rebuild it from the checkpoint otherwise.

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"

	"tidemark"
)

// Resume is the committed state OpenStore resumes: the last commit's
// FlushTag (zero before any commit) and its state, a snapshot and the
// changelogs after it (nil on a fresh checkpoint).
type Resume struct {
	Tag        FlushTag
	Committed  bool // Tag names a commit with a state
	Snapshot   *Encoded
	Changelogs []*Changes
}

// OpenStore returns an engine on st holding the state r describes. The
// store is reused when its marker names r's stream, batch and changes and
// these windows; anything else (stale, foreign, another checkpoint's,
// damaged, half rebuilt) is cleared and rebuilt from r, streaming the
// snapshot's pairs in. The engine owns st from then on (Close closes it),
// also when OpenStore fails.
func OpenStore(cfg Config, st Store, r Resume) (*Engine, error) {
	e, err := New(cfg, nil)
	if err != nil {
		return nil, errors.Join(err, st.Close())
	}
	e.disk = &stored{st: st}
	if err := e.resume(r); err != nil {
		return nil, errors.Join(err, e.Close())
	}
	return e, nil
}

// Reused reports whether OpenStore found the store holding the resumed
// state, so it did not rebuild it.
func (e *Engine) Reused() bool { return e.disk != nil && e.disk.reused }

func (e *Engine) resume(r Resume) error {
	d := e.disk
	var m Marker
	if raw, ok := d.st.Marker(); ok && m.UnmarshalBinary(raw) == nil && r.Committed &&
		m.StreamID == r.Tag.StreamID && m.BatchID == r.Tag.BatchID && m.Token == r.Tag.Token && m.Window == e.cfg.Window {
		e.setDiskHeader(m.Watermark, m.HasWatermark, m.Sources)
		d.open, d.reused = m.Open, true
		return nil
	}
	if err := d.st.Clear(); err != nil {
		return err
	}
	d.open, d.hasClosed = 0, false
	if r.Snapshot == nil {
		return nil
	}
	st := r.Snapshot.State
	if st.Window.Normalized() != e.cfg.Window {
		return fmt.Errorf("window spec %d/%dµs differs from the configured %d/%dµs",
			st.Window.Size, st.Window.Slide, e.cfg.Window.Size, e.cfg.Window.Slide)
	}
	e.setDiskHeader(st.Watermark, st.HasWatermark, st.Sources)
	if err := e.loadDiskPairs(r.Snapshot); err != nil {
		return err
	}
	marker := func(last bool) *Marker {
		if !last {
			return nil
		}
		return e.diskMarkerFor(r.Tag)
	}
	if err := e.flushDisk(marker(len(r.Changelogs) == 0)); err != nil {
		return err
	}
	for i, ch := range r.Changelogs {
		e.evict()
		if err := e.Apply(ch); err != nil {
			return fmt.Errorf("replay changelog %d of %d: %w", i+1, len(r.Changelogs), err)
		}
		if err := e.flushDisk(marker(i == len(r.Changelogs)-1)); err != nil {
			return err
		}
	}
	return nil
}

// setDiskHeader sets the watermark and sources of a store engine; every
// stored pair is in a window the watermark has not closed.
func (e *Engine) setDiskHeader(w int64, hasW bool, srcs []SourceState) {
	e.setState(w, hasW, srcs) // a marker or checkpoint that decoded lists each source once
	size := e.cfg.Window.Size
	e.disk.hasClosed = e.hasW && e.w >= tidemark.MinTime+size
	if e.disk.hasClosed {
		e.disk.closedTo = e.w - size
	}
}

// loadDiskPairs loads the snapshot's pairs into the (empty) store,
// decoding one pair at a time.
func (e *Engine) loadDiskPairs(snap *Encoded) error {
	d := e.disk
	size := e.cfg.Window.Size
	err := d.st.Load(func(put PairFunc) error {
		return snap.each(func(r tidemark.Result) error {
			if r.Window.End-r.Window.Start != size {
				return fmt.Errorf("open window %v does not match the window size %dµs", r.Window, size)
			}
			if e.closes(r.Window.Start) {
				return fmt.Errorf("open window %v is already closed by the watermark %d", r.Window, e.w)
			}
			if (r.State != nil) != e.aggs() || (r.State != nil && !e.cfg.Aggs.Fits(r.State)) {
				return fmt.Errorf("open window %v key %s: %w", r.Window, r.Key, errAggsDiffer(r.State != nil))
			}
			d.open++
			return put(r.Window.Start, r.Key, r.Agg, r.State)
		})
	})
	return err
}

// afterDrain returns the engine to keep after the drain batch committed
// after: a fresh memory engine holding it, or this store engine (its store
// emptied by the drain's flush) with the watermark set back from +infinity.
func (e *Engine) afterDrain(after *State) (*Engine, error) {
	if e.disk == nil {
		return New(e.cfg, after)
	}
	e.evict()
	e.setDiskHeader(after.Watermark, after.HasWatermark, after.Sources)
	return e, nil
}

// Marker is what a Store says about itself: whose state, after which
// committed batch, and the non-pair part of that state.
type Marker struct {
	StreamID     string
	BatchID      int64
	Token        uint32 // the checkpoint's Token of the batch: CRC-32C of its changes
	Window       tidemark.WindowSpec
	Watermark    int64
	HasWatermark bool
	Sources      []SourceState
	Open         int64
}

const markerMagic = "TMPB\x01"

// MarshalBinary encodes the marker (framed like State).
func (m *Marker) MarshalBinary() []byte {
	b := append([]byte(nil), markerMagic...)
	b = appendString(b, m.StreamID)
	b = binary.AppendVarint(b, m.BatchID)
	b = binary.LittleEndian.AppendUint32(b, m.Token)
	b = binary.AppendVarint(b, m.Window.Size)
	b = binary.AppendVarint(b, m.Window.Slide)
	b = appendBool(b, m.HasWatermark)
	b = binary.AppendVarint(b, m.Watermark)
	b = appendSources(b, m.Sources)
	b = binary.AppendVarint(b, m.Open)
	return binary.LittleEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
}

// UnmarshalBinary decodes a marker, checking its frame.
func (m *Marker) UnmarshalBinary(data []byte) error {
	d, err := openFramed(data, markerMagic, "local state marker")
	if err != nil {
		return err
	}
	var out Marker
	out.StreamID = d.string()
	out.BatchID = d.varint()
	if len(d.b) < 4 {
		d.fail()
	} else {
		out.Token = binary.LittleEndian.Uint32(d.b)
		d.b = d.b[4:]
	}
	var st State
	d.stateHeader(&st)
	out.Window, out.HasWatermark, out.Watermark, out.Sources = st.Window, st.HasWatermark, st.Watermark, st.Sources
	out.Open = d.varint()
	if err := d.finish("local state marker"); err != nil {
		return err
	}
	*m = out
	return nil
}
