package ingest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"tidemark"
)

const arrival2026 = int64(1767261600_000000) // 2026-01-01T10:00:00Z

func decodeLine(t testing.TB, d Decoder, line string) tidemark.Record {
	t.Helper()
	r := tidemark.Record{Payload: []byte(line), Arrival: arrival2026}
	d.Decode(&r)
	return r
}

func TestNDJSONDecode(t *testing.T) {
	d, err := NewNDJSONDecoder(DecoderConfig{Keys: []string{"page", "user"}, ValueField: "v", ArrivalField: "recv"})
	if err != nil {
		t.Fatal(err)
	}
	at := func(s string) int64 { x, _ := time.Parse(time.RFC3339Nano, s); return x.UnixMicro() }
	key := tidemark.MakeKey
	str := func(s string) tidemark.KeyPart { return tidemark.KeyPart{Value: s} }
	null := tidemark.KeyPart{Null: true}
	tests := []struct {
		line     string
		reason   tidemark.Reason
		t        int64
		key      tidemark.Key
		value    float64
		hasValue bool
		arrival  int64
	}{
		{line: `{"event_time":"2026-01-01T09:59:00Z","page":"/a","user":7,"v":1.5}`, t: at("2026-01-01T09:59:00Z"), key: key(str("/a"), str("7")), value: 1.5, hasValue: true},
		{line: `{"event_time":1767261500,"page":"/a\u00e9\n","user":true,"v":"2"}` + "\r", t: 1767261500_000000, key: key(str("/a\u00e9\n"), str("true")), value: 2, hasValue: true},
		{line: ` { "page" : { "x" : [1, 2] } , "event_time" : "2026-01-01T09:00:00Z" , "v" : null } `, t: at("2026-01-01T09:00:00Z"), key: key(str(`{"x":[1,2]}`), null)},
		{line: `{"event_time":"2026-01-01T09:00:00Z","page":null,"event_time":"2026-01-01T09:30:00Z"}`, t: at("2026-01-01T09:30:00Z"), key: key(null, null)},
		{line: `{"event_time":"2026-01-01T09:00:00Z","recv":"2026-01-01T09:00:05Z"}`, t: at("2026-01-01T09:00:00Z"), key: key(null, null), arrival: at("2026-01-01T09:00:05Z")},
		{line: `{"e\u0076ent_time":"2026-01-01T09:00:00Z"}`, t: at("2026-01-01T09:00:00Z"), key: key(null, null)},
		{line: `{"event_time":"2026-01-01T09:00:00Z"`, reason: tidemark.ReasonMalformed},
		{line: `[{"event_time":"2026-01-01T09:00:00Z"}]`, reason: tidemark.ReasonMalformed},
		{line: `{"event_time":"2026-01-01T09:00:00Z"} x`, reason: tidemark.ReasonMalformed},
		{line: ``, reason: tidemark.ReasonBlank}, // issue 10: blank lines have their own reason
		{line: `{"event_time":01}`, reason: tidemark.ReasonMalformed},
		{line: `{"page":"/a"}`, reason: tidemark.ReasonMissingTime},
		{line: `{"event_time":null}`, reason: tidemark.ReasonMissingTime},
		{line: `{"event_time":"yesterday"}`, reason: tidemark.ReasonBadTime},
		{line: `{"event_time":true}`, reason: tidemark.ReasonBadTime},
		{line: `{"event_time":"2026-01-01T09:00:00Z","recv":"soon"}`, reason: tidemark.ReasonBadTime},
		{line: `{"event_time":"2026-01-01T09:00:00Z","v":"abc"}`, reason: tidemark.ReasonBadValue},
		{line: `{"event_time":"2026-01-01T09:00:00Z","v":[1]}`, reason: tidemark.ReasonBadValue},
		{line: `{"event_time":"2026-01-01T09:00:00Z","v":1e400}`, reason: tidemark.ReasonBadValue},
		{line: `{"event_time":"2026-01-01T11:00:01Z"}`, reason: tidemark.ReasonFutureTime},
		{line: `{"event_time":"2026-01-01T11:00:00Z"}`, t: at("2026-01-01T11:00:00Z"), key: key(null, null)},
		{line: "{\"event_time\":\"2026-01-01T09:00:00Z\",\"page\":\"\xff\"}", reason: tidemark.ReasonBadUTF8},
		{line: "{\"event_time\":\"2026-01-01T09:00:00Z\"\xff", reason: tidemark.ReasonBadUTF8},
	}
	for _, tt := range tests {
		r := decodeLine(t, d, tt.line)
		if r.Reason != tt.reason {
			t.Errorf("%s: got reason %q (%s), want %q", tt.line, r.Reason, r.Err, tt.reason)
			continue
		}
		if tt.reason != tidemark.ReasonNone {
			if r.Err == "" {
				t.Errorf("%s: got empty Err for reason %s", tt.line, r.Reason)
			}
			continue
		}
		wantArrival := tt.arrival
		if wantArrival == 0 {
			wantArrival = arrival2026
		}
		if r.EventTime != tt.t || r.Key != tt.key || r.Value != tt.value || r.HasValue != tt.hasValue || r.Arrival != wantArrival {
			t.Errorf("%s: got t=%d key=%v value=%v,%v arrival=%d, want t=%d key=%v value=%v,%v arrival=%d",
				tt.line, r.EventTime, r.Key, r.Value, r.HasValue, r.Arrival, tt.t, tt.key, tt.value, tt.hasValue, wantArrival)
		}
	}
}

