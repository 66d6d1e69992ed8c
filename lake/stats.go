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

// colStats accumulates the Delta file statistics of one column.
type colStats struct {
	kind  kind
	nulls int64
	has   bool // at least one non-null value seen
	bad   bool // a value that cannot be a bound (NaN, ±Inf, invalid UTF-8, long max)
	minI  int64
	maxI  int64
	minF  float64
	maxF  float64
	minB  []byte
	maxB  []byte
}

func (s *colStats) addInt(v int64) {
	if !s.has || v < s.minI {
		s.minI = v
	}
	if !s.has || v > s.maxI {
		s.maxI = v
	}
	s.has = true
}

func (s *colStats) addFloat(v float64) {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		s.bad = true
		return
	}
	if !s.has || v < s.minF {
		s.minF = v
	}
	if !s.has || v > s.maxF {
		s.maxF = v
	}
	s.has = true
}

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
	if !s.has || bytes.Compare(b, s.minB) < 0 {
		s.minB = append(s.minB[:0], b...)
	}
	if !s.has || bytes.Compare(b, s.maxB) > 0 {
		s.maxB = append(s.maxB[:0], b...)
	}
	s.has = true
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
