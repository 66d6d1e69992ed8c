package engine

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math"
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
	}
	st.Sources = e.sourceStates(st.Sources)
	for _, b := range e.buckets {
		from := len(st.Open)
		win := tidemark.Window{Start: b.start, End: b.start + e.cfg.Window.Size}
		for _, idx := range b.slots {
			s := e.slots.at(idx)
			st.Open = append(st.Open, tidemark.Result{Window: win, Key: e.keys[s.key].key, Agg: s.agg})
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
	}
	return nil
}

// stateMagic starts every encoded State; the last byte is the format version.
const stateMagic = "TMST\x02"

var errStateTruncated = errors.New("stream: state truncated or malformed")

// MarshalBinary encodes the state: a magic and version, varint fields, and
// a CRC-32C of everything before it.
func (s *State) MarshalBinary() ([]byte, error) {
	b := make([]byte, 0, 64+len(s.Sources)*32+len(s.Open)*48)
	b = appendSnapshotHeader(b, s.Window, s.HasWatermark, s.Watermark, s.Sources, int64(len(s.Open)))
	for _, r := range s.Open {
		b = appendResult(b, r)
	}
	return binary.LittleEndian.AppendUint32(b, crc32.Checksum(b, castagnoli)), nil
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

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
			if err := sw.add(tidemark.Result{Window: win, Key: e.keys[s.key].key, Agg: s.agg}); err != nil {
				return sw.n, 0, err
			}
		}
	}
	return sw.finish()
}