func TestNDJSONDepth(t *testing.T) {
	d, _ := NewNDJSONDecoder(DecoderConfig{MaxFuture: -1})
	for _, depth := range []int{maxDepth - 1, maxDepth, maxDepth + 1} {
		nested := strings.Repeat("[", depth-1) + strings.Repeat("]", depth-1)
		line := `{"event_time":0,"x":` + nested + `}`
		r := decodeLine(t, d, line)
		want := json.Valid([]byte(line))
		if got := r.Reason != tidemark.ReasonMalformed; got != want {
			t.Errorf("depth %d: got valid %v (%s), want %v", depth, got, r.Err, want)
		}
	}
}

func TestDecoderConfigValidate(t *testing.T) {
	tests := []struct {
		cfg DecoderConfig
		ok  bool
	}{
		{DecoderConfig{}, true},
		{DecoderConfig{Format: "csv", TimeUnit: "ns", Keys: []string{"a", "b"}}, true},
		{DecoderConfig{Format: "xml"}, false},
		{DecoderConfig{TimeUnit: "h"}, false},
		{DecoderConfig{Keys: []string{"a", "a"}}, false},
		{DecoderConfig{Keys: []string{"event_time"}}, false},
		{DecoderConfig{ValueField: "v", ArrivalField: "v"}, false},
		{DecoderConfig{MaxLineBytes: -1}, false},
	}
	for _, tt := range tests {
		if err := tt.cfg.Validate(); (err == nil) != tt.ok {
			t.Errorf("Validate(%+v) = %v, want ok=%v", tt.cfg, err, tt.ok)
		}
	}
}

// expectNDJSON computes the record the decoder must produce with
// encoding/json as the reference.
func expectNDJSON(d *NDJSONDecoder, line []byte) (tidemark.Reason, tidemark.Record) {
	var want tidemark.Record
	if len(bytes.Trim(line, " \t\r\f\v")) == 0 {
		return tidemark.ReasonBlank, want
	}
	if !utf8.Valid(line) {
		return tidemark.ReasonBadUTF8, want
	}
	var m map[string]json.RawMessage
	if !json.Valid(line) || json.Unmarshal(line, &m) != nil || m == nil {
		return tidemark.ReasonMalformed, want
	}
	// raw follows a field spec's path through nested objects.
	raw := func(spec string) (json.RawMessage, jsonKind) {
		var path []string
		if f, err := tidemark.ParseField(spec); err == nil {
			path = f.Path
		}
		v, ok := json.RawMessage(nil), true
		obj := m
		for i, name := range path {
			if v, ok = obj[name]; !ok {
				return nil, kindNone
			}
			if i < len(path)-1 {
				obj = nil
				if v[0] != '{' || json.Unmarshal(v, &obj) != nil {
					return nil, kindNone
				}
			}
		}
		if v == nil {
			return nil, kindNone
		}
		switch v[0] {
		case '"':
			return v, kindString
		case '{':
			return v, kindObject
		case '[':
			return v, kindArray
		case 't':
			return v, kindTrue
		case 'f':
			return v, kindFalse
		case 'n':
			return v, kindNull
		}
		return v, kindNumber
	}
	tv, tk := raw(d.cfg.TimeField)
	switch tk {
	case kindNone, kindNull:
		return tidemark.ReasonMissingTime, want
	case kindString:
		var s string
		json.Unmarshal(tv, &s)
		us, err := d.tp.parseString([]byte(s))
		if err != nil {
			return tidemark.ReasonBadTime, want
		}
		want.EventTime = us
	case kindNumber:
		us, err := d.tp.parseNumber(tv)
		if err != nil {
			return tidemark.ReasonBadTime, want
		}
		want.EventTime = us
	default:
		return tidemark.ReasonBadTime, want
	}
	vv, vk := raw(d.cfg.ValueField)
	switch vk {
	case kindNone, kindNull:
	case kindNumber, kindString:
		b := []byte(vv)
		if vk == kindString {
			var s string
			json.Unmarshal(vv, &s)
			b = []byte(s)
		}
		v, ok := parseValue(b)
		if !ok {
			return tidemark.ReasonBadValue, want
		}
		want.Value, want.HasValue = v, true
	default:
		return tidemark.ReasonBadValue, want
	}
	var parts []tidemark.KeyPart
	for _, k := range d.cfg.Keys {
		kv, kk := raw(k)
		switch kk {
		case kindNone, kindNull:
			parts = append(parts, tidemark.KeyPart{Null: true})
		case kindString:
			var s string
			json.Unmarshal(kv, &s)
			parts = append(parts, tidemark.KeyPart{Value: s})
		case kindObject, kindArray:
			var buf bytes.Buffer
			json.Compact(&buf, kv)
			parts = append(parts, tidemark.KeyPart{Value: buf.String()})
		default:
			parts = append(parts, tidemark.KeyPart{Value: string(kv)})
		}
	}
	want.Key = tidemark.MakeKey(parts...)
	return tidemark.ReasonNone, want
}

