package colfile

import (
	"bytes"
	"math"

	"github.com/parquet-go/parquet-go/encoding/plain"
	"github.com/parquet-go/parquet-go/format"
)

// A page's bounds are computed once, in the loop that encodes its values
// (addRange), and give the page's column index entry, the chunk's
// statistics and the caller's Stats.

// pageBounds are the bounds of a page's or a chunk's non-null values,
// and what else Stats reports.
type pageBounds struct {
	Bounds
	nan    bool // a NaN was seen (never a bound)
	maxLen int  // the longest byte value
}

func (b *pageBounds) clear() {
	b.Bounds.clear()
	b.nan, b.maxLen = false, 0
}

// indexPage adds the page's bounds to the column index and the chunk's
// bounds.
func (e *Chunk) indexPage() {
	pb := &e.pb
	e.index.NullCounts = append(e.index.NullCounts, int64(e.nulls))
	if pb.nan {
		// Bounds without the NaNs would let a reader that orders NaN
		// last (Spark) prune rows away: no column index, no chunk bounds,
		// as parquet-java does.
		e.noIndex = true
	}
	e.cb.maxLen = max(e.cb.maxLen, pb.maxLen)
	if !pb.Has {
		e.index.NullPages = append(e.index.NullPages, true)
		e.index.MinValues = append(e.index.MinValues, []byte{})
		e.index.MaxValues = append(e.index.MaxValues, []byte{})
		return
	}
	e.index.NullPages = append(e.index.NullPages, false)
	lo, hi := e.indexBounds(pb)
	e.index.MinValues = append(e.index.MinValues, lo)
	e.index.MaxValues = append(e.index.MaxValues, hi)
	e.cb.Merge(e.col.Type, &pb.Bounds)
}

// indexBounds renders a page's bounds as the column index holds them:
// PLAIN values; byte arrays cut to IndexPrefix bytes (the max rounded up).
func (e *Chunk) indexBounds(pb *pageBounds) (lo, hi []byte) {
	switch e.col.Type {
	case Timestamp, Int64:
		return plain.Int64(pb.MinInt), plain.Int64(pb.MaxInt)
	case Double:
		return plain.Double(zeroAsNeg(pb.MinFloat)), plain.Double(zeroAsPos(pb.MaxFloat))
	case Boolean:
		return plain.Boolean(pb.MinBool), plain.Boolean(pb.MaxBool)
	}
	lo = bytes.Clone(pb.MinBytes[:min(len(pb.MinBytes), IndexPrefix)])
	if lo == nil {
		lo = []byte{}
	}
	return lo, RoundUp(pb.MaxBytes, IndexPrefix)
}

// zeroAsNeg and zeroAsPos write a zero bound as -0 (min) and +0 (max), as
// the Parquet spec asks, so that readers comparing either zero prune right.
func zeroAsNeg(v float64) float64 {
	if v == 0 {
		return math.Copysign(0, -1)
	}
	return v
}

func zeroAsPos(v float64) float64 {
	if v == 0 {
		return 0
	}
	return v
}

// RoundUp returns b cut to n bytes and still an upper bound of b: its last
// byte that is not 0xff is incremented; b whole when every byte is 0xff.
// A column index holds a byte-array page's max so, cut to 16 bytes.
func RoundUp(b []byte, n int) []byte {
	if len(b) <= n {
		return append([]byte{}, b...)
	}
	out := bytes.Clone(b[:n])
	for i := n - 1; i >= 0; i-- {
		if out[i] != 0xff {
			out[i]++
			return out[:i+1]
		}
	}
	return append([]byte{}, b...)
}

// IndexPrefix is how many bytes of a byte-array page bound the column
// index keeps: the min cut to it, the max RoundUp to it (parquet-go's
// default, which wrote these files before).
const IndexPrefix = 16

// statistics are the chunk's: exact PLAIN bounds of its non-null values
// (NaN left out) and its null count.
func (e *Chunk) statistics() format.Statistics {
	s := format.Statistics{NullCount: e.nullCount}
	cb := &e.cb
	if !cb.Has || e.noIndex {
		return s
	}
	switch e.col.Type {
	case Timestamp, Int64:
		s.MinValue, s.MaxValue = plain.Int64(cb.MinInt), plain.Int64(cb.MaxInt)
	case Double:
		s.MinValue, s.MaxValue = plain.Double(zeroAsNeg(cb.MinFloat)), plain.Double(zeroAsPos(cb.MaxFloat))
	case Boolean:
		s.MinValue, s.MaxValue = plain.Boolean(cb.MinBool), plain.Boolean(cb.MaxBool)
	default:
		s.MinValue, s.MaxValue = bytes.Clone(cb.MinBytes), bytes.Clone(cb.MaxBytes)
		if s.MinValue == nil {
			s.MinValue = []byte{}
		}
		if s.MaxValue == nil {
			s.MaxValue = []byte{}
		}
	}
	return s
}
