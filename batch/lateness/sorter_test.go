package lateness

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestSorterOrder puts rows in arrival order through every path of the
// sorter: rows nearly in order (a few runs per block), in random order
// (blocks sorted whole), extreme values (the packed deltas wrap around),
// ties broken by source and file names (not ids) and offsets, in memory
// and spilled.
func TestSorterOrder(t *testing.T) {
	for _, tc := range []struct {
		name      string
		n, chunk  int
		shuffle   float64 // share of rows moved to a random place
		wantSpill bool
	}{
		{"ordered", 200_000, 1 << 20, 0.0001, false},
		{"random", 100_000, 1 << 20, 1, false},
		{"ordered spilled", 50_000, 3_000, 0.001, true},
		{"random spilled", 50_000, 7_000, 1, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(tc.n), uint64(tc.chunk)))
			s := newSorter(t.TempDir(), tc.chunk)
			defer s.close()
			// Names interned in an order unlike their string order.
			for _, name := range []string{"s-b", "s-a", "f-2", "f-10", "f-1"} {
				s.id(0, name)
			}
			rows := make([]row, tc.n)
			for i := range rows {
				r := &rows[i]
				r.arrival = int64(i/3) * 1000 // three rows per arrival time: ties
				switch i % 997 {
				case 1:
					r.arrival = math.MinInt64 + int64(i)
				case 2:
					r.arrival = math.MaxInt64 - int64(i)
				}
				r.event = r.arrival - rng.Int64N(1<<40) + 1<<39
				if i%1009 == 3 {
					r.event = math.MinInt64
				}
				r.source = uint32(rng.IntN(2))
				r.file = uint32(2 + rng.IntN(3))
				r.offset = int64(i) * 137
				if i%2 == 0 {
					r.offset = -r.offset
				}
				r.batch = int64(i / 500)
				if i%1013 == 5 {
					r.batch = math.MaxInt64
				}
				r.group = uint32(rng.IntN(4))
			}
			in := slices.Clone(rows)
			for i := range in {
				if rng.Float64() < tc.shuffle {
					j := rng.IntN(len(in))
					in[i], in[j] = in[j], in[i]
				}
			}
			for _, r := range in {
				if err := s.add(r); err != nil {
					t.Fatal(err)
				}
			}
			if spilled := len(s.files) > 0; spilled != tc.wantSpill {
				t.Fatalf("spilled %d files, want spilling %v", len(s.files), tc.wantSpill)
			}
			want := slices.Clone(rows)
			slices.SortFunc(want, func(a, b row) int { return s.compare(&a, &b) })
			var got []row
			if err := s.each(func(r *row) error { got = append(got, *r); return nil }); err != nil {
				t.Fatal(err)
			}
			if len(got) != len(want) {
				t.Fatalf("got %d rows, want %d", len(got), len(want))
			}
			for i := range want {
				if got[i] != want[i] {
					t.Fatalf("row %d: got %+v, want %+v", i, got[i], want[i])
				}
			}
		})
	}
}

// TestSorterTiesByName checks that equal arrival times order by source
// name, then file name, then offset, whatever order the ids were given.
func TestSorterTiesByName(t *testing.T) {
	s := newSorter(t.TempDir(), 1<<20)
	zb, za := s.id(0, "zeta"), s.id(0, "alpha")
	f2, f1 := s.id(1, "b.log"), s.id(1, "a.log")
	for _, r := range []row{
		{arrival: 5, source: zb, file: f1, offset: 1},
		{arrival: 5, source: za, file: f2, offset: 0},
		{arrival: 5, source: za, file: f1, offset: 9},
		{arrival: 5, source: za, file: f1, offset: 3},
		{arrival: 4, source: zb, file: f2, offset: 7},
	} {
		if err := s.add(r); err != nil {
			t.Fatal(err)
		}
	}
	var got []string
	s.each(func(r *row) error {
		got = append(got, fmt.Sprintf("%d %s %s %d", r.arrival, s.names[r.source], s.names[r.file], r.offset))
		return nil
	})
	want := []string{"4 zeta b.log 7", "5 alpha a.log 3", "5 alpha a.log 9", "5 alpha b.log 0", "5 zeta a.log 1"}
	if !slices.Equal(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
}