func FuzzNDJSONDecode(f *testing.F) {
	for _, s := range []string{
		`{"t":"2026-01-01T10:00:00Z","k":"a","k2":1,"v":2.5}`,
		`{"t":1700000000,"k":{"a":[1,{"b":null}]},"v":"3"}`,
		`{"t":"2026-01-01T10:00:00.123Z","k":"\ud83d\ude00\u0041\"","v":null,"t":5}`,
		`{"\u0074":1,"k2":[true,false,null,-0.5e-3]}`,
		` {"t" : 1 , "k" : "x\\y" } `,
		`{"t":1,"k":"\ud800"}`,
		`{"t":1,"v":true}`,
		`[1]`, `{}`, `{"t":}`, `{"t":1,}`, "{\"t\":1}\r",
	} {
		f.Add([]byte(s))
	}
	d, err := NewNDJSONDecoder(DecoderConfig{TimeField: "t", Keys: []string{"k", "k2"}, ValueField: "v", MaxFuture: -1})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		r := tidemark.Record{Payload: line}
		d.Decode(&r)
		reason, want := expectNDJSON(d, line)
		if r.Reason != reason {
			t.Fatalf("%q: got reason %q (%s), want %q", line, r.Reason, r.Err, reason)
		}
		if reason != tidemark.ReasonNone {
			return
		}
		if r.EventTime != want.EventTime || r.Key != want.Key || r.HasValue != want.HasValue ||
			(r.Value != want.Value && r.Value == r.Value) {
			t.Fatalf("%q: got t=%d key=%q value=%v,%v, want t=%d key=%q value=%v,%v",
				line, r.EventTime, r.Key, r.Value, r.HasValue, want.EventTime, want.Key, want.Value, want.HasValue)
		}
	})
}

