package ingest

import (
	"regexp"
	"testing"
	"time"

	"tidemark"
)

// A space for the T (RFC 3339 §5.6, Spark's default timestamp form) with
// no zone is UTC; with a T the zone stays required.
func TestParseSQLTime(t *testing.T) {
	tests := []struct {
		in   string
		want string // RFC 3339 of the expected instant; "" = reject
	}{
		{"2024-01-01 10:03:00", "2024-01-01T10:03:00Z"},
		{"2024-01-01 10:03:00.25", "2024-01-01T10:03:00.25Z"},
		{"2024-01-01 10:03:00,5", "2024-01-01T10:03:00.5Z"},
		{"2024-01-01 10:03:00+01:00", "2024-01-01T09:03:00Z"},
		{"2024-01-01T10:03:00", ""},
		{"2024-01-01 10:03", ""},
		{"2024-01-01 10:03:00.", ""},
		{"2024-01-01 10:03:00 ", ""},
		{"2024-02-30 10:03:00", ""},
	}
	for _, tt := range tests {
		got, ok := parseRFC3339([]byte(tt.in))
		if tt.want == "" {
			if ok {
				t.Errorf("parseRFC3339(%q) = %s, want rejection", tt.in, tidemark.FormatTime(got))
			}
			continue
		}
		want, _ := time.Parse(time.RFC3339Nano, tt.want)
		if !ok || got != want.UnixMicro() {
			t.Errorf("parseRFC3339(%q) = %s, %v, want %s", tt.in, tidemark.FormatTime(got), ok, tt.want)
		}
	}
}

var sqlTime = regexp.MustCompile(`^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(\.\d+)?$`)

// FuzzParseSQLTime cross-checks the zone-less space form against
// time.Parse in UTC.
func FuzzParseSQLTime(f *testing.F) {
	for _, s := range []string{"2024-01-01 10:03:00", "2024-01-01 10:03:00.123456789", "0001-01-01 00:00:00", "1999-12-31 23:59:59.9"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, ok := parseRFC3339([]byte(s))
		if !sqlTime.MatchString(s) {
			return
		}
		want, err := time.Parse("2006-01-02 15:04:05.999999999", s)
		switch {
		case ok && err != nil:
			t.Fatalf("parseRFC3339(%q) = %d, time.Parse fails: %v", s, got, err)
		case !ok && err == nil:
			t.Fatalf("parseRFC3339(%q) rejected, time.Parse = %v", s, want)
		case ok && got != want.UnixMicro():
			t.Fatalf("parseRFC3339(%q) = %d, want %d", s, got, want.UnixMicro())
		}
	})
}

// Events before --min-event-time are too_old; blank lines are blank, in
// NDJSON and CSV alike.
func TestFloorAndBlankLines(t *testing.T) {
	floor := time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)
	cfg := DecoderConfig{MinEventTime: floor, MaxFuture: -1}
	nd, err := NewNDJSONDecoder(cfg)
	if err != nil {
		t.Fatal(err)
	}
	csvCfg := cfg
	csvCfg.Format = FormatCSV
	cd, err := NewCSVDecoder(csvCfg, []byte("event_time,page"))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		dec    Decoder
		line   string
		reason tidemark.Reason
	}{
		{nd, `{"event_time":"0001-01-01T00:00:00Z"}`, tidemark.ReasonTooOld},
		{nd, `{"event_time":"2019-12-31 23:59:59.999999"}`, tidemark.ReasonTooOld},
		{nd, `{"event_time":"2020-01-01 00:00:00"}`, tidemark.ReasonNone},
		{nd, `{"event_time":0}`, tidemark.ReasonTooOld},
		{nd, ``, tidemark.ReasonBlank},
		{nd, " \t\r", tidemark.ReasonBlank},
		{nd, ` {"event_time":"2024-01-01 10:03:00"}`, tidemark.ReasonNone},
		{nd, ` x`, tidemark.ReasonMalformed},
		{cd, `2019-06-01T00:00:00Z,/a`, tidemark.ReasonTooOld},
		{cd, `2024-01-01 10:03:00,/a`, tidemark.ReasonNone},
		{cd, ``, tidemark.ReasonBlank},
		{cd, "\r", tidemark.ReasonBlank},
	}
	for _, tt := range tests {
		r := decodeLine(t, tt.dec, tt.line)
		if r.Reason != tt.reason {
			t.Errorf("%T %q: got reason %q (%s), want %q", tt.dec, tt.line, r.Reason, r.Err, tt.reason)
		}
	}
	// Without a floor, year 1 is an event (as before).
	plain, _ := NewNDJSONDecoder(DecoderConfig{MaxFuture: -1})
	if r := decodeLine(t, plain, `{"event_time":"0001-01-01T00:00:00Z"}`); !r.Valid() {
		t.Errorf("no floor: got %s, want a valid event", r.Reason)
	}
}
