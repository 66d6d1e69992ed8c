package tidemark

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/DataDog/sketches-go/ddsketch"
	"github.com/DataDog/sketches-go/ddsketch/mapping"
	"github.com/DataDog/sketches-go/ddsketch/store"
	"github.com/axiomhq/hyperloglog"
	"github.com/cespare/xxhash/v2"
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
// they grow.
var sketchStore = store.BufferedPaginatedStoreConstructor

// smallMax is how many values (distinct hashes) a state keeps exactly
// before it turns to a sketch: most window×key pairs of a per-user stream
// see a handful of rows, and a short list costs a fraction of a sketch (and
// its percentiles and distinct counts are then exact).
const smallMax = 16

// quantileState is one percentile input's values: exact while few, a
// DDSketch after.
type quantileState struct {
	small  []float64
	sketch *ddsketch.DDSketch
}

// distinctState is one distinct-count input's values: their 64-bit hashes
// (xxHash of the canonical text) while few, a HyperLogLog after.
type distinctState struct {
	small []uint64
	hll   *hyperloglog.Sketch
}

// AggState is the mergeable state of one window×key's aggregates under an
// AggList: for each numeric input its count, compensated sum, min and max
// (Agg with Count == Values), for each input a percentile reads its values
// (up to smallMax kept exactly, then a DDSketch), and for each text input
// its distinct values (up to smallMax hashes, then a HyperLogLog). States
// of one list merge (shards, late rows, restarts) and serialize
// (checkpoints, the lake's agg_state column).
type AggState struct {
	Moments   []Agg
	quantiles []quantileState
	distinct  []distinctState
}

// NewState returns an empty state for the list; nil for an empty list.
func (l AggList) NewState() *AggState {
	if l.Empty() {
		return nil
	}
	return &AggState{
		Moments:   make([]Agg, l.nNumeric),
		quantiles: make([]quantileState, l.nSketch),
		distinct:  make([]distinctState, l.nDistinct),
	}
}

// Fits reports whether s has the shape of the list's states.
func (l AggList) Fits(s *AggState) bool {
	if s == nil {
		return l.Empty()
	}
	return len(s.Moments) == l.nNumeric && len(s.quantiles) == l.nSketch && len(s.distinct) == l.nDistinct
}

// Add folds one record's input values (Record.Fields: one per l.Inputs)
// into s. Absent values count nowhere.
func (l AggList) Add(s *AggState, vals []AggValue) {
	for i, v := range vals {
		if !v.Present || i >= len(l.Inputs) {
			continue
		}
		if j := l.distinct[i]; j >= 0 {
			s.distinct[j].add(xxhash.Sum64String(v.Text))
			continue
		}
		s.Moments[l.numeric[i]].Add(v.Num, true)
		if j := l.sketch[i]; j >= 0 {
			s.quantiles[j].add(v.Num)
		}
	}
}

func (q *quantileState) add(v float64) {
	if q.sketch == nil && len(q.small) < smallMax {
		q.small = append(q.small, v)
		return
	}
	q.toSketch()
	// Add fails only on values the mapping cannot index (beyond
	// ±1.7e308, or NaN), which the decoders never yield: finite numbers
	// only. Such a value counts in the moments but not in the sketch.
	_ = q.sketch.Add(v)
}

// toSketch moves the exact values into a sketch.
func (q *quantileState) toSketch() {
	if q.sketch != nil {
		return
	}
	q.sketch = ddsketch.NewDDSketchFromStoreProvider(quantileMapping, sketchStore)
	for _, v := range q.small {
		_ = q.sketch.Add(v)
	}
	q.small = nil
}

func (q *quantileState) count() int64 {
	if q.sketch != nil {
		return int64(math.Round(q.sketch.GetCount()))
	}
	return int64(len(q.small))
}

// value is a's percentile: among few values the exact one DuckDB's
// quantile_disc picks (AggSpec.QuantileIndex), the sketch's estimate
// otherwise.
func (q *quantileState) value(a AggSpec) (float64, bool) {
	if q.sketch != nil {
		if q.sketch.IsEmpty() {
			return 0, false
		}
		v, err := q.sketch.GetValueAtQuantile(a.Quantile())
		return v, err == nil
	}
	if len(q.small) == 0 {
		return 0, false
	}
	sorted := slices.Clone(q.small)
	slices.Sort(sorted)
	return sorted[a.QuantileIndex(len(sorted))], true
}