func TestNDJSONNested(t *testing.T) {
	d, err := NewNDJSONDecoder(DecoderConfig{TimeField: "meta.ts", Keys: []string{"route=request.path", "`a.b`", "http.request.method", "status"}, ValueField: "timing.total_ms", MaxFuture: -1})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		line string
		want string // key, or the reason
		v    float64
	}{
		{`{"meta":{"ts":1},"request":{"path":"/a","q":1},"a.b":"lit","http":{"request":{"method":"GET"}},"status":200,"timing":{"total_ms":2.5}}`, "/a|lit|GET|200", 2.5},
		{`{"meta":{"ts":1},"a":{"b":"nested, not literal"},"request":{"path":"/x","path":"/last"}}`, "/last|∅|∅|∅", 0},
		{`{"request":"/flat","meta":{"x":{"ts":5},"ts":1},"http":{"request":[{"method":"GET"}]}}`, "∅|∅|∅|∅", 0},
		{`{"meta":{"ts":1},"request":{"p\u0061th":"/esc\u00e9"}, "timing" : { "total_ms" : "7" } }`, "/escé|∅|∅|∅", 7},
		{`{"meta":{"ts":1},"request":{"path":{"deep":[1, 2]}}}`, `{"deep":[1,2]}|∅|∅|∅`, 0},
		{`{"meta":{},"request":{"path":"/a"}}`, "missing_time", 0},
		{`{"meta":1}`, "missing_time", 0},
		{`{"meta":{"ts":1},"timing":{"total_ms":"x"}}`, "bad_value", 0},
	} {
		r := decodeLine(t, d, tc.line)
		got := r.Key.String()
		if r.Reason != tidemark.ReasonNone {
			got = string(r.Reason)
		}
		if got != tc.want || r.Value != tc.v {
			t.Errorf("%s: got %s %v (%s), want %s %v", tc.line, got, r.Value, r.Err, tc.want, tc.v)
		}
	}
	r := decodeLine(t, d, `{"request":{"path":"/a"}}`)
	if !strings.Contains(r.Err, `no field "meta.ts"`) {
		t.Errorf("missing nested time: error %q", r.Err)
	}
}

// FuzzNDJSONNested is FuzzNDJSONDecode with nested and backticked fields,
// against encoding/json following the same paths.
func FuzzNDJSONNested(f *testing.F) {
	for _, s := range []string{
		`{"m":{"t":"2026-01-01T10:00:00Z"},"r":{"k":"a","s":{"x":1}},"a.b":true,"v":{"n":2.5}}`,
		`{"m":{"t":1700000000},"r":{"k":{"a":[1,{"b":null}]},"k":2},"v":{"n":"3"}}`,
		`{"m":{"\u0074":1,"t":2},"r":[1],"a":{"b":1},"v":null}`,
		`{"m" : { "t" : 1 } , "r" : { "s" : { "x" : "y" } } }`,
		`{"m":{"t":1},"r":{"k":"\ud800"},"v":{"n":{}}}`,
		`{"m":{"t":1},"r":{}}`, `{"m":[],"r":{"k":}}`, `{"m":{"t":1}}`,
	} {
		f.Add([]byte(s))
	}
	d, err := NewNDJSONDecoder(DecoderConfig{TimeField: "m.t", Keys: []string{"r.k", "`a.b`", "r.s.x", "a.b"}, ValueField: "v.n", MaxFuture: -1})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		r := tidemark.Record{Payload: line}
		d.Decode(&r)
		reason, want := expectNDJSON(d, line)
		if r.Reason != reason {
			t.Fatalf("%q: got reason %q (%s), want %q", line, r.Reason, r.Err, reason)
		}
		if reason != tidemark.ReasonNone {
			return
		}
		if r.EventTime != want.EventTime || r.Key != want.Key || r.HasValue != want.HasValue ||
			(r.Value != want.Value && r.Value == r.Value) {
			t.Fatalf("%q: got t=%d key=%q value=%v,%v, want t=%d key=%q value=%v,%v",
				line, r.EventTime, r.Key, r.Value, r.HasValue, want.EventTime, want.Key, want.Value, want.HasValue)
		}
	})
}

func benchLines(n int) [][]byte {
	lines := make([][]byte, n)
	base := time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC)
	for i := range lines {
		ts := base.Add(time.Duration(i) * 37 * time.Millisecond).Format(time.RFC3339Nano)
		lines[i] = fmt.Appendf(nil, `{"event_time":"%s","page":"/p/%d","user_id":%d,"latency_ms":%d.%d,"agent":"Mozilla/5.0 (X11; Linux x86_64)","tags":["a","b"]}`,
			ts, i%50, i%1000, i%300, i%10)
	}
	return lines
}

func BenchmarkDecodeNDJSON(b *testing.B) {
	d, err := NewNDJSONDecoder(DecoderConfig{Keys: []string{"page"}, ValueField: "latency_ms", MaxFuture: -1})
	if err != nil {
		b.Fatal(err)
	}
	lines := benchLines(4096)
	var size int64
	for _, l := range lines {
		size += int64(len(l)) + 1
	}
	b.SetBytes(size / int64(len(lines)))
	benchDecode(b, d, lines)
}

