package tidemark

import (
	"cmp"
	"encoding/binary"
	"slices"
	"strings"
	"testing"
)

func TestKeyRoundTrip(t *testing.T) {
	cases := [][]KeyPart{
		nil,
		{{Value: ""}},
		{{Null: true}},
		{{Value: "/a"}, {Null: true}, {Value: "é|x"}},
		{{Value: string(make([]byte, 300))}},
	}
	for _, parts := range cases {
		got := MakeKey(parts...).Parts()
		if !slices.Equal(got, parts) {
			t.Errorf("MakeKey(%v).Parts() = %v", parts, got)
		}
	}
}

func TestKeyCompare(t *testing.T) {
	// Sorted as results are printed: part by part, null first, then by value
	// (not by the encoding's length prefix).
	sorted := []Key{
		MakeKey(KeyPart{Null: true}),
		MakeKey(KeyPart{Value: "/cart"}),
		MakeKey(KeyPart{Value: "/checkout"}),
		MakeKey(KeyPart{Value: "/home"}),
		MakeKey(KeyPart{Value: "/home"}, KeyPart{Null: true}),
		MakeKey(KeyPart{Value: "/home"}, KeyPart{Value: "eu"}),
	}
	for i := range sorted {
		for j := range sorted {
			want := 0
			if i < j {
				want = -1
			} else if i > j {
				want = 1
			}
			if got := sorted[i].Compare(sorted[j]); got != want {
				t.Errorf("%s.Compare(%s) = %d, want %d", sorted[i], sorted[j], got, want)
			}
		}
	}
}

// refParts is the decoding Parts had before it decoded in place: the
// reference for the fuzz test below.
func refParts(k Key) []KeyPart {
	var parts []KeyPart
	s := string(k)
	for len(s) > 0 {
		if s[0] == 0 {
			parts = append(parts, KeyPart{Null: true})
			s = s[1:]
			continue
		}
		n, w := binary.Uvarint([]byte(s[1:min(len(s), 11)]))
		if w <= 0 || uint64(len(s)-1-w) < n {
			return parts
		}
		start := 1 + w
		parts = append(parts, KeyPart{Value: s[start : start+int(n)]})
		s = s[start+int(n):]
	}
	return parts
}

// refCompare orders decoded parts: null first, then by value, then by count.
func refCompare(pa, pb []KeyPart) int {
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

// FuzzKeyCompare checks the in-place decoding against the reference on
// arbitrary (also malformed) encodings.
func FuzzKeyCompare(f *testing.F) {
	f.Add([]byte(MakeKey(KeyPart{Value: "/a"}, KeyPart{Null: true})), []byte(MakeKey(KeyPart{Value: "/a"})))
	f.Add([]byte{1, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02}, []byte{1, 3, 'a'})
	f.Add([]byte{}, []byte{0})
	f.Fuzz(func(t *testing.T, a, b []byte) {
		ka, kb := Key(a), Key(b)
		pa, pb := refParts(ka), refParts(kb)
		if got := ka.Parts(); !slices.Equal(got, pa) {
			t.Fatalf("Parts(%q) = %v, want %v", a, got, pa)
		}
		want := refCompare(pa, pb)
		if ka == kb {
			want = 0
		}
		if got := ka.Compare(kb); got != want {
			t.Fatalf("Compare(%q, %q) = %d, want %d", a, b, got, want)
		}
	})
}

func TestKeyCompareAllocatesNothing(t *testing.T) {
	a := MakeKey(KeyPart{Value: "/home"}, KeyPart{Value: "eu"}, KeyPart{Null: true})
	b := MakeKey(KeyPart{Value: "/home"}, KeyPart{Value: "eu"}, KeyPart{Value: "x"})
	if n := testing.AllocsPerRun(100, func() { a.Compare(b) }); n != 0 {
		t.Errorf("Compare allocates %v times per call, want 0", n)
	}
}

// BenchmarkKeyCompare compares two-part keys that share their first part,
// as sorting per-page-and-user windows does.
func BenchmarkKeyCompare(b *testing.B) {
	x := MakeKey(KeyPart{Value: "/products/42"}, KeyPart{Value: "u12345"})
	y := MakeKey(KeyPart{Value: "/products/42"}, KeyPart{Value: "u12346"})
	for b.Loop() {
		if x.Compare(y) >= 0 {
			b.Fatal("order")
		}
	}
}
