package engine

// The binary codecs of the engine's state: State, Changes, SessionState,
// SessionChanges and the Store's marker are framed alike (a magic and
// version, varint fields, a CRC-32C of everything before it), and an
// aggregate (tidemark.Agg) is encoded in one place, appendAgg and
// decoder.agg: a field added to Agg changes these two and the version bytes.
// An engine with --agg aggregates writes its snapshots and changelogs under
// the next version byte (stateMagicAggs, changesMagicAggs): every result
// then ends with its tidemark.AggState (appendState), and a frame without
// them stays byte for byte what it was before --agg.

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math"

	"tidemark"
)

var errStateTruncated = errors.New("stream: state truncated or malformed")

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

func varintLen(v int64) int {
	u := uint64(v) << 1
	if v < 0 {
		u = ^u
	}
	return uvarintLen(u)
}

// appendSnapshotHeader appends what precedes the open pairs in a snapshot.
func appendSnapshotHeader(b []byte, spec tidemark.WindowSpec, hasW bool, w int64, srcs []SourceState, open int64, states bool) []byte {
	if states {
		b = append(b, withStates(stateMagic)...)
	} else {
		b = append(b, stateMagic...)
	}
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
	st.Aggs = d.states
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
// the compensation survive exactly), and with states (a frame of an
// engine with --agg) the AggState.
func appendResult(b []byte, r tidemark.Result, states bool) []byte {
	b = binary.AppendVarint(b, r.Window.Start)
	b = binary.AppendVarint(b, r.Window.End-r.Window.Start)
	b = appendString(b, string(r.Key))
	b = appendAgg(b, r.Agg)
	if states {
		b = appendState(b, r.State)
	}
	return b
}

// appendState encodes an aggregate state as a uvarint length (0: none)
// and tidemark.AggState's encoding.
func appendState(b []byte, st *tidemark.AggState) []byte {
	if st == nil {
		return append(b, 0)
	}
	enc, err := st.MarshalBinary()
	if err != nil {
		panic(err) // the sketches' encoders fail only on a broken invariant
	}
	b = binary.AppendUvarint(b, uint64(len(enc)))
	return append(b, enc...)
}

// state decodes what appendState wrote.
func (d *decoder) state() *tidemark.AggState {
	n := d.uvarint()
	if n == 0 || d.err != nil {
		return nil
	}
	if n > uint64(len(d.b)) {
		d.fail()
		return nil
	}
	st := new(tidemark.AggState)
	if err := st.UnmarshalBinary(d.b[:n]); err != nil {
		if d.err == nil {
			d.err = fmt.Errorf("%w: %w", errStateTruncated, err)
		}
		d.b = nil
		return nil
	}
	d.b = d.b[n:]
	return st
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
// A magic's next version byte (withStates) marks a frame whose results
// carry their AggStates.
func openFramed(data []byte, magic, what string) (decoder, error) {
	states := false
	if len(data) >= len(magic)+4 && string(data[:len(magic)]) == withStates(magic) && (magic == stateMagic || magic == changesMagic) {
		states = true
	} else if len(data) < len(magic)+4 || string(data[:len(magic)]) != magic {
		return decoder{}, fmt.Errorf("stream: %s: bad magic or version", what)
	}
	body, sum := data[:len(data)-4], binary.LittleEndian.Uint32(data[len(data)-4:])
	if crc32.Checksum(body, castagnoli) != sum {
		return decoder{}, fmt.Errorf("stream: %s: checksum mismatch", what)
	}
	return decoder{b: body[len(magic):], states: states}, nil
}

// withStates returns the magic of a frame whose results carry states: the
// version byte plus one.
func withStates(magic string) string {
	return magic[:len(magic)-1] + string(rune(magic[len(magic)-1]+1))
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
	if d.states {
		if n := d.uvarint(); n > uint64(len(d.b)) {
			d.fail()
		} else {
			d.b = d.b[n:]
		}
	}
}

func (d *decoder) result() tidemark.Result {
	var r tidemark.Result
	r.Window.Start = d.varint()
	r.Window.End = r.Window.Start + d.varint()
	r.Key = tidemark.Key(d.string())
	r.Agg = d.agg()
	if d.states {
		r.State = d.state()
	}
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
	b      []byte
	err    error
	states bool // results carry AggStates (openFramed)
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
	states bool
}

// DecodeState checks an encoded State whole and returns it with its open
// pairs still encoded.
func DecodeState(data []byte) (*Encoded, error) {
	d, err := openFramed(data, stateMagic, "state")
	if err != nil {
		return nil, err
	}
	st := &State{Aggs: d.states}
	d.stateHeader(st)
	n := d.count(minResultBytes)
	pairs := d.b
	for range n {
		d.skipResult()
	}
	if err := d.finish("state"); err != nil {
		return nil, err
	}
	return &Encoded{State: st, pairs: pairs, n: n, states: d.states}, nil
}

// Full returns the state with its open pairs decoded.
func (s *Encoded) Full() *State {
	if s.pairs != nil {
		d := decoder{b: s.pairs, states: s.states}
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
		dec := decoder{b: s.pairs, states: s.states}
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

// AppendPair appends a Store's value for a pair: the aggregate as
// AppendAgg encodes it, then, with --agg, the state's own encoding to the
// end (a value without one is AppendAgg's, as before --agg).
func AppendPair(b []byte, a tidemark.Agg, st *tidemark.AggState) ([]byte, error) {
	b = appendAgg(b, a)
	if st == nil {
		return b, nil
	}
	return st.AppendBinary(b)
}

// DecodePair decodes a value AppendPair encoded.
func DecodePair(v []byte) (tidemark.Agg, *tidemark.AggState, error) {
	d := decoder{b: v}
	a := d.agg()
	if d.err != nil || len(d.b) == 0 {
		return a, nil, d.finish("local state aggregate")
	}
	st := new(tidemark.AggState)
	if err := st.UnmarshalBinary(d.b); err != nil {
		return a, nil, fmt.Errorf("stream: local state aggregate: %w", err)
	}
	return a, st, nil
}
