package tidemark

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"

	"github.com/DataDog/sketches-go/ddsketch"
	"github.com/DataDog/sketches-go/ddsketch/mapping"
	"github.com/DataDog/sketches-go/ddsketch/store"
	"github.com/axiomhq/hyperloglog"
)

// The root package holds the sketches because both layers need them and
// they sit below both (STYLE.md "one home per mechanism"): the stream
// estimates with them, the batch layer reads the states the stream wrote.
// They are the two libraries the aggregates depend on, nothing else.

// QuantileAccuracy is the DDSketch's relative accuracy: a live percentile
// is within 1% of a value whose rank is the requested one.
const QuantileAccuracy = 0.01

// DistinctPrecision is the HyperLogLog's precision: 2^14 registers, a
// standard error of 1.04/sqrt(2^14) ≈ 0.81% on distinct counts (and exact
// counting, as a sparse list, while they are small).
const DistinctPrecision = 14

// DistinctError is the HyperLogLog's standard error at DistinctPrecision.
const DistinctError = 0.0081

// quantileMapping is the sketches' shared index mapping; it is immutable.
var quantileMapping = func() mapping.IndexMapping {
	m, err := mapping.NewLogarithmicMapping(QuantileAccuracy)
	if err != nil {
		panic(err) // a constant accuracy in (0, 1)
	}
	return m
}()

// sketchStore keeps few values in a compact buffer and pages bins in as
// they grow: a window×key with a handful of rows costs a few words.
var sketchStore = store.BufferedPaginatedStoreConstructor

// AggState is the mergeable state of one window×key's aggregates under an
// AggList: for each numeric input its count, compensated sum, min and max
// (Agg with Count == Values), for each input a percentile reads a
// DDSketch, and for each text input a HyperLogLog. A nil sketch is an
// empty one. States of one list merge (shards, late rows, restarts) and
// serialize (checkpoints, the lake's agg_state column).
type AggState struct {
	Moments  []Agg
	Sketches []*ddsketch.DDSketch
	Distinct []*hyperloglog.Sketch
}

// NewState returns an empty state for the list; nil for an empty list.
func (l AggList) NewState() *AggState {
	if l.Empty() {
		return nil
	}
	return &AggState{
		Moments:  make([]Agg, l.nNumeric),
		Sketches: make([]*ddsketch.DDSketch, l.nSketch),
		Distinct: make([]*hyperloglog.Sketch, l.nDistinct),
	}
}

// Fits reports whether s has the shape of the list's states.
func (l AggList) Fits(s *AggState) bool {
	if s == nil {
		return l.Empty()
	}
	return len(s.Moments) == l.nNumeric && len(s.Sketches) == l.nSketch && len(s.Distinct) == l.nDistinct
}

// Add folds one record's input values (Record.Fields: one per l.Inputs)
// into s. Absent values count nowhere.
func (l AggList) Add(s *AggState, vals []AggValue) {
	for i, v := range vals {
		if !v.Present || i >= len(l.Inputs) {
			continue
		}
		if j := l.distinct[i]; j >= 0 {
			h := s.Distinct[j]
			if h == nil {
				h = newHLL()
				s.Distinct[j] = h
			}
			h.Insert([]byte(v.Text))
			continue
		}
		s.Moments[l.numeric[i]].Add(v.Num, true)
		if j := l.sketch[i]; j >= 0 {
			d := s.Sketches[j]
			if d == nil {
				d = newSketch()
				s.Sketches[j] = d
			}
			// Add fails only on values the mapping cannot index (beyond
			// ±1.7e308 or NaN), which the decoder never yields: finite
			// numbers only. Such a value counts in the moments but not
			// in the sketch, as the sketch cannot hold it.
			_ = d.Add(v.Num)
		}
	}
}

func newSketch() *ddsketch.DDSketch {
	return ddsketch.NewDDSketchFromStoreProvider(quantileMapping, sketchStore)
}

func newHLL() *hyperloglog.Sketch {
	h, _ := hyperloglog.NewSketch(DistinctPrecision, true) // a valid constant precision
	return h
}

// errShape is returned by Merge for states of different lists.
var errShape = errors.New("tidemark: aggregate states of different aggregate lists")

