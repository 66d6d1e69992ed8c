package ingest

import (
	"math"
	"math/big"
	"regexp"
	"strconv"
	"testing"
	"time"
)

func TestParseRFC3339(t *testing.T) {
	tests := []struct {
		in   string
		want string // RFC 3339 of the expected instant; "" = reject
	}{
		{"2026-01-01T10:00:00Z", "2026-01-01T10:00:00Z"},
		{"2026-01-01t10:00:00z", "2026-01-01T10:00:00Z"},
		{"2026-01-01 10:00:00Z", "2026-01-01T10:00:00Z"},
		{"2026-01-01T10:00:00.5Z", "2026-01-01T10:00:00.5Z"},
		{"2026-01-01T10:00:00,25Z", "2026-01-01T10:00:00.25Z"},
		{"2026-01-01T10:00:00.123456789123Z", "2026-01-01T10:00:00.123456Z"},
		{"2026-01-01T12:30:00+02:30", "2026-01-01T10:00:00Z"},
		{"2026-01-01T00:00:00-01:00", "2026-01-01T01:00:00Z"},
		{"1969-12-31T23:59:59.9999999Z", "1969-12-31T23:59:59.999999Z"},
		{"0001-01-01T00:00:00Z", "0001-01-01T00:00:00Z"},
		{"2024-02-29T00:00:00Z", "2024-02-29T00:00:00Z"},
		{"2023-02-29T00:00:00Z", ""},
		{"2026-13-01T00:00:00Z", ""},
		{"2026-01-01T24:00:00Z", ""},
		{"2026-01-01T10:00:60Z", ""},
		{"2026-01-01T10:00:00", ""},
		{"2026-01-01T10:00:00.Z", ""},
		{"2026-01-01T10:00:00+24:00", ""},
		{"2026-01-01X10:00:00Z", ""},
		{"2026-01-01T10:00:00ZZ", ""},
	}
	for _, tt := range tests {
		got, ok := parseRFC3339([]byte(tt.in))
		if tt.want == "" {
			if ok {
				t.Errorf("parseRFC3339(%q) = %d, want rejection", tt.in, got)
			}
			continue
		}
		w, _ := time.Parse(time.RFC3339Nano, tt.want)
		if !ok || got != w.UnixMicro() {
			t.Errorf("parseRFC3339(%q) = %d, %v, want %d", tt.in, got, ok, w.UnixMicro())
		}
	}
}

func TestParseEpoch(t *testing.T) {
	tests := []struct {
		in, unit string
		want     int64
		ok       bool
	}{
		{"1700000000", "s", 1700000000_000000, true},
		{"1700000000.5", "s", 1700000000_500000, true},
		{"1700000000.1234567", "s", 1700000000_123456, true},
		{"-1.5", "s", -1_500000, true},
		{"-1.0000001", "s", -1_000001, true},
		{"1700000000123", "ms", 1700000000123_000, true},
		{"1700000000123456", "us", 1700000000123456, true},
		{"1700000000123456789", "ns", 1700000000123456, true},
		{"-1", "ns", -1, true},
		{"-1000", "ns", -1, true},
		{"1.7e9", "s", 1700000000_000000, true},
		{"0", "s", 0, true},
		{"1e30", "s", 0, false},
		{"99999999999999999999", "s", 0, false},
		{"10000000000000", "s", 0, false},
		{"01", "s", 0, false},
		{"+1", "s", 0, false},
		{"1.", "s", 0, false},
		{"", "s", 0, false},
		{"NaN", "s", 0, false},
	}
	for _, tt := range tests {
		p, err := newTimeParser("", tt.unit)
		if err != nil {
			t.Fatal(err)
		}
		got, ok := p.parseEpoch([]byte(tt.in))
		if ok != tt.ok || ok && got != tt.want {
			t.Errorf("parseEpoch(%q, %s) = %d, %v, want %d, %v", tt.in, tt.unit, got, ok, tt.want, tt.ok)
		}
	}
}

func TestParseStringLayout(t *testing.T) {
	p, err := newTimeParser("02/01/2006 15:04:05", "ms")
	if err != nil {
		t.Fatal(err)
	}
	got, err := p.parseString([]byte("31/12/2025 23:59:58"))
	want := time.Date(2025, 12, 31, 23, 59, 58, 0, time.UTC).UnixMicro()
	if err != nil || got != want {
		t.Errorf("got %d, %v, want %d", got, err, want)
	}
	if got, err := p.parseString([]byte("1000")); err != nil || got != 1_000_000 {
		t.Errorf("numeric string with layout: got %d, %v, want 1000000", got, err)
	}
	if _, err := p.parseString([]byte("2025-12-31T23:59:58Z")); err == nil {
		t.Errorf("got nil error for a time not matching the layout, want one")
	}
}

