package tidemark

import (
	"slices"
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
