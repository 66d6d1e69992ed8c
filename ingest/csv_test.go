package ingest

import (
	"bytes"
	"encoding/csv"
	"fmt"
	"strings"
	"testing"
	"time"

	"tidemark"
)

func TestCSVDecode(t *testing.T) {
	d, err := NewCSVDecoder(DecoderConfig{Format: "csv", Keys: []string{"page", "ua"}, ValueField: "v"},
		[]byte("\xef\xbb\xbfevent_time,page,v,ua\r"))
	if err != nil {
		t.Fatal(err)
	}
	if got := d.Columns(); got != 4 {
		t.Fatalf("got %d columns, want 4", got)
	}
	at := func(s string) int64 { x, _ := time.Parse(time.RFC3339Nano, s); return x.UnixMicro() }
	str := func(s string) tidemark.KeyPart { return tidemark.KeyPart{Value: s} }
	null := tidemark.KeyPart{Null: true}
	tests := []struct {
		line     string
		reason   tidemark.Reason
		t        int64
		key      tidemark.Key
		value    float64
		hasValue bool
	}{
		{line: "2026-01-01T09:00:00Z,/a,1.5,curl", t: at("2026-01-01T09:00:00Z"), key: tidemark.MakeKey(str("/a"), str("curl")), value: 1.5, hasValue: true},
		{line: "2026-01-01T09:00:00Z,\"/a,\"\"b\"\"\r\nc\",,\r", t: at("2026-01-01T09:00:00Z"), key: tidemark.MakeKey(str("/a,\"b\"\nc"), null)},
		{line: "1767258000,/a,\"\",\"\"", t: at("2026-01-01T09:00:00Z"), key: tidemark.MakeKey(str("/a"), null)},
		{line: ",/a,1,x", reason: tidemark.ReasonMissingTime},
		{line: "noon,/a,1,x", reason: tidemark.ReasonBadTime},
		{line: "2026-01-01T09:00:00Z,/a,one,x", reason: tidemark.ReasonBadValue},
		{line: "2026-01-01T12:00:00Z,/a,1,x", reason: tidemark.ReasonFutureTime},
		{line: "2026-01-01T09:00:00Z,/a,1", reason: tidemark.ReasonMalformed},
		{line: "2026-01-01T09:00:00Z,/a,1,x,y", reason: tidemark.ReasonMalformed},
		{line: "2026-01-01T09:00:00Z,/a\"b,1,x", reason: tidemark.ReasonMalformed},
		{line: "2026-01-01T09:00:00Z,\"/a\"b,1,x", reason: tidemark.ReasonMalformed},
		{line: "", reason: tidemark.ReasonBlank}, // issue 10: blank lines have their own reason
		{line: "2026-01-01T09:00:00Z,/\xff,1,x", reason: tidemark.ReasonBadUTF8},
	}
	for _, tt := range tests {
		r := decodeLine(t, d, tt.line)
		if r.Reason != tt.reason {
			t.Errorf("%q: got reason %q (%s), want %q", tt.line, r.Reason, r.Err, tt.reason)
			continue
		}
		if tt.reason != tidemark.ReasonNone {
			continue
		}
		if r.EventTime != tt.t || r.Key != tt.key || r.Value != tt.value || r.HasValue != tt.hasValue {
			t.Errorf("%q: got t=%d key=%v value=%v,%v, want t=%d key=%v value=%v,%v",
				tt.line, r.EventTime, r.Key, r.Value, r.HasValue, tt.t, tt.key, tt.value, tt.hasValue)
		}
	}
}

func TestCSVBadHeader(t *testing.T) {
	d, err := NewCSVDecoder(DecoderConfig{Format: "csv"}, []byte(`event_time,"x`))
	if err != nil {
		t.Fatal(err)
	}
	if r := decodeLine(t, d, "2026-01-01T09:00:00Z,1"); r.Reason != tidemark.ReasonMalformed {
		t.Errorf("got reason %q, want malformed", r.Reason)
	}
}

