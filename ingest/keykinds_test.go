package ingest

import (
	"errors"
	"math"
	"strconv"
	"testing"

	"tidemark"
)

// TestNDJSONKeyKinds: number keys are canonical text (500.0 and 5e2 are
// "500") and each key part's JSON kind is on the record; strings stay text
// even when they look like numbers.
func TestNDJSONKeyKinds(t *testing.T) {
	d, err := NewNDJSONDecoder(DecoderConfig{Keys: []string{"k"}, MaxFuture: -1})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		v    string
		text string
		null bool
		kind tidemark.KeyKind
	}{
		{`500`, "500", false, tidemark.KeyInt},
		{`500.0`, "500", false, tidemark.KeyInt},
		{`5e2`, "500", false, tidemark.KeyInt},
		{`-0`, "0", false, tidemark.KeyInt},
		{`9223372036854775807`, "9223372036854775807", false, tidemark.KeyInt},
		{`9223372036854775808`, "9.223372036854776e+18", false, tidemark.KeyFloat},
		{`0.25`, "0.25", false, tidemark.KeyFloat},
		{`1.50`, "1.5", false, tidemark.KeyFloat},
		{`1e400`, "1e400", false, tidemark.KeyText},
		{`true`, "true", false, tidemark.KeyBool},
		{`false`, "false", false, tidemark.KeyBool},
		{`"500"`, "500", false, tidemark.KeyText},
		{`null`, "", true, tidemark.KeyText},
		{`[1]`, "[1]", false, tidemark.KeyText},
	} {
		r := tidemark.Record{Payload: []byte(`{"event_time":1767261500,"k":` + c.v + `}`)}
		d.Decode(&r)
		if !r.Valid() {
			t.Fatalf("%s: %s %s", c.v, r.Reason, r.Err)
		}
		want := tidemark.MakeKey(tidemark.KeyPart{Value: c.text, Null: c.null})
		if r.Key != want || r.KeyKindOf(0) != c.kind {
			t.Errorf("key %s: got %s kind %d, want %s kind %d", c.v, r.Key, r.KeyKindOf(0), want, c.kind)
		}
	}
}

// FuzzCanonNumber: a number key's canonical text parses back to the same
// value, as an int64 exactly when its kind is KeyInt, and is its own
// canonical form (canonicalising twice changes nothing).
func FuzzCanonNumber(f *testing.F) {
	for _, s := range []string{"0", "-0", "500", "500.0", "5e2", "0.25", "1e21", "9223372036854775808", "-9223372036854775808", "1e400", "1.5E-7"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, lit string) {
		if _, err := strconv.ParseFloat(lit, 64); err != nil && !errors.Is(err, strconv.ErrRange) {
			return // not a number
		}
		out, kind := canonNumber(nil, []byte(lit))
		switch kind {
		case tidemark.KeyInt:
			n, err := strconv.ParseInt(string(out), 10, 64)
			f, _ := strconv.ParseFloat(lit, 64)
			if err != nil || float64(n) != f {
				t.Fatalf("%s: int text %s (%v) is not the number", lit, out, err)
			}
		case tidemark.KeyFloat:
			g, err := strconv.ParseFloat(string(out), 64)
			f, _ := strconv.ParseFloat(lit, 64)
			if err != nil || g != f || g == math.Trunc(g) && math.Abs(g) < 1<<62 {
				t.Fatalf("%s: float text %s (%v) is not the number, or integral", lit, out, err)
			}
		case tidemark.KeyText:
			if string(out) != lit {
				t.Fatalf("%s: text kind changed the literal to %s", lit, out)
			}
			return
		}
		again, kind2 := canonNumber(nil, out)
		if string(again) != string(out) || kind2 != kind {
			t.Fatalf("%s: canonical %s is not stable: %s", lit, out, again)
		}
	})
}