// Merge folds o into s. Both must be of one list (Fits); o is unchanged
// and shares nothing with s afterwards.
func (s *AggState) Merge(o *AggState) error {
	if o == nil {
		return nil
	}
	if s == nil || len(s.Moments) != len(o.Moments) || len(s.Sketches) != len(o.Sketches) || len(s.Distinct) != len(o.Distinct) {
		return errShape
	}
	for i := range o.Moments {
		s.Moments[i].Merge(o.Moments[i])
	}
	for i, d := range o.Sketches {
		switch {
		case d == nil:
		case s.Sketches[i] == nil:
			s.Sketches[i] = d.Copy()
		default:
			if err := s.Sketches[i].MergeWith(d); err != nil {
				return fmt.Errorf("merge quantile sketch: %w", err)
			}
		}
	}
	for i, h := range o.Distinct {
		switch {
		case h == nil:
		case s.Distinct[i] == nil:
			s.Distinct[i] = h.Clone()
		default:
			if err := s.Distinct[i].Merge(h); err != nil {
				return fmt.Errorf("merge distinct sketch: %w", err)
			}
		}
	}
	return nil
}

// Clone returns a deep copy of s.
func (s *AggState) Clone() *AggState {
	if s == nil {
		return nil
	}
	c := &AggState{
		Moments:  append([]Agg(nil), s.Moments...),
		Sketches: make([]*ddsketch.DDSketch, len(s.Sketches)),
		Distinct: make([]*hyperloglog.Sketch, len(s.Distinct)),
	}
	for i, d := range s.Sketches {
		if d != nil {
			c.Sketches[i] = d.Copy()
		}
	}
	for i, h := range s.Distinct {
		if h != nil {
			c.Distinct[i] = h.Clone()
		}
	}
	return c
}

// AggOut is one aggregate's value: Valid is false for SQL NULL (an
// average, percentile, sum, min or max over no numbers). Counts are
// integral.
type AggOut struct {
	V     float64
	Valid bool
}

// Values returns the list's aggregates from s, in l.Specs order.
// Percentiles are the sketch's estimate clamped to the exact min and max
// (so p0 and p100 are exact); distinct counts the HyperLogLog's.
func (l AggList) Values(s *AggState) []AggOut {
	out := make([]AggOut, len(l.Specs))
	if s == nil || !l.Fits(s) {
		return out
	}
	for i, a := range l.Specs {
		j := l.specInput[i]
		if j < 0 {
			continue
		}
		if a.Func == AggDistinct {
			var n uint64
			if h := s.Distinct[l.distinct[j]]; h != nil {
				n = h.Estimate()
			}
			out[i] = AggOut{float64(n), true}
			continue
		}
		m := s.Moments[l.numeric[j]]
		if m.Values == 0 {
			continue
		}
		switch a.Func {
		case AggSum:
			out[i] = AggOut{m.Total(), true}
		case AggMin:
			out[i] = AggOut{m.Min, true}
		case AggMax:
			out[i] = AggOut{m.Max, true}
		case AggAvg:
			out[i] = AggOut{m.Total() / float64(m.Values), true}
		case AggQuantile:
			q := a.Quantile()
			d := s.Sketches[l.sketch[j]]
			switch {
			case q == 0:
				out[i] = AggOut{m.Min, true}
			case q == 1:
				out[i] = AggOut{m.Max, true}
			case d != nil && !d.IsEmpty():
				v, err := d.GetValueAtQuantile(q)
				if err == nil {
					out[i] = AggOut{min(max(v, m.Min), m.Max), true}
				}
			}
		}
	}
	return out
}

// Absorbed returns how many values each sketch of s has taken in: for each
// numeric input that has a sketch, the sketch's count. A check that state
// lost or doubled nothing compares it with the rows that carried the field.
func (s *AggState) Absorbed() []int64 {
	if s == nil {
		return nil
	}
	out := make([]int64, len(s.Sketches))
	for i, d := range s.Sketches {
		if d != nil {
			out[i] = int64(math.Round(d.GetCount()))
		}
	}
	return out
}

// aggStateVersion is the first byte of MarshalBinary's encoding.
const aggStateVersion = 1

// MarshalBinary encodes s: a version byte; the number of moments and each
// one's values count (uvarint) and sum, compensation, min and max
// (float64 bits, little-endian); the number of sketches and each one's
// length (uvarint, 0 for an empty one) and DDSketch encoding without its
// mapping; the same for the HyperLogLogs with their own encoding.
func (s *AggState) MarshalBinary() ([]byte, error) {
	return s.AppendBinary(nil)
}

