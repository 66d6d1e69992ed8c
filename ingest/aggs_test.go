package ingest

import (
	"fmt"
	"strings"
	"testing"

	"tidemark"
)

func aggInputs(t testing.TB, specs ...string) []tidemark.AggInput {
	t.Helper()
	l, err := tidemark.ParseAggs(specs)
	if err != nil {
		t.Fatal(err)
	}
	return l.Inputs
}

// fieldsText renders a record's Fields for comparison: n:<number>,
// t:<text> (non-empty) or null, comma-separated.
func fieldsText(fs []tidemark.AggValue) string {
	parts := make([]string, len(fs))
	for i, v := range fs {
		switch {
		case !v.Present:
			parts[i] = "null"
		case v.Text != "":
			parts[i] = "t:" + v.Text
		default:
			parts[i] = fmt.Sprintf("n:%v", v.Num)
		}
	}
	return strings.Join(parts, ",")
}

func TestNDJSONAggFields(t *testing.T) {
	// Inputs: lat (number), req.bytes (number), user (text), lat (text).
	d, err := NewNDJSONDecoder(DecoderConfig{Keys: []string{"page"}, Aggs: aggInputs(t, "p95(lat)", "max(req.bytes)", "count_distinct(user)", "count_distinct(lat)")})
	if err != nil {
		t.Fatal(err)
	}
	const ts = `"event_time":"2026-01-01T09:00:00Z"`
	for _, c := range []struct {
		line   string
		reason tidemark.Reason
		want   string // fieldsText, or the quarantine detail's start
	}{
		{`{` + ts + `,"lat":12.5,"req":{"bytes":300},"user":"ann"}`, "", "n:12.5,n:300,t:ann,t:12.5"},
		{`{` + ts + `,"lat":"7","user":"b\u00e9"}`, "", "n:7,null,t:bé,t:7"},
		{`{` + ts + `,"lat":5e2,"user":42}`, "", "n:500,null,t:42,t:500"},
		{`{` + ts + `,"lat":null,"user":null,"req":null}`, "", "null,null,null,null"},
		{`{` + ts + `,"user":{"id": 1, "x":[true]}}`, "", `null,null,t:{"id":1,"x":[true]},null`},
		{`{` + ts + `,"user":true,"req":{"bytes":-1.5}}`, "", "null,n:-1.5,t:true,null"},
		{`{` + ts + `,"lat":"fast"}`, tidemark.ReasonBadValue, `--agg field "lat" is not a finite number: "fast"`},
		{`{` + ts + `,"req":{"bytes":[1]}}`, tidemark.ReasonBadValue, `--agg field "req.bytes" is array, not a number`},
		{`{` + ts + `,"lat":true}`, tidemark.ReasonBadValue, `--agg field "lat" is true, not a number`},
	} {
		r := decodeLine(t, d, c.line)
		if r.Reason != c.reason {
			t.Errorf("%s: reason %q (%s), want %q", c.line, r.Reason, r.Err, c.reason)
			continue
		}
		if c.reason != "" {
			if r.Err != c.want || r.Fields != nil {
				t.Errorf("%s: detail %q fields %v, want %q and none", c.line, r.Err, r.Fields, c.want)
			}
			continue
		}
		if got := fieldsText(r.Fields); got != c.want {
			t.Errorf("%s: fields %s, want %s", c.line, got, c.want)
		}
	}
	// Records keep their own Fields: decoding the next line changes none.
	a := decodeLine(t, d, `{`+ts+`,"lat":1,"user":"x"}`)
	b := decodeLine(t, d, `{`+ts+`,"lat":2,"user":"y"}`)
	if fieldsText(a.Fields) != "n:1,null,t:x,t:1" || fieldsText(b.Fields) != "n:2,null,t:y,t:2" {
		t.Errorf("fields shared between records: %s / %s", fieldsText(a.Fields), fieldsText(b.Fields))
	}
}

func TestCSVAggFields(t *testing.T) {
	d, err := NewCSVDecoder(DecoderConfig{Format: FormatCSV, Aggs: aggInputs(t, "avg(lat)", "count_distinct(user)", "max(missing)")}, []byte("event_time,lat,user"))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		line, want string
		reason     tidemark.Reason
	}{
		{"2026-01-01T09:00:00Z,12.5,ann", "n:12.5,t:ann,null", ""},
		{"2026-01-01T09:00:00Z,,", "null,null,null", ""},
		{"2026-01-01T09:00:00Z,abc,ann", `--agg field "lat" is not a finite number: "abc"`, tidemark.ReasonBadValue},
	} {
		r := decodeLine(t, d, c.line)
		got := fieldsText(r.Fields)
		if r.Reason != "" {
			got = r.Err
		}
		if r.Reason != c.reason || got != c.want {
			t.Errorf("%s: %q %s, want %q %s", c.line, r.Reason, got, c.reason, c.want)
		}
	}
}

func BenchmarkNDJSONAggs(b *testing.B) {
	d, err := NewNDJSONDecoder(DecoderConfig{Keys: []string{"page"}, Aggs: aggInputs(b, "p95(latency_ms)", "count_distinct(user)")})
	if err != nil {
		b.Fatal(err)
	}
	line := []byte(`{"event_time":"2026-01-01T09:00:00Z","page":"/home","latency_ms":12.5,"user":"u12345"}`)
	r := tidemark.Record{Arrival: arrival2026}
	for b.Loop() {
		r.Payload = line
		d.Decode(&r)
	}
}

// TestDiagnoseAggField: a misspelt --agg field, in no line of the first
// batch, stops a new stream with the field's likely name; one null in
// every line is data, and only named on the progress line (MissingFields).
func TestDiagnoseAggField(t *testing.T) {
	var lines []string
	for i := range 10 {
		lines = append(lines, fmt.Sprintf(`{"event_time":"2026-01-01T09:00:0%dZ","page":"/a","latency_ms":%d,"user":null}`, i, i))
	}
	cfg := DecoderConfig{Keys: []string{"page"}, Aggs: aggInputs(t, "p95(latency)", "count_distinct(user)")}
	recs, headers := decodeLines(t, cfg, lines)
	if got := MissingFields(cfg, recs); strings.Join(got, ",") != "latency,user" {
		t.Errorf("MissingFields = %v, want latency and user", got)
	}
	m := Diagnose(cfg, recs, headers)
	if m == nil || !strings.Contains(m.Error(), `--agg "latency" is in none of the first 10 lines`) || !strings.Contains(m.Error(), "--agg latency_ms") {
		t.Errorf("Diagnose = %v, want the --agg field named and latency_ms suggested", m)
	}
	cfg.Aggs = aggInputs(t, "p95(latency_ms)", "count_distinct(user)")
	recs, headers = decodeLines(t, cfg, lines)
	if m := Diagnose(cfg, recs, headers); m != nil {
		t.Errorf("a field null in every line stopped the stream: %v", m)
	}
}
