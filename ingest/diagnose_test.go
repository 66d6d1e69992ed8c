package ingest

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"tidemark"
)

// arrival is when the test lines were read: 2026-01-01T12:00:00Z.
var diagArrival = time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC).UnixMicro()

// decodeLines decodes lines as a source would (the CSV header is the first
// line), for Diagnose.
func decodeLines(t *testing.T, cfg DecoderConfig, lines []string) ([]tidemark.Record, map[string][]byte) {
	t.Helper()
	var dec Decoder
	var headers map[string][]byte
	if cfg.Format == FormatCSV {
		d, err := NewCSVDecoder(cfg, []byte(lines[0]))
		if err != nil {
			t.Fatal(err)
		}
		dec, headers, lines = d, map[string][]byte{"app.csv": []byte(lines[0])}, lines[1:]
	} else {
		d, err := NewDecoder(cfg)
		if err != nil {
			t.Fatal(err)
		}
		dec = d
	}
	recs := make([]tidemark.Record, len(lines))
	for i, l := range lines {
		recs[i] = tidemark.Record{Source: "logs", File: "app.csv", Offset: int64(i), Payload: []byte(l), Arrival: diagArrival}
		dec.Decode(&recs[i])
	}
	return recs, headers
}

// accessLog is an app's JSON access log as people have them: ts with
// milliseconds and an offset, nested request fields.
func accessLog(n int, ts func(i int) string) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf(`{"ts":%s,"path":"/p%d","status":%d,"latency_ms":%d.5,"user":"u%d","request":{"method":"GET"}}`, ts(i), i%3, 200+i%2*300, i, i%4)
	}
	return out
}

func rfcTS(i int) string {
	return fmt.Sprintf(`"2026-01-01T13:%02d:00.123+02:00"`, i%60)
}

func TestDiagnose(t *testing.T) {
	msTS := func(i int) string { return fmt.Sprint(time.Date(2026, 1, 1, 11, i%60, 0, 123e6, time.UTC).UnixMilli()) }
	sTS := func(i int) string { return fmt.Sprint(time.Date(2026, 1, 1, 11, i%60, 0, 0, time.UTC).Unix()) }
	withEventTime := func(lines []string) []string {
		out := make([]string, len(lines))
		for i, l := range lines {
			out[i] = strings.Replace(l, `"ts":`, `"event_time":`, 1)
		}
		return out
	}
	tests := []struct {
		name    string
		cfg     DecoderConfig
		lines   []string
		problem string // "" = no mistake
		hint    string
	}{
		{"right flags", DecoderConfig{TimeField: "ts", Keys: []string{"path"}, ValueField: "latency_ms"}, accessLog(60, rfcTS), "", ""},
		{"wrong time field", DecoderConfig{Keys: []string{"path"}}, accessLog(60, rfcTS),
			"60 of the first 60 lines would be quarantined as missing_time",
			`no "event_time" in the lines; they have ts, path, status, latency_ms, user, request.method: --time-field ts`},
		{"wrong time field, epoch ms", DecoderConfig{}, accessLog(20, msTS),
			"missing_time", "--time-field ts --time-unit ms"},
		{"epoch ms read as seconds", DecoderConfig{}, withEventTime(accessLog(20, msTS)),
			"20 of the first 20 lines would be quarantined as future_time",
			"looks like epoch milliseconds: --time-unit ms"},
		{"epoch seconds read as ms", DecoderConfig{TimeUnit: "ms"}, withEventTime(accessLog(20, sTS)),
			"20 of the first 20 events are dated more than 30 years before they were read (the first 1970-01-21",
			"1767265200 looks like epoch seconds: --time-unit s"},
		{"CSV read as NDJSON", DecoderConfig{}, []string{"ts,path,status", "2026-01-01T11:00:00Z,/a,200", "2026-01-01T11:00:01Z,/b,200", "2026-01-01T11:00:02Z,/a,500", "2026-01-01T11:00:03Z,/c,200", "2026-01-01T11:00:04Z,/a,200"},
			"6 of the first 6 lines would be quarantined as malformed", "the lines look like CSV: --format csv"},
		{"CSV with the wrong time column", DecoderConfig{Format: FormatCSV}, []string{"ts,path,status", "2026-01-01T11:00:00Z,/a,200", "2026-01-01T11:00:01Z,/b,200", "2026-01-01T11:00:02Z,/a,500", "2026-01-01T11:00:03Z,/c,200", "2026-01-01T11:00:04Z,/a,200"},
			"5 of the first 5 lines would be quarantined as missing_time", `no column "event_time" in the CSV header; it has ts, path, status: --time-field ts`},
		{"NDJSON read as CSV", DecoderConfig{Format: FormatCSV}, append([]string{`{"a":1,"b":2}`}, withEventTime(accessLog(10, rfcTS))...),
			"malformed", "the lines look like JSON objects: --format ndjson"},
		{"misspelt key", DecoderConfig{TimeField: "ts", Keys: []string{"pth"}}, accessLog(30, rfcTS),
			`--key "pth" is in none of the first 30 lines`, `no line has "pth"; fields seen: ts, path, status, latency_ms, user, request.method: --key path`},
		{"misspelt value", DecoderConfig{TimeField: "ts", Keys: []string{"path"}, ValueField: "latency"}, accessLog(30, rfcTS),
			`--value "latency" is in none of the first 30 lines`, "--value latency_ms"},
		{"key null in every line is data", DecoderConfig{TimeField: "ts", Keys: []string{"user"}}, strings.Split(strings.ReplaceAll(strings.Join(accessLog(30, rfcTS), "\n"), `"user":"u`, `"user":null,"x":"`), "\n"), "", ""},
		{"apache times", DecoderConfig{TimeField: "ts"}, accessLog(10, func(i int) string { return fmt.Sprintf(`"01/Jan/2026:11:%02d:00 +0000"`, i) }),
			"bad_time", "--time-layout '02/Jan/2006:15:04:05 -0700'"},
		{"times in the future by a zone", DecoderConfig{TimeField: "ts"}, accessLog(10, func(i int) string { return fmt.Sprintf(`"2026-01-01T15:%02d:00Z"`, i) }),
			"future_time", "if the producer writes local time as UTC (Z), fix its zone"},
		{"half the lines bad is dirty data", DecoderConfig{TimeField: "ts"}, append(accessLog(10, rfcTS), "x", "y", "z", "{", "}", "["), "", ""},
		{"too few lines to judge", DecoderConfig{}, accessLog(4, rfcTS), "", ""},
		{"old data stays old", DecoderConfig{TimeField: "ts"}, accessLog(10, func(i int) string { return fmt.Sprintf(`"1969-07-20T20:%02d:00Z"`, i) }), "", ""},
		{"value not numeric", DecoderConfig{TimeField: "ts", ValueField: "user"}, accessLog(10, rfcTS),
			"bad_value", "fields with numbers: status, latency_ms"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			recs, headers := decodeLines(t, tc.cfg, tc.lines)
			m := Diagnose(tc.cfg, recs, headers)
			if tc.problem == "" {
				if m != nil {
					t.Fatalf("got mistake %q, want none", m)
				}
				return
			}
			if m == nil {
				t.Fatalf("got no mistake, want %q", tc.problem)
			}
			if !strings.Contains(m.Problem, tc.problem) {
				t.Errorf("problem %q lacks %q", m.Problem, tc.problem)
			}
			if !strings.Contains(m.Hint, tc.hint) {
				t.Errorf("hint %q lacks %q", m.Hint, tc.hint)
			}
		})
	}
}

