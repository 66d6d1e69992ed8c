package lake

import (
	"encoding/json"
	"math"
	"time"
	"unicode/utf8"

	"tidemark/lake/colfile"
)

// statsPrefix is how many bytes of a string Spark keeps in min/max stats.
const statsPrefix = 32

// colStats accumulates the Delta file statistics of one column.
type colStats struct {
	colfile.Bounds
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
	s.AddFloat(v)
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
	s.AddBytes(b)
}

// addChunk adds the stats of a column chunk the file's writer encoded.
func (s *colStats) addChunk(c colfile.Stats) {
	s.nulls += c.Nulls
	s.bad = s.bad || c.NaN
	if !c.Has {
		return
	}
	switch s.kind {
	case kindTimestamp, kindLong:
		s.AddInt(c.MinInt)
		s.AddInt(c.MaxInt)
	case kindDouble:
		s.addFloat(c.MinFloat)
		s.addFloat(c.MaxFloat)
	case kindString:
		s.bad = s.bad || c.MaxLen > statsPrefix
		s.addBytes(c.MinBytes)
		s.addBytes(c.MaxBytes)
	}
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
		if !s.Has {
			continue
		}
		switch c.kind {
		case kindTimestamp:
			mins[c.name] = formatStatsTime(s.MinInt)
			maxs[c.name] = formatStatsTime(s.MaxInt)
		case kindLong:
			mins[c.name] = s.MinInt
			maxs[c.name] = s.MaxInt
		case kindDouble:
			if !s.bad {
				mins[c.name] = s.MinFloat
				maxs[c.name] = s.MaxFloat
			}
		case kindString:
			if utf8.Valid(s.MinBytes) {
				mins[c.name] = string(s.MinBytes)
			}
			if !s.bad && utf8.Valid(s.MaxBytes) {
				maxs[c.name] = string(s.MaxBytes)
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
