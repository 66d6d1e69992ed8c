package ingest

// The diagnosis's own reading of lines (diagnose.go): the fields an NDJSON
// line or a CSV record holds, by name, and the names nearest a misspelt one.
// It is encoding/json and encoding/csv, not the stream's decoders: it runs
// on at most diagnoseSample lines of a first batch, and must list every
// field, which the decoders skip.

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"slices"
	"strings"

	"tidemark"
)

// jsonRow parses an NDJSON line into its fields, nested objects flattened
// to dotted paths; nil if it is not a JSON object.
func jsonRow(line []byte) map[string]any {
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.UseNumber()
	var obj map[string]any
	if dec.Decode(&obj) != nil || obj == nil {
		return nil
	}
	row := map[string]any{}
	flatten("", obj, row, 0)
	return row
}

func flatten(prefix string, obj map[string]any, into map[string]any, depth int) {
	for k, v := range obj {
		name := k
		if prefix != "" {
			name = prefix + "." + k
		}
		if sub, ok := v.(map[string]any); ok && depth < 4 {
			flatten(name, sub, into, depth+1)
			continue
		}
		into[name] = v
	}
}

// jsonNames lists the (flattened) field names of an NDJSON line in the
// order they appear in it.
func jsonNames(line []byte) []string {
	dec := json.NewDecoder(bytes.NewReader(line))
	var names []string
	var walk func(prefix string, depth int) bool
	walk = func(prefix string, depth int) bool {
		for dec.More() {
			tok, err := dec.Token()
			if err != nil {
				return false
			}
			name, _ := tok.(string)
			if prefix != "" {
				name = prefix + "." + name
			}
			tok, err = dec.Token()
			if err != nil {
				return false
			}
			d, isDelim := tok.(json.Delim)
			switch {
			case isDelim && d == '{' && depth < 4:
				if !walk(name, depth+1) {
					return false
				}
				if _, err := dec.Token(); err != nil { // the closing }
					return false
				}
			case isDelim:
				names = append(names, name)
				if !skipRest(dec) {
					return false
				}
			default:
				names = append(names, name)
			}
		}
		return true
	}
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil
	}
	walk("", 0)
	return names
}

// skipRest skips the rest of an array or object whose opening delimiter
// was just read, closing delimiter included.
func skipRest(dec *json.Decoder) bool {
	for depth := 1; depth > 0; {
		tok, err := dec.Token()
		if err != nil {
			return false
		}
		if d, ok := tok.(json.Delim); ok {
			if d == '{' || d == '[' {
				depth++
			} else {
				depth--
			}
		}
	}
	return true
}

// csvNames splits a CSV header line.
func csvNames(header []byte) []string {
	rec, err := csv.NewReader(bytes.NewReader(bytes.TrimPrefix(header, []byte("\xef\xbb\xbf")))).Read()
	if err != nil {
		return nil
	}
	return rec
}

// csvRow parses a CSV record under its header; nil if it does not fit.
func csvRow(header, line []byte) map[string]any {
	names := csvNames(header)
	r := csv.NewReader(bytes.NewReader(line))
	r.FieldsPerRecord = -1
	rec, err := r.Read()
	if err != nil || names == nil || len(rec) != len(names) {
		return nil
	}
	row := make(map[string]any, len(names))
	for i, n := range names {
		row[n] = rec[i]
	}
	return row
}

// closest returns the name in names nearest to name within a small edit
// distance (ignoring case), or the one name that starts with it; or "".
func closest(names []string, name string) string {
	if slices.Contains(names, name) {
		return ""
	}
	var prefixed []string
	for _, n := range names {
		if len(name) >= 3 && strings.HasPrefix(strings.ToLower(n), strings.ToLower(name)) {
			prefixed = append(prefixed, n)
		}
	}
	if len(prefixed) == 1 {
		return prefixed[0]
	}
	best, bestD := "", 1<<30
	for _, n := range names {
		if d := tidemark.EditDistance(strings.ToLower(n), strings.ToLower(name)); d < bestD {
			best, bestD = n, d
		}
	}
	if bestD <= max(1, min(3, len(name)/3)) {
		return best
	}
	return ""
}