func TestCSVSplitter(t *testing.T) {
	in := "a,\"b\nc\",d\n\"x\"\"\n\",y\nz\"q\n,\"\"\nlast"
	want := []string{"a,\"b\nc\",d", "\"x\"\"\n\",y", "z\"q", ",\"\"", "last"}
	var got []string
	s := newSplitter(FormatCSV)
	buf := []byte(in)
	// Feed one byte at a time to exercise resumption.
	start := 0
	for end := 1; end <= len(buf); end++ {
		if i := s.next(buf[start:end]); i >= 0 {
			got = append(got, string(buf[start:start+i]))
			start += i + 1
			s.reset()
		}
	}
	got = append(got, string(buf[start:]))
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("got %q, want %q", got, want)
	}
}

func FuzzCSVDecode(f *testing.F) {
	for _, s := range []string{
		"2026-01-01T10:00:00Z,a,1", `1,"a,b",2`, `1,"a""b",`, "1,\"a\nb\",3", `,,`, `1,a"b,2`, `1,"a"b,2`, `"1`,
	} {
		f.Add([]byte(s))
	}
	cfg := DecoderConfig{Format: "csv", TimeField: "t", Keys: []string{"k"}, ValueField: "v", MaxFuture: -1}
	d, err := NewCSVDecoder(cfg, []byte("t,k,v"))
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		r := tidemark.Record{Payload: line}
		d.Decode(&r) // must not panic, for any input
		// Without a newline in the line, the splitter must end the record at
		// the appended newline (or not at all, with a quote left open).
		end := newSplitter(FormatCSV).next(append(bytes.Clone(line), '\n'))
		if !bytes.ContainsRune(line, '\n') && end != len(line) && end != -1 {
			t.Fatalf("%q: splitter ended the record at %d", line, end)
		}
		if end != len(line) || len(line) == 0 || bytes.ContainsRune(line, '\r') {
			return // not one record, or a case where encoding/csv differs on purpose
		}
		cr := csv.NewReader(bytes.NewReader(line))
		cr.FieldsPerRecord = -1
		rec, cerr := cr.Read()
		derr := d.split(line)
		if (cerr != nil) != (derr != nil) {
			t.Fatalf("%q: got error %v, encoding/csv %v", line, derr, cerr)
		}
		if cerr != nil {
			return
		}
		var got []string
		for i := 0; i < len(d.bounds)/2; i++ {
			got = append(got, string(d.field(i)))
		}
		if strings.Join(got, "\x00") != strings.Join(rec, "\x00") || len(got) != len(rec) {
			t.Fatalf("%q: got fields %q, encoding/csv %q", line, got, rec)
		}
	})
}

func BenchmarkDecodeCSV(b *testing.B) {
	d, err := NewCSVDecoder(DecoderConfig{Format: "csv", Keys: []string{"page"}, ValueField: "latency_ms", MaxFuture: -1},
		[]byte("event_time,page,user_id,latency_ms,agent"))
	if err != nil {
		b.Fatal(err)
	}
	lines := make([][]byte, 4096)
	base := time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC)
	for i := range lines {
		lines[i] = fmt.Appendf(nil, `%s,/p/%d,%d,%d.%d,"Mozilla/5.0 (X11, Linux x86_64)"`,
			base.Add(time.Duration(i)*37*time.Millisecond).Format(time.RFC3339Nano), i%50, i%1000, i%300, i%10)
	}
	b.SetBytes(int64(len(lines[0]) + 1))
	benchDecode(b, d, lines)
}

// TestCSVDottedHeader: CSV has no nesting; a field path names the header
// of its segments joined by dots, quoted or not.
func TestCSVDottedHeader(t *testing.T) {
	d, err := NewCSVDecoder(DecoderConfig{Format: "csv", TimeField: "meta.ts", Keys: []string{"request.path", "m=`http.method`"}, ValueField: "timing.ms", MaxFuture: -1},
		[]byte("meta.ts,request.path,http.method,timing.ms"))
	if err != nil {
		t.Fatal(err)
	}
	r := tidemark.Record{Payload: []byte("1767258000,/a,GET,2.5")}
	d.Decode(&r)
	want := tidemark.MakeKey(tidemark.KeyPart{Value: "/a"}, tidemark.KeyPart{Value: "GET"})
	if r.Reason != tidemark.ReasonNone || r.Key != want || r.Value != 2.5 || r.EventTime != 1767258000_000000 {
		t.Errorf("got %q %s %v %d (%s)", r.Key, r.Reason, r.Value, r.EventTime, r.Err)
	}
}
