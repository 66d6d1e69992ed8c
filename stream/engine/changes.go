package engine

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"

	"tidemark"
)

// Changes is what one Process call changed in an engine's state: the
// changelog entry of a batch. Applied to the state before the batch (Apply),
// it gives the state after it, so a checkpoint writes O(what the batch
// changed) instead of the whole state.
//
// Upserts hold the full aggregate of every (window, key) the batch created
// or updated that is still open after it; applying one twice is harmless.
// Closed pairs are not listed: they are exactly the windows ending at or
// before Watermark, and Apply closes them as Process did.
type Changes struct {
	Watermark    int64 // tidemark.MinTime when HasWatermark is false
	HasWatermark bool
	Sources      []SourceState     // every source, sorted by name (a handful; cheaper than diffing)
	Upserts      []tidemark.Result // in the order the batch first changed them; Final is false
	// Aggs: the engine has --agg aggregates; every upsert carries its State.
	Aggs bool
}

// Changes returns what the last Process call changed. It lists only the
// pairs the batch touched, never the whole state. After Drain it lists none
// (every window is closed).
func (e *Engine) Changes() *Changes {
	c := &Changes{Watermark: e.w, HasWatermark: e.hasW, Sources: e.sourceStates(nil), Aggs: e.aggs()}
	if len(e.changed) > 0 {
		c.Upserts = make([]tidemark.Result, 0, len(e.changed))
	}
	size := e.cfg.Window.Size
	for _, ch := range e.changed {
		if e.closes(ch.start) {
			continue // closed by the watermark, freed
		}
		s := e.slots.at(ch.idx)
		c.Upserts = append(c.Upserts, tidemark.Result{
			Window: tidemark.Window{Start: ch.start, End: ch.start + size},
			Key:    e.keys[s.key].key,
			Agg:    s.agg,
			State:  e.stateOf(ch.idx).Clone(),
		})
	}
	if len(c.Upserts) == 0 {
		c.Upserts = nil // every changed pair closed
	}
	return c
}

// marshalChanges is Changes().MarshalBinary() encoded straight from the
// slab, without the intermediate results (a per-user batch changes ~60k
// pairs): the checkpoint's changelog.
func (e *Engine) marshalChanges() []byte {
	b := make([]byte, 0, 64+len(e.changed)*48)
	states := e.aggs()
	if states {
		b = append(b, withStates(changesMagic)...)
	} else {
		b = append(b, changesMagic...)
	}
	b = appendBool(b, e.hasW)
	b = binary.AppendVarint(b, e.w)
	b = appendSources(b, e.sourceStates(nil))
	size := e.cfg.Window.Size
	n := 0
	for _, ch := range e.changed {
		if !e.closes(ch.start) {
			n++
		}
	}
	b = binary.AppendUvarint(b, uint64(n))
	for i, ch := range e.changed {
		if i+touchAhead < len(e.changed) {
			e.touchSlot(e.changed[i+touchAhead].idx)
		}
		if e.closes(ch.start) {
			continue
		}
		s := e.slots.at(ch.idx)
		b = binary.AppendVarint(b, ch.start)
		b = binary.AppendVarint(b, size)
		b = appendString(b, string(e.keys[s.key].key))
		b = appendAgg(b, s.agg)
		if states {
			b = appendState(b, e.stateOf(ch.idx))
		}
	}
	return binary.LittleEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
}

// Apply replays a changelog entry onto the engine: the sources and the
// watermark are replaced, every window the watermark closes is freed
// (without output) and the upserts are written. The engine must hold the
// state the entry was taken after; a watermark going back, an upsert of the
// wrong window size or of a window the entry's own watermark closes is an
// error (a damaged or misplaced entry).
func (e *Engine) Apply(c *Changes) error {
	if c.HasWatermark && e.hasW && c.Watermark < e.w {
		return fmt.Errorf("stream: changelog watermark %d is behind the state's %d", c.Watermark, e.w)
	}
	if !c.HasWatermark && e.hasW {
		return errors.New("stream: changelog without a watermark applied to a state with one")
	}
	if c.Aggs != e.aggs() && len(c.Upserts) > 0 {
		return fmt.Errorf("stream: changelog: %w", errAggsDiffer(c.Aggs))
	}
	if dup, ok := e.setState(c.Watermark, c.HasWatermark, c.Sources); !ok {
		return fmt.Errorf("stream: changelog lists source %q twice", dup)
	}
	if c.HasWatermark {
		e.closeWindows(e.w, nil, false)
	}
	size := e.cfg.Window.Size
	for _, r := range c.Upserts {
		if r.Window.End-r.Window.Start != size {
			return fmt.Errorf("stream: changelog window %v does not match the window size %dµs", r.Window, size)
		}
		if e.closes(r.Window.Start) {
			return fmt.Errorf("stream: changelog window %v is closed by its own watermark %d", r.Window, e.w)
		}
		pos, found := e.findBucket(r.Window.Start, 0)
		kid, known := e.keyIDs.get(e.keys, r.Key)
		idx := int32(-1)
		if found && known {
			if i, ok := e.index.get(&e.slots, e.buckets[pos].seq, kid); ok {
				idx = i
			}
		}
		if idx < 0 {
			if !known {
				kid = e.internKey(r.Key)
			}
			idx = e.newSlot(pos, r.Window.Start, kid)
			e.fetch(idx, r.Window.Start, r.Key) // only to count it: the upsert replaces it
		}
		e.slots.at(idx).agg = r.Agg
		if err := e.putState(idx, r.State.Clone()); err != nil {
			return fmt.Errorf("stream: changelog window %v key %s: %w", r.Window, r.Key, err)
		}
	}
	e.resetChanged()
	return e.diskErr
}

// changesMagic starts every encoded Changes; the last byte is the version.
const changesMagic = "TMCL\x01"

// MarshalBinary encodes the changes as State does: magic and version,
// varint fields, a CRC-32C of everything before it.
func (c *Changes) MarshalBinary() ([]byte, error) {
	b := make([]byte, 0, 32+len(c.Sources)*32+len(c.Upserts)*48)
	if c.Aggs {
		b = append(b, withStates(changesMagic)...)
	} else {
		b = append(b, changesMagic...)
	}
	b = appendBool(b, c.HasWatermark)
	b = binary.AppendVarint(b, c.Watermark)
	b = appendSources(b, c.Sources)
	b = binary.AppendUvarint(b, uint64(len(c.Upserts)))
	for _, r := range c.Upserts {
		b = appendResult(b, r, c.Aggs)
	}
	return binary.LittleEndian.AppendUint32(b, crc32.Checksum(b, castagnoli)), nil
}

// UnmarshalBinary decodes what MarshalBinary wrote, replacing c. A damaged
// entry is an error, never a panic.
func (c *Changes) UnmarshalBinary(data []byte) error {
	d, err := openFramed(data, changesMagic, "changelog")
	if err != nil {
		return err
	}
	var out Changes
	out.Aggs = d.states
	out.HasWatermark = d.bool()
	out.Watermark = d.varint()
	out.Sources = d.sources()
	out.Upserts = d.results()
	if err := d.finish("changelog"); err != nil {
		return err
	}
	*c = out
	return nil
}
