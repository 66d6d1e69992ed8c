package tidemark

import (
	"cmp"
	"strings"
	"testing"
)

// compareByParts is the reference for Key.Compare: decode, then compare
// part by part (null first), then by the number of parts.
func compareByParts(k, other Key) int {
	pa, pb := k.Parts(), other.Parts()
	for i := range min(len(pa), len(pb)) {
		switch {
		case pa[i].Null && pb[i].Null:
		case pa[i].Null:
			return -1
		case pb[i].Null:
			return 1
		default:
			if c := strings.Compare(pa[i].Value, pb[i].Value); c != 0 {
				return c
			}
		}
	}
	return cmp.Compare(len(pa), len(pb))
}

// FuzzKeyCompare checks the allocation-free Compare against decoding, on
// any bytes (malformed keys included).
func FuzzKeyCompare(f *testing.F) {
	f.Add(string(MakeKey(KeyPart{Value: "a"})), string(MakeKey(KeyPart{Value: "a"}, KeyPart{Null: true})))
	f.Add(string(MakeKey(KeyPart{Null: true})), string(MakeKey(KeyPart{Value: ""})))
	f.Add(string(MakeKey(KeyPart{Value: strings.Repeat("x", 300)})), "\x01\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01")
	f.Fuzz(func(t *testing.T, a, b string) {
		if got, want := Key(a).Compare(Key(b)), compareByParts(Key(a), Key(b)); got != want {
			t.Fatalf("Compare(%q, %q) = %d, want %d", a, b, got, want)
		}
	})
}

func TestKeyCompareAllocs(t *testing.T) {
	a := MakeKey(KeyPart{Value: "/page/1"}, KeyPart{Null: true}, KeyPart{Value: "x"})
	b := MakeKey(KeyPart{Value: "/page/1"}, KeyPart{Null: true}, KeyPart{Value: "y"})
	if n := testing.AllocsPerRun(100, func() { a.Compare(b) }); n != 0 {
		t.Errorf("Compare allocates %v times, want 0", n)
	}
}