// BenchmarkDecodeNDJSONNested is BenchmarkDecodeNDJSON with the key and
// the value one object down (request.page, timing.latency_ms): the cost of
// the after-scan lookup in the wanted objects.
func BenchmarkDecodeNDJSONNested(b *testing.B) {
	d, err := NewNDJSONDecoder(DecoderConfig{Keys: []string{"request.page"}, ValueField: "timing.latency_ms", MaxFuture: -1})
	if err != nil {
		b.Fatal(err)
	}
	lines := make([][]byte, 4096)
	base := time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC)
	var size int64
	for i := range lines {
		ts := base.Add(time.Duration(i) * 37 * time.Millisecond).Format(time.RFC3339Nano)
		lines[i] = fmt.Appendf(nil, `{"event_time":"%s","request":{"page":"/p/%d","user_id":%d},"timing":{"latency_ms":%d.%d},"agent":"Mozilla/5.0 (X11; Linux x86_64)","tags":["a","b"]}`,
			ts, i%50, i%1000, i%300, i%10)
		size += int64(len(lines[i])) + 1
	}
	b.SetBytes(size / int64(len(lines)))
	benchDecode(b, d, lines)
}

// benchDecode decodes the lines round and round, each a valid event.
func benchDecode(b *testing.B, d Decoder, lines [][]byte) {
	b.ReportAllocs()
	b.ResetTimer()
	var r tidemark.Record
	for i := 0; i < b.N; i++ {
		r.Payload = lines[i%len(lines)]
		d.Decode(&r)
		if r.Reason != tidemark.ReasonNone {
			b.Fatalf("%s: %s", r.Reason, r.Err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "lines/s")
}

func BenchmarkEncodingJSONBaseline(b *testing.B) {
	lines := benchLines(4096)
	b.ReportAllocs()
	var v struct {
		EventTime string  `json:"event_time"`
		Page      string  `json:"page"`
		Latency   float64 `json:"latency_ms"`
	}
	for i := 0; i < b.N; i++ {
		if err := json.Unmarshal(lines[i%len(lines)], &v); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "lines/s")
}

func TestHasSpecial8(t *testing.T) {
	for c := 0; c < 256; c++ {
		for pos := 0; pos < 8; pos++ {
			b := []byte("aaaaaaaa")
			b[pos] = byte(c)
			v := uint64(0)
			for i := 7; i >= 0; i-- {
				v = v<<8 | uint64(b[i])
			}
			if strSpecial[c] && !hasSpecial8(v) {
				t.Errorf("byte %#x at %d: got hasSpecial8 false, want true", c, pos)
			}
		}
	}
	if hasSpecial8(0x6161616161616161) {
		t.Errorf("got hasSpecial8 true for plain ASCII, want false")
	}
}

// TestNextSpecial checks that nextSpecial finds exactly the first special
// byte, for every special byte at every position after any prefix.
func TestNextSpecial(t *testing.T) {
	for c := 0; c < 256; c++ {
		for pos := 0; pos < 19; pos++ {
			b := []byte("abcdefghijklmnopqrstu")
			b[pos] = byte(c)
			if pos+1 < len(b) {
				b[pos+1] = '"' // a later special must not be found first
			}
			want := pos
			if !strSpecial[c] {
				want = pos + 1
			}
			if got := nextSpecial(b, 0); got != want {
				t.Errorf("byte %#x at %d: got %d, want %d", c, pos, got, want)
			}
		}
	}
	if got := nextSpecial([]byte("abcdefghijk"), 3); got != 11 {
		t.Errorf("no special: got %d, want 11", got)
	}
}

// FuzzAppendKeyBytes holds appendKeyBytes to the root encoding it copies.
// FuzzQuickStr holds scan's inlined string path to str: where quickStr
// finds a string's end, str finds the same end, without escapes.
func FuzzQuickStr(f *testing.F) {
	f.Add([]byte(`"event_time":"2026-01-01T00:00:00.055Z","page":"/p/76"`), uint8(1))
	f.Add([]byte(`"a\"b"      `), uint8(1))
	f.Add([]byte("\"caf\xc3\xa9\" and more bytes"), uint8(1))
	f.Add([]byte("\"tab\there\"........"), uint8(1))
	f.Add([]byte(`"short"`), uint8(1))
	f.Fuzz(func(t *testing.T, b []byte, at uint8) {
		var d NDJSONDecoder
		for i := int(at) % (len(b) + 1); i <= len(b); i++ {
			j := quickStr(b, i)
			if j < 0 {
				continue
			}
			e, esc, ok := d.str(b, i)
			if e != j || esc || !ok {
				t.Fatalf("%q at %d: quickStr %d, str %d, %v, %v", b, i, j, e, esc, ok)
			}
		}
	})
}

func FuzzAppendKeyBytes(f *testing.F) {
	f.Add([]byte("prefix"), []byte(""))
	f.Add([]byte{}, []byte("a value longer than thirty-two bytes, past the stack buffer"))
	f.Add([]byte{0, 1}, bytes.Repeat([]byte{0x80}, 200))
	f.Fuzz(func(t *testing.T, dst, v []byte) {
		got := appendKeyBytes(bytes.Clone(dst), v)
		want := tidemark.AppendKeyPart(bytes.Clone(dst), string(v), false)
		if !bytes.Equal(got, want) {
			t.Errorf("got %x, want %x", got, want)
		}
	})
}

// hasSpecial8 reports whether any of 8 bytes may be special inside a string
// ('"', '\\', a control character or a non-ASCII byte). It may report false
// positives (the byte loop then decides), never false negatives.
func hasSpecial8(v uint64) bool { return special8(v) != 0 }

// FuzzNDJSONDecodeSequence decodes the lines of the input with one
// decoder, which remembers the field names of the lines before (prev),
// and each line again with a fresh decoder: the records must be equal.
func FuzzNDJSONDecodeSequence(f *testing.F) {
	f.Add([]byte("{\"t\":1,\"k\":\"a\",\"v\":2}\n{\"t\":2,\"k\":\"b\",\"v\":3}\n{\"t\" :3,\"k\":\"c\"}\n{\"t\":4,\"kk\":1,\"k\":\"d\"}\n{\"t\":5,\"k\u00e9\":1,\"k\":\"e\"}\n{\"t\":6,\"k\":\"e\"}"))
	f.Add([]byte("{\"v\":1,\"t\":2}\n{\"v\":1,\"t\"}\n{\"v\":1,\"t\":\n{\"v\":1,\"t\":3}\n{\"\\u0074\":4}\n{\"v\":1,\"t\":5,\"k\":[1]}"))
	cfg := DecoderConfig{TimeField: "t", Keys: []string{"k"}, ValueField: "v", MaxFuture: -1}
	f.Fuzz(func(t *testing.T, in []byte) {
		seq, err := NewNDJSONDecoder(cfg)
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range bytes.Split(in, []byte("\n")) {
			fresh, err := NewNDJSONDecoder(cfg)
			if err != nil {
				t.Fatal(err)
			}
			got, want := tidemark.Record{Payload: line}, tidemark.Record{Payload: line}
			seq.Decode(&got)
			fresh.Decode(&want)
			if got.Reason != want.Reason || got.Err != want.Err || got.EventTime != want.EventTime || got.Key != want.Key ||
				got.HasValue != want.HasValue || got.Value != want.Value && got.Value == got.Value {
				t.Fatalf("%q after %q:\ngot  %+v\nwant %+v", line, in, got, want)
			}
		}
	})
}

// TestDecodePre1970: times at and before the epoch are ordinary times, as
// RFC 3339 and as (negative) epoch numbers (issue 30).
func TestDecodePre1970(t *testing.T) {
	for _, tc := range []struct {
		unit, line string
		want       int64
	}{
		{"s", `{"event_time":"1969-12-31T23:59:59.5Z"}`, -500_000},
		{"s", `{"event_time":"1970-01-01T00:00:00Z"}`, 0},
		{"s", `{"event_time":"1960-01-01T00:00:00+01:00"}`, time.Date(1959, 12, 31, 23, 0, 0, 0, time.UTC).UnixMicro()},
		{"s", `{"event_time":0}`, 0},
		{"s", `{"event_time":-1}`, -1_000_000},
		{"ms", `{"event_time":-1500}`, -1_500_000},
		{"s", `{"event_time":-0.25}`, -250_000},
	} {
		d, err := NewNDJSONDecoder(DecoderConfig{TimeUnit: tc.unit})
		if err != nil {
			t.Fatal(err)
		}
		r := tidemark.Record{Payload: []byte(tc.line), Arrival: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixMicro()}
		d.Decode(&r)
		if r.Reason != tidemark.ReasonNone || r.EventTime != tc.want {
			t.Errorf("%s (%s): got %d %s %s, want %d", tc.line, tc.unit, r.EventTime, r.Reason, r.Err, tc.want)
		}
	}
}
