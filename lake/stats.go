package lake

import (
	"bytes"
	"encoding/json"
	"math"
	"time"
	"unicode/utf8"
)

// statsPrefix is how many bytes of a string Spark keeps in min/max stats.
const statsPrefix = 32

// bounds are the min and max of the non-null values of a column, by kind:
// ints for timestamps and longs, floats for doubles, owned bytes for
// strings and binary.
type bounds struct {
	has  bool // at least one value added
	minI int64
	maxI int64
	minF float64
	maxF float64
	minB []byte
	maxB []byte
}

func (b *bounds) addInt(v int64) {
	widen(b.has, &b.minI, &b.maxI, v)
	b.has = true
}

func (b *bounds) addFloat(v float64) {
	widen(b.has, &b.minF, &b.maxF, v)
	b.has = true
}

// widen moves lo and hi out to v; with has false they start at v.
func widen[T int64 | float64](has bool, lo, hi *T, v T) {
	if !has || v < *lo {
		*lo = v
	}
	if !has || v > *hi {
		*hi = v
	}
}

func (b *bounds) addBytes(v []byte) {
	if !b.has || bytes.Compare(v, b.minB) < 0 {
		b.minB = append(b.minB[:0], v...)
	}
	if !b.has || bytes.Compare(v, b.maxB) > 0 {
		b.maxB = append(b.maxB[:0], v...)
	}
	b.has = true
}

// merge adds the bounds of other values of a column of kind k.
func (b *bounds) merge(k kind, o *bounds) {
	if !o.has {
		return
	}
	switch k {
	case kindTimestamp, kindLong:
		b.addInt(o.minI)
		b.addInt(o.maxI)
	case kindDouble:
		b.addFloat(o.minF)
		b.addFloat(o.maxF)
	default:
		b.addBytes(o.minB)
		b.addBytes(o.maxB)
	}
}

// colStats accumulates the Delta file statistics of one column.
type colStats struct {
	bounds
	kind  kind
	nulls int64
	bad   bool // a value that cannot be a bound (NaN, ±Inf, invalid UTF-8, long max)
}

// addFloat adds v to the bounds unless Spark's stats cannot hold it.
func (s *colStats) addFloat(v float64) {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		s.bad = true
		return
	}
	s.bounds.addFloat(v)
}

// addBytes adds a string's Spark stats prefix to the bounds.
func (s *colStats) addBytes(b []byte) {
	if s.kind == kindBinary {
		return // Spark keeps no min/max for binary
	}
	if len(b) > statsPrefix {
		// A prefix is still a valid lower bound; an upper bound would need
		// Spark's tie-breaker suffix, so leave max out for this file.
		s.bad = true
		b = b[:statsPrefix]
	}
	s.bounds.addBytes(b)
}

// merge adds the stats of other rows of the same column.
func (s *colStats) merge(o *colStats) {
	s.nulls += o.nulls
	s.bad = s.bad || o.bad
	s.bounds.merge(s.kind, &o.bounds)
}

// formatStatsTime renders a timestamp bound as Spark does, in milliseconds.
// Readers that skip on it must widen the max by 1 ms.
func formatStatsTime(us int64) string {
	return time.UnixMicro(us).UTC().Format("2006-01-02T15:04:05.000Z07:00")
}

// statsJSON renders {"numRecords","minValues","maxValues","nullCount"} for
// the file's data columns.
func (w *fileWriter) statsJSON() string {
	mins := map[string]any{}
	maxs := map[string]any{}
	nulls := map[string]int64{}
	for i, c := range w.t.cols {
		s := &w.stats[i]
		nulls[c.name] = s.nulls
		if !s.has {
			continue
		}
		switch c.kind {
		case kindTimestamp:
			mins[c.name] = formatStatsTime(s.minI)
			maxs[c.name] = formatStatsTime(s.maxI)
		case kindLong:
			mins[c.name] = s.minI
			maxs[c.name] = s.maxI
		case kindDouble:
			if !s.bad {
				mins[c.name] = s.minF
				maxs[c.name] = s.maxF
			}
		case kindString:
			if utf8.Valid(s.minB) {
				mins[c.name] = string(s.minB)
			}
			if !s.bad && utf8.Valid(s.maxB) {
				maxs[c.name] = string(s.maxB)
			}
		}
	}
	b, _ := json.Marshal(struct {
		NumRecords int64            `json:"numRecords"`
		MinValues  map[string]any   `json:"minValues"`
		MaxValues  map[string]any   `json:"maxValues"`
		NullCount  map[string]int64 `json:"nullCount"`
	}{w.rows, mins, maxs, nulls})
	return string(b)
}
