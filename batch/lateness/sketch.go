package lateness

import "math"

// Relative accuracy of Sketch: every quantile it returns is within this
// fraction of the exact nearest-rank quantile (DDSketch, Masson et al.,
// VLDB 2019).
const Alpha = 0.005

// gamma is the ratio between bucket bounds, (1+α)/(1−α); lnGamma is its
// natural logarithm (math.Log is not a constant expression; a test checks
// the literal).
const (
	gamma   = (1 + Alpha) / (1 - Alpha)
	lnGamma = 0.010000083334583179
)

// Sketch is a quantile sketch over int64 values (µs) with relative error
// at most Alpha: a log-bucket histogram in the style of DDSketch. Bucket i
// holds the magnitudes in (γ^(i−1), γ^i]; zero is counted exactly and
// negative values (arrival before event time) mirror the positive ones.
// Min and max are exact. Memory is one counter per occupied bucket range:
// about 1,700 counters cover 1 ms to 30 days.
type Sketch struct {
	pos, neg logBuckets
	zero     int64
	n        int64
	min, max int64
}

// logBuckets is a dense run of counters for bucket indexes off, off+1, ...
type logBuckets struct {
	off    int
	counts []int64
}

// bucketIndex returns the bucket of magnitude v >= 1.
func bucketIndex(v int64) int {
	return int(math.Ceil(math.Log(float64(v)) / lnGamma))
}

// bucketValue is the estimate for bucket i: the point of (γ^(i−1), γ^i]
// whose relative distance to both bounds is α.
func bucketValue(i int) float64 {
	return 2 * math.Exp(float64(i)*lnGamma) / (gamma + 1)
}

// bucketUpper is the upper bound of bucket i, γ^i.
func bucketUpper(i int) float64 { return math.Exp(float64(i) * lnGamma) }

func (b *logBuckets) add(i int) {
	switch {
	case len(b.counts) == 0:
		b.off = i
		b.counts = append(b.counts, 0)
	case i < b.off:
		grown := make([]int64, b.off-i+len(b.counts))
		copy(grown[b.off-i:], b.counts)
		b.counts, b.off = grown, i
	case i >= b.off+len(b.counts):
		b.counts = append(b.counts, make([]int64, i-b.off-len(b.counts)+1)...)
	}
	b.counts[i-b.off]++
}

// Add counts one value.
func (s *Sketch) Add(v int64) {
	if s.n == 0 || v < s.min {
		s.min = v
	}
	if s.n == 0 || v > s.max {
		s.max = v
	}
	s.n++
	switch {
	case v == 0:
		s.zero++
	case v > 0:
		s.pos.add(bucketIndex(v))
	case v == math.MinInt64:
		s.neg.add(bucketIndex(math.MaxInt64))
	default:
		s.neg.add(bucketIndex(-v))
	}
}

// Count returns the number of values added.
func (s *Sketch) Count() int64 { return s.n }

// Min returns the smallest value added (0 when empty).
func (s *Sketch) Min() int64 { return s.min }

// Max returns the largest value added (0 when empty).
func (s *Sketch) Max() int64 { return s.max }

// Quantile returns the q-quantile (0 <= q <= 1) by nearest rank: the value
// of rank ceil(q·n) in ascending order, within relative error Alpha, and
// clamped to the exact [min, max]. An empty sketch returns 0.
func (s *Sketch) Quantile(q float64) float64 {
	if s.n == 0 {
		return 0
	}
	rank := int64(math.Ceil(q * float64(s.n)))
	switch {
	case rank <= 1:
		return float64(s.min)
	case rank >= s.n:
		return float64(s.max)
	}
	v := s.atRank(rank)
	return math.Min(math.Max(v, float64(s.min)), float64(s.max))
}

// atRank walks the buckets in ascending value order to the one holding the
// 1-based rank.
func (s *Sketch) atRank(rank int64) float64 {
	var seen int64
	for j := len(s.neg.counts) - 1; j >= 0; j-- { // most negative first
		if seen += s.neg.counts[j]; seen >= rank {
			return -bucketValue(s.neg.off + j)
		}
	}
	if seen += s.zero; seen >= rank {
		return 0
	}
	for j, c := range s.pos.counts {
		if seen += c; seen >= rank {
			return bucketValue(s.pos.off + j)
		}
	}
	return float64(s.max)
}

// Point is one step of a sketch's cumulative distribution: Count values
// are at most Value (within the sketch's accuracy).
type Point struct {
	Value float64
	Count int64
}

// CDF returns the cumulative distribution at each occupied bucket's upper
// bound, ascending, ending at the total count; values <= 0 come first as
// one point at 0 (the plot's axis starts above zero anyway).
func (s *Sketch) CDF() []Point {
	var pts []Point
	seen := s.zero
	for _, c := range s.neg.counts {
		seen += c
	}
	if seen > 0 {
		pts = append(pts, Point{0, seen})
	}
	for j, c := range s.pos.counts {
		if c == 0 {
			continue
		}
		seen += c
		pts = append(pts, Point{math.Min(bucketUpper(s.pos.off+j), float64(s.max)), seen})
	}
	return pts
}

// Merge adds every value counted by o to s, as if each had been added to s:
// bucket counts add, so the accuracy stays Alpha.
func (s *Sketch) Merge(o *Sketch) {
	if o.n == 0 {
		return
	}
	if s.n == 0 || o.min < s.min {
		s.min = o.min
	}
	if s.n == 0 || o.max > s.max {
		s.max = o.max
	}
	s.n += o.n
	s.zero += o.zero
	s.pos.merge(&o.pos)
	s.neg.merge(&o.neg)
}

func (b *logBuckets) merge(o *logBuckets) {
	if len(o.counts) == 0 {
		return
	}
	if len(b.counts) == 0 {
		b.off, b.counts = o.off, append([]int64(nil), o.counts...)
		return
	}
	lo, hi := min(b.off, o.off), max(b.off+len(b.counts), o.off+len(o.counts))
	if lo != b.off || hi != b.off+len(b.counts) {
		grown := make([]int64, hi-lo)
		copy(grown[b.off-lo:], b.counts)
		b.counts, b.off = grown, lo
	}
	for j, c := range o.counts {
		b.counts[o.off-b.off+j] += c
	}
}