// strictRFC3339 is RFC 3339's grammar, offset hours 00-23 (time.Parse also
// takes +24:00, which RFC 3339 and Java's OffsetDateTime refuse: the
// campaign's find).
var strictRFC3339 = regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d([.,]\d+)?(Z|[+-]([01]\d|2[0-3]):\d\d)$`)

func FuzzParseRFC3339(f *testing.F) {
	for _, s := range []string{
		"2026-01-01T10:00:00Z", "2026-01-01T10:00:00.123456789Z", "1969-12-31T23:59:59.999999999-23:59",
		"2000-02-29T00:00:00+00:00", "9999-12-31T23:59:59,9Z", "0000-01-01T00:00:00Z",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, ok := parseRFC3339([]byte(s))
		want, err := time.Parse(time.RFC3339Nano, s)
		strict := strictRFC3339.MatchString(s)
		switch {
		case ok && strict && err != nil:
			t.Fatalf("parseRFC3339(%q) = %d, time.Parse fails: %v", s, got, err)
		case !ok && strict && err == nil:
			t.Fatalf("parseRFC3339(%q) rejected, time.Parse = %v", s, want)
		case ok && err == nil && got != want.UnixMicro():
			t.Fatalf("parseRFC3339(%q) = %d, want %d", s, got, want.UnixMicro())
		}
	})
}

// FuzzParseRFC3339Cached holds the decoders' date-caching parser to
// parseRFC3339 on every time of a sequence: a date remembered from the
// previous time never changes an answer.
func FuzzParseRFC3339Cached(f *testing.F) {
	f.Add("2026-01-01T10:00:00Z", "2026-01-01T10:00:00.5+01:00", "2026-01-02T00:00:00Z")
	f.Add("2026-01-01T10:00:00Z", "2026-01-01x10:00:00Z", "2026-01-01T10:00:00Z")
	f.Add("2026-02-29T10:00:00Z", "2024-02-29T10:00:00Z", "2024-02-29 10:00:00")
	f.Add("2026-01-01T10:00:00Z", "2026-01-01", "2026-01-01T25:00:00Z")
	f.Fuzz(func(t *testing.T, a, b, c string) {
		var dc dateCache
		for _, s := range []string{a, b, c, a} {
			got, ok := dc.parseRFC3339([]byte(s))
			want, wantOK := parseRFC3339([]byte(s))
			if got != want || ok != wantOK {
				t.Fatalf("after %q, %q: cached %d, %v; parseRFC3339 %d, %v", a, b, got, ok, want, wantOK)
			}
		}
	})
}

func FuzzParseEpoch(f *testing.F) {
	for _, s := range []string{"0", "1700000000.5", "-1.0000001", "1e3", "123456789012345678"} {
		f.Add(s, uint8(0))
	}
	units := []string{"s", "ms", "us", "ns"}
	f.Fuzz(func(t *testing.T, s string, u uint8) {
		unit := units[int(u)%len(units)]
		p, _ := newTimeParser("", unit)
		got, ok := p.parseEpoch([]byte(s))
		if !ok || !validNumber([]byte(s)) || regexp.MustCompile(`[eE]`).MatchString(s) || len(s) > 18 {
			return
		}
		// Cross-check exact decimal parsing against exact rational
		// arithmetic, floored to the microsecond. (time.ParseDuration is no
		// oracle: it scales long fractions through float64, so it makes
		// 0.9009999999999999ms 901µs — the fuzzer's first find.)
		r, ok := new(big.Rat).SetString(s)
		if !ok {
			return
		}
		r.Mul(r, map[string]*big.Rat{"s": big.NewRat(1_000_000, 1), "ms": big.NewRat(1000, 1),
			"us": big.NewRat(1, 1), "ns": big.NewRat(1, 1000)}[unit])
		q := new(big.Int).Div(r.Num(), r.Denom()) // Euclidean: the floor, as the denominator is positive
		if !q.IsInt64() {
			return
		}
		if want := q.Int64(); got != want {
			t.Fatalf("parseEpoch(%q, %s) = %d, want %d", s, unit, got, want)
		}
	})
}

// FuzzParseValue holds parseShortDecimal to the general path: whenever it
// answers, the line is a valid JSON number and the value is exactly (bit
// for bit, the sign of zero included) strconv.ParseFloat's.
func FuzzParseValue(f *testing.F) {
	for _, s := range []string{"8.43", "-12", "0", "-0", "0.5", "62.7", "123456789012345", "1234567890123456", "0.000000000000001",
		"1.", ".5", "00", "-", "", "1e3", "1.5e-3", "+1", "0x10", "9007199254740993", "-0.0", "3.14159265358979"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		v, ok := parseShortDecimal(b)
		if !ok {
			return
		}
		if !validNumber(b) {
			t.Fatalf("%q: fast path took an invalid JSON number", b)
		}
		want, err := strconv.ParseFloat(string(b), 64)
		if err != nil || math.Float64bits(v) != math.Float64bits(want) {
			t.Fatalf("%q: got %v (%x), ParseFloat %v (%x), %v", b, v, math.Float64bits(v), want, math.Float64bits(want), err)
		}
		if got, ok := parseValue(b); !ok || math.Float64bits(got) != math.Float64bits(want) {
			t.Fatalf("%q: parseValue got %v, %v", b, got, ok)
		}
	})
}