// snapshotSize is the length of the memory engine's snapshot encoding,
// added up from the slab without encoding it.
func (e *Engine) snapshotSize() int64 {
	n := int64(len(appendSnapshotHeader(nil, e.cfg.Window, e.hasW, e.w, e.sourceStates(nil), int64(e.index.Len())))) + 4
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

func varintLen(v int64) int {
	u := uint64(v) << 1
	if v < 0 {
		u = ^u
	}
	return uvarintLen(u)
}

// snapshotWriter encodes a snapshot to a writer in 64 KiB pieces, keeping
// the frame's running CRC.
type snapshotWriter struct {
	w   io.Writer
	buf []byte
	n   int64
	sum uint32
}

func newSnapshotWriter(w io.Writer, e *Engine, open int64) *snapshotWriter {
	sw := &snapshotWriter{w: w, buf: make([]byte, 0, 64<<10)}
	sw.buf = appendSnapshotHeader(sw.buf, e.cfg.Window, e.hasW, e.w, e.sourceStates(nil), open)
	return sw
}

func (sw *snapshotWriter) add(r tidemark.Result) error {
	sw.buf = appendResult(sw.buf, r)
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

// keyOrder is a slot with the first eight bytes of its key's ordered
// encoding (appendOrderedKey), which decide most comparisons without
// touching the key.
type keyOrder struct {
	prefix uint64
	idx    int32
}

// sortSlots sorts a window's slot list by key, in place, through buf. The
// list's first b.sorted slots are in key order from the last sort (a list
// only grows at its end), so only the slots added since are sorted, then
// merged with them; a window untouched since then costs nothing.
func (e *Engine) sortSlots(b *bucket, buf []keyOrder) []keyOrder {
	slots := b.slots
	head := int(b.sorted)
	if head >= len(slots) {
		return buf
	}
	buf = slices.Grow(buf[:0], len(slots))
	for _, idx := range slots {
		buf = append(buf, keyOrder{prefix: e.keys[e.slots.at(idx).key].prefix, idx: idx})
	}
	less := func(a, b keyOrder) int {
		if c := cmp.Compare(a.prefix, b.prefix); c != 0 {
			return c
		}
		return e.keys[e.slots.at(a.idx).key].key.Compare(e.keys[e.slots.at(b.idx).key].key)
	}
	tail := buf[head:]
	slices.SortFunc(tail, less)
	if head == 0 || less(buf[head-1], tail[0]) < 0 {
		for i, o := range buf {
			slots[i] = o.idx
		}
	} else {
		// Merge the sorted head with the sorted tail into slots; keys are
		// distinct within a window, so the order is total.
		i, j, k := 0, head, 0
		for i < head && j < len(buf) {
			if less(buf[i], buf[j]) < 0 {
				slots[k] = buf[i].idx
				i++
			} else {
				slots[k] = buf[j].idx
				j++
			}
			k++
		}
		for ; i < head; i, k = i+1, k+1 {
			slots[k] = buf[i].idx
		}
		for ; j < len(buf); j, k = j+1, k+1 {
			slots[k] = buf[j].idx
		}
	}
	b.sorted = int32(len(slots))
	return buf
}

// orderedPrefix returns the first eight bytes of appendOrderedKey(key) as a
// big-endian number (zero-padded), so prefixes order as keys do wherever
// they differ. Single-byte-length values and nulls are encoded in place;
// anything else goes through AppendOrderedKey.
func orderedPrefix(key tidemark.Key, dst []byte) uint64 {
	s := string(key)
	for len(dst) < 8 && len(s) > 0 {
		switch {
		case s[0] == 0:
			dst = append(dst, 0)
			s = s[1:]
		case s[0] == 1 && len(s) >= 2 && s[1] < 0x80 && int(s[1]) <= len(s)-2:
			dst = append(dst, 1)
			for _, c := range []byte(s[2 : 2+int(s[1])]) {
				if c == 0 {
					dst = append(dst, 0, 0xff)
				} else {
					dst = append(dst, c)
				}
				if len(dst) >= 8 {
					break
				}
			}
			dst = append(dst, 0, 1)
			s = s[2+int(s[1]):]
		default:
			dst = AppendOrderedKey(dst[:0], key)
			s = ""
		}
	}
	var b [8]byte
	copy(b[:], dst)
	return binary.BigEndian.Uint64(b[:])
}

// appendSnapshotHeader appends what precedes the open pairs in a snapshot.
func appendSnapshotHeader(b []byte, spec tidemark.WindowSpec, hasW bool, w int64, srcs []SourceState, open int64) []byte {
	b = append(b, stateMagic...)
	b = binary.AppendVarint(b, spec.Size)
	b = binary.AppendVarint(b, spec.Slide)
	b = appendBool(b, hasW)
	b = binary.AppendVarint(b, w)
	b = appendSources(b, srcs)
	return binary.AppendUvarint(b, uint64(open))
}

// UnmarshalBinary decodes what MarshalBinary wrote, replacing s. It checks
// the magic, the checksum and every length, so a damaged checkpoint is an
// error and never a panic.
func (s *State) UnmarshalBinary(data []byte) error {
	d, err := openFramed(data, stateMagic, "state")
	if err != nil {
		return err
	}
	var st State
	d.stateHeader(&st)
	st.Open = d.results()
	if err := d.finish("state"); err != nil {
		return err
	}
	*s = st
	return nil
}

func appendSources(b []byte, srcs []SourceState) []byte {
	b = binary.AppendUvarint(b, uint64(len(srcs)))
	for _, src := range srcs {
		b = appendString(b, src.Name)
		b = appendBool(b, src.HasEventTime)
		b = binary.AppendVarint(b, src.MaxEventTime)
		b = binary.AppendVarint(b, src.LastSeen)
	}
	return b
}

// appendResult encodes one open (window, key) aggregate: varints for the
// window and counts, the key's bytes, the four floats as raw bits (NaN and
// the compensation survive exactly).
func appendResult(b []byte, r tidemark.Result) []byte {
	b = binary.AppendVarint(b, r.Window.Start)
	b = binary.AppendVarint(b, r.Window.End-r.Window.Start)
	b = appendString(b, string(r.Key))
	return appendAgg(b, r.Agg)
}

// appendAgg encodes an aggregate: varint counts, the four floats as raw
// bits. It is a result's tail and the Pebble store's value.
func appendAgg(b []byte, a tidemark.Agg) []byte {
	b = binary.AppendVarint(b, a.Count)
	b = binary.AppendVarint(b, a.Values)
	b = binary.LittleEndian.AppendUint64(b, math.Float64bits(a.Sum))
	b = binary.LittleEndian.AppendUint64(b, math.Float64bits(a.Comp))
	b = binary.LittleEndian.AppendUint64(b, math.Float64bits(a.Min))
	return binary.LittleEndian.AppendUint64(b, math.Float64bits(a.Max))
}

// minResultBytes is the smallest encoding appendResult writes.
const minResultBytes = 29

// openFramed checks the frame a snapshot and a changelog share (magic,
// body, CRC-32C) and returns a decoder over the body; what names the kind
// in errors.
func openFramed(data []byte, magic, what string) (decoder, error) {
	if len(data) < len(magic)+4 || string(data[:len(magic)]) != magic {
		return decoder{}, fmt.Errorf("stream: %s: bad magic or version", what)
	}
	body, sum := data[:len(data)-4], binary.LittleEndian.Uint32(data[len(data)-4:])
	if crc32.Checksum(body, castagnoli) != sum {
		return decoder{}, fmt.Errorf("stream: %s: checksum mismatch", what)
	}
	return decoder{b: body[len(magic):]}, nil
}

// finish reports the first decoding error, or trailing bytes after a
// complete entry.
func (d *decoder) finish(what string) error {
	if d.err != nil {
		return d.err
	}
	if len(d.b) != 0 {
		return fmt.Errorf("stream: %s: %d trailing bytes", what, len(d.b))
	}
	return nil
}

// stateHeader decodes what appendSnapshotHeader wrote before the count:
// the window spec, the watermark and the sources.
func (d *decoder) stateHeader(st *State) {
	st.Window.Size = d.varint()
	st.Window.Slide = d.varint()
	st.HasWatermark = d.bool()
	st.Watermark = d.varint()
	st.Sources = d.sources()
}

// results decodes a counted list of results.
func (d *decoder) results() []tidemark.Result {
	n := d.count(minResultBytes)
	out := make([]tidemark.Result, 0, n)
	for range n {
		out = append(out, d.result())
	}
	return out
}

func (d *decoder) sources() []SourceState {
	n := d.count(4)
	srcs := make([]SourceState, 0, n)
	for range n {
		var src SourceState
		src.Name = d.string()
		src.HasEventTime = d.bool()
		src.MaxEventTime = d.varint()
		src.LastSeen = d.varint()
		srcs = append(srcs, src)
	}
	return srcs
}

// skipResult checks one encoded result without decoding it.
func (d *decoder) skipResult() {
	d.varint()
	d.varint()
	if n := d.uvarint(); n > uint64(len(d.b)) {
		d.fail()
	} else {
		d.b = d.b[n:]
	}
	d.varint()
	d.varint()
	if len(d.b) < 32 {
		d.fail()
		return
	}
	d.b = d.b[32:]
}

func (d *decoder) result() tidemark.Result {
	var r tidemark.Result
	r.Window.Start = d.varint()
	r.Window.End = r.Window.Start + d.varint()
	r.Key = tidemark.Key(d.string())
	r.Agg = d.agg()
	return r
}

// agg decodes what appendAgg wrote.
func (d *decoder) agg() tidemark.Agg {
	var a tidemark.Agg
	a.Count = d.varint()
	a.Values = d.varint()
	a.Sum = math.Float64frombits(d.uint64())
	a.Comp = math.Float64frombits(d.uint64())
	a.Min = math.Float64frombits(d.uint64())
	a.Max = math.Float64frombits(d.uint64())
	return a
}

func appendBool(b []byte, v bool) []byte {
	if v {
		return append(b, 1)
	}
	return append(b, 0)
}

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// decoder reads fields, remembering the first error; after one every read
// returns zero.
type decoder struct {
	b   []byte
	err error
}

func (d *decoder) fail() {
	if d.err == nil {
		d.err = errStateTruncated
	}
	d.b = nil
}

func (d *decoder) varint() int64 {
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.fail()
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) uvarint() uint64 {
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.fail()
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) uint64() uint64 {
	if len(d.b) < 8 {
		d.fail()
		return 0
	}
	v := binary.LittleEndian.Uint64(d.b)
	d.b = d.b[8:]
	return v
}

func (d *decoder) bool() bool {
	if len(d.b) < 1 || d.b[0] > 1 {
		d.fail()
		return false
	}
	v := d.b[0] == 1
	d.b = d.b[1:]
	return v
}

func (d *decoder) string() string {
	n := d.uvarint()
	if n > uint64(len(d.b)) {
		d.fail()
		return ""
	}
	s := string(d.b[:n])
	d.b = d.b[n:]
	return s
}

// count reads an element count, rejecting one that the remaining bytes
// cannot hold at minSize bytes per element, so a corrupt count cannot make
// the decoder allocate without bound.
func (d *decoder) count(minSize int) int {
	n := d.uvarint()
	if n > uint64(len(d.b)/minSize) {
		d.fail()
		return 0
	}
	return int(n)
}

// Encoded is a checked encoded State whose open pairs stay encoded until
// they are needed: a restart that reuses its Store never decodes them and
// one that rebuilds it streams them in (OpenStore).
type Encoded struct {
	*State // Open is empty while pairs holds them
	pairs  []byte
	n      int
}

// DecodeState checks an encoded State whole and returns it with its open
// pairs still encoded.
func DecodeState(data []byte) (*Encoded, error) {
	d, err := openFramed(data, stateMagic, "state")
	if err != nil {
		return nil, err
	}
	st := new(State)
	d.stateHeader(st)
	n := d.count(minResultBytes)
	pairs := d.b
	for range n {
		d.skipResult()
	}
	if err := d.finish("state"); err != nil {
		return nil, err
	}
	return &Encoded{State: st, pairs: pairs, n: n}, nil
}

// Full returns the state with its open pairs decoded.
func (s *Encoded) Full() *State {
	if s.pairs != nil {
		d := decoder{b: s.pairs}
		s.State.Open = make([]tidemark.Result, 0, s.n)
		for range s.n {
			s.State.Open = append(s.State.Open, d.result())
		}
		s.pairs, s.n = nil, 0
	}
	return s.State
}

// each calls fn for every open pair, decoding one at a time.
func (s *Encoded) each(fn func(tidemark.Result) error) error {
	if s.pairs != nil {
		dec := decoder{b: s.pairs}
		for range s.n {
			if err := fn(dec.result()); err != nil {
				return err
			}
		}
		return nil
	}
	for _, r := range s.State.Open {
		if err := fn(r); err != nil {
			return err
		}
	}
	return nil
}

// AppendAgg appends the encoding of an aggregate: a result's tail in a
// state file, and a Store's value for a pair.
func AppendAgg(b []byte, a tidemark.Agg) []byte { return appendAgg(b, a) }

// DecodeAgg decodes an aggregate AppendAgg encoded, all of v.
func DecodeAgg(v []byte) (tidemark.Agg, error) {
	d := decoder{b: v}
	a := d.agg()
	return a, d.finish("local state aggregate")
}