// AppendBinary appends MarshalBinary's encoding of s to b.
func (s *AggState) AppendBinary(b []byte) ([]byte, error) {
	if s == nil {
		s = &AggState{}
	}
	b = append(b, aggStateVersion)
	b = binary.AppendUvarint(b, uint64(len(s.Moments)))
	for _, m := range s.Moments {
		b = binary.AppendUvarint(b, uint64(m.Values))
		for _, f := range [4]float64{m.Sum, m.Comp, m.Min, m.Max} {
			b = binary.LittleEndian.AppendUint64(b, math.Float64bits(f))
		}
	}
	b = binary.AppendUvarint(b, uint64(len(s.Sketches)))
	var enc []byte
	for _, d := range s.Sketches {
		enc = enc[:0]
		if d != nil && !d.IsEmpty() {
			d.Encode(&enc, true)
		}
		b = binary.AppendUvarint(b, uint64(len(enc)))
		b = append(b, enc...)
	}
	b = binary.AppendUvarint(b, uint64(len(s.Distinct)))
	for _, h := range s.Distinct {
		if h == nil {
			b = binary.AppendUvarint(b, 0)
			continue
		}
		hb, err := h.MarshalBinary()
		if err != nil {
			return nil, fmt.Errorf("encode distinct sketch: %w", err)
		}
		b = binary.AppendUvarint(b, uint64(len(hb)))
		b = append(b, hb...)
	}
	return b, nil
}

// ErrAggState wraps every error of UnmarshalBinary: the bytes are not an
// aggregate state this version of tidemark wrote.
var ErrAggState = errors.New("tidemark: bad aggregate state")

// maxStateParts bounds each part count a decoded state claims, so that a
// corrupt length cannot make the decoder allocate without bound.
const maxStateParts = 1 << 12

// UnmarshalBinary decodes MarshalBinary's encoding into s.
func (s *AggState) UnmarshalBinary(b []byte) (err error) {
	// The sketch libraries' decoders index their input without bounds
	// checks in places; a corrupt state is an error, never a crash.
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%w: %v", ErrAggState, r)
		}
	}()
	bad := func(what string) error { return fmt.Errorf("%w: %s", ErrAggState, what) }
	if len(b) == 0 || b[0] != aggStateVersion {
		if len(b) == 0 {
			return bad("empty")
		}
		return bad(fmt.Sprintf("version %d, want %d (written by another version of tidemark)", b[0], aggStateVersion))
	}
	b = b[1:]
	count := func(what string) (int, error) {
		n, k := binary.Uvarint(b)
		if k <= 0 || n > maxStateParts {
			return 0, bad(what + " count")
		}
		b = b[k:]
		return int(n), nil
	}
	n, err := count("moments")
	if err != nil {
		return err
	}
	out := AggState{Moments: make([]Agg, n)}
	for i := range out.Moments {
		v, k := binary.Uvarint(b)
		if k <= 0 || v > math.MaxInt64 || len(b) < k+32 {
			return bad("moments truncated")
		}
		b = b[k:]
		var f [4]float64
		for j := range f {
			f[j] = math.Float64frombits(binary.LittleEndian.Uint64(b[8*j:]))
		}
		b = b[32:]
		out.Moments[i] = Agg{Count: int64(v), Values: int64(v), Sum: f[0], Comp: f[1], Min: f[2], Max: f[3]}
	}
	part := func(what string) ([]byte, error) {
		l, k := binary.Uvarint(b)
		if k <= 0 || l > uint64(len(b)-k) {
			return nil, bad(what + " truncated")
		}
		p := b[k : k+int(l)]
		b = b[k+int(l):]
		return p, nil
	}
	if n, err = count("quantile sketch"); err != nil {
		return err
	}
	out.Sketches = make([]*ddsketch.DDSketch, n)
	for i := range out.Sketches {
		p, err := part("quantile sketch")
		if err != nil {
			return err
		}
		if len(p) == 0 {
			continue
		}
		d, err := ddsketch.DecodeDDSketch(p, sketchStore, quantileMapping)
		if err != nil {
			return fmt.Errorf("%w: quantile sketch: %v", ErrAggState, err)
		}
		out.Sketches[i] = d
	}
	if n, err = count("distinct sketch"); err != nil {
		return err
	}
	out.Distinct = make([]*hyperloglog.Sketch, n)
	for i := range out.Distinct {
		p, err := part("distinct sketch")
		if err != nil {
			return err
		}
		if len(p) == 0 {
			continue
		}
		h := newHLL()
		if err := h.UnmarshalBinary(p); err != nil {
			return fmt.Errorf("%w: distinct sketch: %v", ErrAggState, err)
		}
		out.Distinct[i] = h
	}
	if len(b) != 0 {
		return bad(fmt.Sprintf("%d trailing bytes", len(b)))
	}
	*s = out
	return nil
}