func TestMissingFields(t *testing.T) {
	cfg := DecoderConfig{TimeField: "ts", Keys: []string{"path", "pth", "user"}, ValueField: "lat"}
	lines := accessLog(10, rfcTS)
	lines[3] = strings.Replace(lines[3], `"user":"u3"`, `"user":null`, 1)
	recs, _ := decodeLines(t, cfg, lines)
	got := MissingFields(cfg, recs)
	if fmt.Sprint(got) != "[pth lat]" {
		t.Errorf("got %v, want [pth lat]", got)
	}
	if got := MissingFields(DecoderConfig{TimeField: "ts", Keys: []string{"path"}}, recs); got != nil {
		t.Errorf("got %v, want nil", got)
	}
	if got := MissingFields(cfg, recs[:0]); got != nil {
		t.Errorf("no records: got %v, want nil", got)
	}
}

func TestJSONNames(t *testing.T) {
	got := jsonNames([]byte(`{"b":1,"a":{"x":[1,{"y":2}],"z":{"w":null}},"c":"s","d":{}}`))
	if want := "[b a.x a.z.w c]"; fmt.Sprint(got) != want {
		t.Errorf("got %v, want %s", got, want)
	}
}

// Diagnose reads arbitrary lines: it never panics.
func FuzzDiagnose(f *testing.F) {
	f.Add(`{"ts":1767225600123,"a":{"b":"c"}}`, "ts", "ms", false)
	f.Add("ts,a\n1,2", "ts", "s", true)
	f.Add(`{"a":[{"b":[]}],"c":{"d":{"e":{"f":{"g":1}}}}}`, "event_time", "ns", false)
	f.Fuzz(func(t *testing.T, line, tf, unit string, csv bool) {
		if _, err := unitMicros(unit); err != nil || tf == "" {
			return
		}
		cfg := DecoderConfig{TimeField: tf, TimeUnit: unit, Keys: []string{"a"}, ValueField: "v"}
		if tf == "a" || tf == "v" {
			return
		}
		lines := []string{line, line, line, line, line, line}
		if csv {
			cfg.Format = FormatCSV
			lines = append([]string{"ts,a,v"}, lines...)
		}
		recs, headers := decodeLines(t, cfg, lines)
		Diagnose(cfg, recs, headers)
		jsonNames([]byte(line))
	})
}