func (d *distinctState) add(h uint64) {
	if d.hll != nil {
		d.hll.InsertHash(h)
		return
	}
	if slices.Contains(d.small, h) {
		return
	}
	if len(d.small) < smallMax {
		d.small = append(d.small, h)
		return
	}
	d.toHLL()
	d.hll.InsertHash(h)
}

func (d *distinctState) toHLL() {
	if d.hll != nil {
		return
	}
	d.hll, _ = hyperloglog.NewSketch(DistinctPrecision, true) // a valid constant precision
	for _, h := range d.small {
		d.hll.InsertHash(h)
	}
	d.small = nil
}

func (d *distinctState) count() uint64 {
	if d.hll != nil {
		return d.hll.Estimate()
	}
	return uint64(len(d.small))
}

// errShape is returned by Merge for states of different lists.
var errShape = errors.New("tidemark: aggregate states of different aggregate lists")

// Merge folds o into s. Both must be of one list (Fits); o is unchanged
// and shares nothing with s afterwards.
func (s *AggState) Merge(o *AggState) error {
	if o == nil {
		return nil
	}
	if s == nil || len(s.Moments) != len(o.Moments) || len(s.quantiles) != len(o.quantiles) || len(s.distinct) != len(o.distinct) {
		return errShape
	}
	for i := range o.Moments {
		s.Moments[i].Merge(o.Moments[i])
	}
	for i := range o.quantiles {
		q, oq := &s.quantiles[i], &o.quantiles[i]
		if oq.sketch == nil {
			for _, v := range oq.small {
				q.add(v)
			}
			continue
		}
		q.toSketch()
		if err := q.sketch.MergeWith(oq.sketch); err != nil {
			return fmt.Errorf("merge quantile sketch: %w", err)
		}
	}
	for i := range o.distinct {
		d, od := &s.distinct[i], &o.distinct[i]
		if od.hll == nil {
			for _, h := range od.small {
				d.add(h)
			}
			continue
		}
		d.toHLL()
		if err := d.hll.Merge(od.hll); err != nil {
			return fmt.Errorf("merge distinct sketch: %w", err)
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
		Moments:   slices.Clone(s.Moments),
		quantiles: make([]quantileState, len(s.quantiles)),
		distinct:  make([]distinctState, len(s.distinct)),
	}
	for i, q := range s.quantiles {
		c.quantiles[i].small = slices.Clone(q.small)
		if q.sketch != nil {
			c.quantiles[i].sketch = q.sketch.Copy()
		}
	}
	for i, d := range s.distinct {
		c.distinct[i].small = slices.Clone(d.small)
		if d.hll != nil {
			c.distinct[i].hll = d.hll.Clone()
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
// Percentiles over up to smallMax values and distinct counts of up to
// smallMax values are exact; beyond, percentiles are the sketch's
// estimate clamped to the exact min and max (so p0 and p100 are exact)
// and distinct counts the HyperLogLog's.
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
			out[i] = AggOut{float64(s.distinct[l.distinct[j]].count()), true}
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
			switch {
			case q == 0:
				out[i] = AggOut{m.Min, true}
			case q == 1:
				out[i] = AggOut{m.Max, true}
			default:
				if v, ok := s.quantiles[l.sketch[j]].value(a); ok {
					out[i] = AggOut{min(max(v, m.Min), m.Max), true}
				}
			}
		}
	}
	return out
}

// Absorbed returns how many values each percentile input of s has taken
// in (its exact values or its sketch's count). A check that state lost or
// doubled nothing compares it with the rows that carried the field.
func (s *AggState) Absorbed() []int64 {
	if s == nil {
		return nil
	}
	out := make([]int64, len(s.quantiles))
	for i := range s.quantiles {
		out[i] = s.quantiles[i].count()
	}
	return out
}

// aggStateVersion is the first byte of MarshalBinary's encoding.
const aggStateVersion = 1

// Part kinds in the encoding of a percentile or distinct input.
const (
	partSmall  = 1 // exact values (float64 bits) or hashes, uvarint count first
	partSketch = 2 // a DDSketch (without its mapping) or HyperLogLog, uvarint length first
)

// MarshalBinary encodes s: a version byte; the number of moments and each
// one's values count (uvarint) and sum, compensation, min and max
// (float64 bits, little-endian); the number of percentile inputs and for
// each a kind byte (partSmall: a count and the values; partSketch: a
// length and the DDSketch's encoding without its mapping); the same for
// the distinct inputs (hashes; the HyperLogLog's own encoding).
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
	b = binary.AppendUvarint(b, uint64(len(s.quantiles)))
	var enc []byte
	for _, q := range s.quantiles {
		if q.sketch == nil {
			b = append(b, partSmall)
			b = binary.AppendUvarint(b, uint64(len(q.small)))
			for _, v := range q.small {
				b = binary.LittleEndian.AppendUint64(b, math.Float64bits(v))
			}
			continue
		}
		enc = enc[:0]
		q.sketch.Encode(&enc, true)
		b = append(b, partSketch)
		b = binary.AppendUvarint(b, uint64(len(enc)))
		b = append(b, enc...)
	}
	b = binary.AppendUvarint(b, uint64(len(s.distinct)))
	for _, d := range s.distinct {
		if d.hll == nil {
			b = append(b, partSmall)
			b = binary.AppendUvarint(b, uint64(len(d.small)))
			for _, h := range d.small {
				b = binary.LittleEndian.AppendUint64(b, h)
			}
			continue
		}
		hb, err := d.hll.MarshalBinary()
		if err != nil {
			return nil, fmt.Errorf("encode distinct sketch: %w", err)
		}
		b = append(b, partSketch)
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
	part := func(what string) (kind byte, p []byte, n int, err error) {
		if len(b) == 0 {
			return 0, nil, 0, bad(what + " truncated")
		}
		kind, b = b[0], b[1:]
		l, k := binary.Uvarint(b)
		switch {
		case k <= 0:
			return 0, nil, 0, bad(what + " truncated")
		case kind == partSmall:
			if l > smallMax || l*8 > uint64(len(b)-k) {
				return 0, nil, 0, bad(what + ": bad count of exact values")
			}
			n, l = int(l), l*8
		case kind == partSketch:
			if l == 0 || l > uint64(len(b)-k) {
				return 0, nil, 0, bad(what + " truncated")
			}
		default:
			return 0, nil, 0, bad(fmt.Sprintf("%s: unknown kind %d", what, kind))
		}
		p = b[k : k+int(l)]
		b = b[k+int(l):]
		return kind, p, n, nil
	}
	if n, err = count("quantile sketch"); err != nil {
		return err
	}
	out.quantiles = make([]quantileState, n)
	for i := range out.quantiles {
		kind, p, n, err := part("quantile sketch")
		if err != nil {
			return err
		}
		if kind == partSmall {
			if n > 0 {
				out.quantiles[i].small = make([]float64, n)
			}
			for j := range n {
				v := math.Float64frombits(binary.LittleEndian.Uint64(p[8*j:]))
				if math.IsNaN(v) || math.IsInf(v, 0) {
					return bad("quantile sketch: a value that is not a finite number")
				}
				out.quantiles[i].small[j] = v
			}
			continue
		}
		d, err := ddsketch.DecodeDDSketch(p, sketchStore, quantileMapping)
		if err != nil {
			return fmt.Errorf("%w: quantile sketch: %v", ErrAggState, err)
		}
		out.quantiles[i].sketch = d
	}
	if n, err = count("distinct sketch"); err != nil {
		return err
	}
	out.distinct = make([]distinctState, n)
	for i := range out.distinct {
		kind, p, n, err := part("distinct sketch")
		if err != nil {
			return err
		}
		if kind == partSmall {
			if n > 0 {
				out.distinct[i].small = make([]uint64, n)
			}
			for j := range n {
				out.distinct[i].small[j] = binary.LittleEndian.Uint64(p[8*j:])
			}
			continue
		}
		h, _ := hyperloglog.NewSketch(DistinctPrecision, true)
		if err := h.UnmarshalBinary(p); err != nil {
			return fmt.Errorf("%w: distinct sketch: %v", ErrAggState, err)
		}
		out.distinct[i].hll = h
	}
	if len(b) != 0 {
		return bad(fmt.Sprintf("%d trailing bytes", len(b)))
	}
	*s = out
	return nil
}
