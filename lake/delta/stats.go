package delta

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// Stats is the per-file statistics document carried in add.stats. Values in
// MinValues and MaxValues are as JSON decodes them with UseNumber
// (json.Number for numbers, string for strings and timestamps, nested
// map[string]any for struct columns). NullCount flattens nested struct
// columns to dotted names.
type Stats struct {
	NumRecords int64            `json:"numRecords"`
	MinValues  map[string]any   `json:"minValues,omitempty"`
	MaxValues  map[string]any   `json:"maxValues,omitempty"`
	NullCount  map[string]int64 `json:"nullCount,omitempty"`
}

// ParseStats decodes an add.stats string. An empty string is an error the
// caller usually checks for first (files may have no stats).
func ParseStats(s string) (Stats, error) {
	var w struct {
		NumRecords *int64          `json:"numRecords"`
		MinValues  map[string]any  `json:"minValues"`
		MaxValues  map[string]any  `json:"maxValues"`
		NullCount  json.RawMessage `json:"nullCount"`
	}
	dec := json.NewDecoder(bytes.NewReader([]byte(s)))
	dec.UseNumber()
	if err := dec.Decode(&w); err != nil {
		return Stats{}, fmt.Errorf("parse stats: %w", err)
	}
	if w.NumRecords == nil {
		return Stats{}, fmt.Errorf("parse stats: no numRecords")
	}
	st := Stats{NumRecords: *w.NumRecords, MinValues: w.MinValues, MaxValues: w.MaxValues}
	if !isNull(w.NullCount) {
		var nc map[string]any
		d := json.NewDecoder(bytes.NewReader(w.NullCount))
		d.UseNumber()
		if err := d.Decode(&nc); err != nil {
			return Stats{}, fmt.Errorf("parse stats nullCount: %w", err)
		}
		st.NullCount = map[string]int64{}
		if err := flattenCounts("", nc, st.NullCount); err != nil {
			return Stats{}, fmt.Errorf("parse stats nullCount: %w", err)
		}
	}
	return st, nil
}

func flattenCounts(prefix string, m map[string]any, out map[string]int64) error {
	for k, v := range m {
		switch x := v.(type) {
		case json.Number:
			n, err := x.Int64()
			if err != nil {
				return fmt.Errorf("%s%s: %w", prefix, k, err)
			}
			out[prefix+k] = n
		case map[string]any:
			if err := flattenCounts(prefix+k+".", x, out); err != nil {
				return err
			}
		case nil:
		default:
			return fmt.Errorf("%s%s: not a count: %v", prefix, k, v)
		}
	}
	return nil
}

// Encode renders the stats as the JSON string for add.stats, in Spark's
// field order (numRecords, minValues, maxValues, nullCount).
func (s Stats) Encode() (string, error) {
	b, err := marshalNoEscape(s)
	if err != nil {
		return "", fmt.Errorf("encode stats: %w", err)
	}
	return string(b), nil
}
