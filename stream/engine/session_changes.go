package engine

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"slices"

	"tidemark"
)

// SessionChanges is what one SessionEngine.Process call changed: the
// changelog entry of a batch, as Changes is for Engine. Applied to the
// state before the batch it gives the state after it, so a checkpoint of
// a session stream writes O(keys the batch touched).
//
// Keys lists, for every key the batch added rows to, its whole state after
// the batch (its open sessions and closed horizon): a row can merge
// sessions, so a key is replaced, not patched. What the watermark closed is
// not listed: Apply closes it as Process did.
type SessionChanges struct {
	Watermark    int64 // tidemark.MinTime when HasWatermark is false
	HasWatermark bool
	Sources      []SourceState // every source, sorted by name
	Keys         []SessionKeyState
}

// SessionKeyState is one key's state after a batch.
type SessionKeyState struct {
	Key       tidemark.Key
	Open      []tidemark.Session // disjoint, ascending; Late is 0
	ClosedEnd int64              // meaningful when HasClosed
	HasClosed bool
}

// Changes returns what the last Process call changed (none after Drain).
func (e *SessionEngine) Changes() *SessionChanges {
	c := &SessionChanges{Watermark: e.w, HasWatermark: e.hasW, Sources: e.sourceStates(nil)}
	for _, k := range e.changed {
		c.Keys = append(c.Keys, SessionKeyState{Key: k.key, Open: slices.Clone(k.open), ClosedEnd: k.closedEnd, HasClosed: k.hasClosed})
	}
	return c
}

// Apply replays a changelog entry onto the engine, which must hold the
// state the entry was taken after: sources and watermark are replaced,
// what the watermark closes is freed without output, and every listed key
// takes its state. A watermark going back, or a key state breaking the
// engine's invariants, is an error (a damaged or misplaced entry).
func (e *SessionEngine) Apply(c *SessionChanges) error {
	if c.HasWatermark && e.hasW && c.Watermark < e.w {
		return fmt.Errorf("stream: session changelog watermark %d is behind the state's %d", c.Watermark, e.w)
	}
	if !c.HasWatermark && e.hasW {
		return errors.New("stream: session changelog without a watermark applied to a state with one")
	}
	if dup, ok := e.setState(c.Watermark, c.HasWatermark, c.Sources); !ok {
		return fmt.Errorf("stream: session changelog: source %q listed twice", dup)
	}
	if c.HasWatermark {
		e.closeUpTo(e.w, nil)
	}
	for _, ks := range c.Keys {
		if err := e.checkKeyState(ks); err != nil {
			return fmt.Errorf("stream: session changelog: %w", err)
		}
		k := e.keys[ks.Key]
		if k == nil {
			k = &sessionKey{key: ks.Key, pos: -1}
			e.keys[ks.Key] = k
			e.keyBytes += int64(len(ks.Key))
		}
		e.open += len(ks.Open) - len(k.open)
		k.open = slices.Clone(ks.Open)
		k.closedEnd, k.hasClosed = ks.ClosedEnd, ks.HasClosed
		if len(k.open) == 0 && !k.hasClosed {
			if k.pos >= 0 {
				e.due.remove(k)
			}
			delete(e.keys, k.key)
			e.keyBytes -= int64(len(k.key))
			continue
		}
		e.due.update(k)
	}
	e.resetChanged()
	return nil
}

// checkKeyState checks one key's state against the engine's invariants at
// its watermark, as load does for a snapshot.
func (e *SessionEngine) checkKeyState(ks SessionKeyState) error {
	if ks.HasClosed && (e.cfg.LateRule != LateWindow || !e.hasW || ks.ClosedEnd > e.w || tidemark.AddSat(ks.ClosedEnd, e.gap) <= e.w) {
		return fmt.Errorf("key %s: closed session ending at %d is out of the watermark's horizon %d", ks.Key, ks.ClosedEnd, e.w)
	}
	for i, s := range ks.Open {
		switch {
		case s.Window.End-s.Window.Start < e.gap || s.Window.Start > tidemark.MaxTime-e.gap:
			return fmt.Errorf("key %s: open session %v is shorter than the gap %dµs", ks.Key, s.Window, e.gap)
		case s.Agg.Count < 1 || s.Agg.Values < 0 || s.Agg.Values > s.Agg.Count || s.Late != 0:
			return fmt.Errorf("key %s: open session %v has counts %d/%d/%d", ks.Key, s.Window, s.Agg.Count, s.Agg.Values, s.Late)
		case e.hasW && s.Window.End <= e.w:
			return fmt.Errorf("key %s: open session %v is closed by the watermark %d", ks.Key, s.Window, e.w)
		case ks.HasClosed && s.Window.Start < ks.ClosedEnd:
			return fmt.Errorf("key %s: open session %v overlaps its closed session ending at %d", ks.Key, s.Window, ks.ClosedEnd)
		case i > 0 && s.Window.Start < ks.Open[i-1].Window.End:
			return fmt.Errorf("key %s: open sessions %v and %v overlap", ks.Key, ks.Open[i-1].Window, s.Window)
		}
	}
	return nil
}

// sessionChangesMagic starts every encoded SessionChanges; the last byte is
// the version.
const sessionChangesMagic = "TMSC\x01"

// MarshalBinary encodes the changes in the framing of State.
func (c *SessionChanges) MarshalBinary() ([]byte, error) {
	b := make([]byte, 0, 32+len(c.Sources)*32+len(c.Keys)*64)
	b = append(b, sessionChangesMagic...)
	b = appendBool(b, c.HasWatermark)
	b = binary.AppendVarint(b, c.Watermark)
	b = appendSources(b, c.Sources)
	b = binary.AppendUvarint(b, uint64(len(c.Keys)))
	for _, k := range c.Keys {
		b = appendString(b, string(k.Key))
		b = appendBool(b, k.HasClosed)
		b = binary.AppendVarint(b, k.ClosedEnd)
		b = binary.AppendUvarint(b, uint64(len(k.Open)))
		for _, s := range k.Open {
			b = appendResult(b, tidemark.Result{Window: s.Window, Agg: s.Agg}, false)
		}
	}
	return binary.LittleEndian.AppendUint32(b, crc32.Checksum(b, castagnoli)), nil
}

// UnmarshalBinary decodes what MarshalBinary wrote, replacing c. A damaged
// entry is an error, never a panic.
func (c *SessionChanges) UnmarshalBinary(data []byte) error {
	d, err := openFramed(data, sessionChangesMagic, "session changelog")
	if err != nil {
		return err
	}
	var out SessionChanges
	out.HasWatermark = d.bool()
	out.Watermark = d.varint()
	out.Sources = d.sources()
	n := d.count(4)
	for range n {
		var k SessionKeyState
		k.Key = tidemark.Key(d.string())
		k.HasClosed = d.bool()
		k.ClosedEnd = d.varint()
		for _, r := range d.results() {
			if len(r.Key) != 0 {
				d.fail() // sessions of a key carry no key of their own
			}
			k.Open = append(k.Open, tidemark.Session{Window: r.Window, Agg: r.Agg})
		}
		out.Keys = append(out.Keys, k)
	}
	if err := d.finish("session changelog"); err != nil {
		return err
	}
	*c = out
	return nil
}
