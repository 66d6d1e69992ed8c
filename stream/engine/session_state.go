package engine

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"slices"

	"tidemark"
)

// SessionState is a snapshot of a SessionEngine for checkpointing: the
// gap, the watermark, each source's part of it, every open session and the
// closed horizons the window rule still needs. It shares nothing with the
// engine it came from.
type SessionState struct {
	Gap          int64 // µs
	Watermark    int64 // tidemark.MinTime when HasWatermark is false
	HasWatermark bool
	Sources      []SourceState     // sorted by Name
	Open         []tidemark.Result // sorted by window and key; Final is false
	Closed       []ClosedSession   // sorted by key
}

// ClosedSession is the end of a key's latest closed session, kept while a
// row could still touch it (SessionEngine, window rule).
type ClosedSession struct {
	Key tidemark.Key
	End int64
}

// State returns a deep copy of the engine's state, deterministic in order.
func (e *SessionEngine) State() *SessionState {
	st := &SessionState{
		Gap:          e.gap,
		Watermark:    e.w,
		HasWatermark: e.hasW,
		Sources:      e.sourceStates(make([]SourceState, 0, len(e.sources))),
		Open:         make([]tidemark.Result, 0, e.open),
	}
	for _, k := range e.keys {
		for _, s := range k.open {
			st.Open = append(st.Open, tidemark.Result{Window: s.Window, Key: k.key, Agg: s.Agg})
		}
		if k.hasClosed {
			st.Closed = append(st.Closed, ClosedSession{Key: k.key, End: k.closedEnd})
		}
	}
	slices.SortFunc(st.Open, tidemark.CompareResults)
	slices.SortFunc(st.Closed, func(a, b ClosedSession) int { return a.Key.Compare(b.Key) })
	return st
}

// load replaces the engine's (fresh) state with a copy of st, checking
// every invariant the engine keeps: sessions of a key disjoint, none
// closed by the watermark, each at least a gap long and holding a row,
// horizons behind the watermark and before the key's open sessions.
func (e *SessionEngine) load(st *SessionState) error {
	if st.Gap != e.gap {
		return fmt.Errorf("session gap %dµs differs from the configured %dµs", st.Gap, e.gap)
	}
	if dup, ok := e.setState(st.Watermark, st.HasWatermark, st.Sources); !ok {
		return fmt.Errorf("source %q listed twice", dup)
	}
	key := func(kk tidemark.Key) *sessionKey {
		k := e.keys[kk]
		if k == nil {
			k = &sessionKey{key: kk, pos: -1}
			e.keys[kk] = k
			e.keyBytes += int64(len(kk))
		}
		return k
	}
	for _, c := range st.Closed {
		if e.cfg.LateRule != LateWindow {
			return fmt.Errorf("closed session of key %s is kept only under the window rule", c.Key)
		}
		if !e.hasW || c.End > e.w || tidemark.AddSat(c.End, e.gap) <= e.w {
			return fmt.Errorf("closed session of key %s ending at %d is out of the watermark's horizon %d", c.Key, c.End, e.w)
		}
		k := key(c.Key)
		if k.hasClosed {
			return fmt.Errorf("key %s has two closed sessions", c.Key)
		}
		k.closedEnd, k.hasClosed = c.End, true
	}
	open := slices.Clone(st.Open)
	slices.SortFunc(open, func(a, b tidemark.Result) int {
		if c := a.Key.Compare(b.Key); c != 0 {
			return c
		}
		return cmp.Compare(a.Window.Start, b.Window.Start)
	})
	for _, r := range open {
		if r.Window.End-r.Window.Start < e.gap || r.Window.Start > tidemark.MaxTime-e.gap {
			return fmt.Errorf("open session %v is shorter than the gap %dµs", r.Window, e.gap)
		}
		if r.Agg.Count < 1 || r.Agg.Values < 0 || r.Agg.Values > r.Agg.Count {
			return fmt.Errorf("open session %v key %s has counts %d/%d", r.Window, r.Key, r.Agg.Count, r.Agg.Values)
		}
		if e.hasW && r.Window.End <= e.w {
			return fmt.Errorf("open session %v is already closed by the watermark %d", r.Window, e.w)
		}
		k := key(r.Key)
		if k.hasClosed && r.Window.Start < k.closedEnd {
			return fmt.Errorf("open session %v of key %s overlaps its closed session ending at %d", r.Window, r.Key, k.closedEnd)
		}
		if n := len(k.open); n > 0 && r.Window.Start < k.open[n-1].Window.End {
			return fmt.Errorf("open sessions %v and %v of key %s overlap", k.open[n-1].Window, r.Window, r.Key)
		}
		k.open = append(k.open, tidemark.Session{Window: r.Window, Agg: r.Agg})
		e.open++
	}
	for _, k := range e.keys {
		e.due.update(k)
	}
	return nil
}

// sessionStateMagic starts every encoded SessionState; the last byte is
// the format version.
const sessionStateMagic = "TMSS\x01"

// MarshalBinary encodes the state in the framing State uses: a magic and
// version, varint fields, a CRC-32C of everything before it.
func (s *SessionState) MarshalBinary() ([]byte, error) {
	b := make([]byte, 0, 64+len(s.Sources)*32+len(s.Open)*48+len(s.Closed)*16)
	b = append(b, sessionStateMagic...)
	b = binary.AppendVarint(b, s.Gap)
	b = appendBool(b, s.HasWatermark)
	b = binary.AppendVarint(b, s.Watermark)
	b = appendSources(b, s.Sources)
	b = binary.AppendUvarint(b, uint64(len(s.Open)))
	for _, r := range s.Open {
		b = appendResult(b, r, false)
	}
	b = binary.AppendUvarint(b, uint64(len(s.Closed)))
	for _, c := range s.Closed {
		b = appendString(b, string(c.Key))
		b = binary.AppendVarint(b, c.End)
	}
	return binary.LittleEndian.AppendUint32(b, crc32.Checksum(b, castagnoli)), nil
}

// UnmarshalBinary decodes what MarshalBinary wrote, replacing s. A damaged
// state (bad magic, checksum, lengths or trailing bytes) is an error,
// never a panic; NewSessionEngine then checks what the values mean.
func (s *SessionState) UnmarshalBinary(data []byte) error {
	d, err := openFramed(data, sessionStateMagic, "session state")
	if err != nil {
		return err
	}
	var st SessionState
	st.Gap = d.varint()
	st.HasWatermark = d.bool()
	st.Watermark = d.varint()
	st.Sources = d.sources()
	st.Open = d.results()
	n := d.count(2)
	for range n {
		var c ClosedSession
		c.Key = tidemark.Key(d.string())
		c.End = d.varint()
		st.Closed = append(st.Closed, c)
	}
	if err := d.finish("session state"); err != nil {
		return err
	}
	*s = st
	return nil
}

// IsSessionState reports whether data is an encoded SessionState (by its
// magic), rather than a State.
func IsSessionState(data []byte) bool { return bytes.HasPrefix(data, []byte(sessionStateMagic)) }
