package tidemark

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// TestInsertSessionOrderFree inserts the same events in random orders and
// checks the sessions are the same each time and match cutting the sorted
// events wherever the gap to the previous one is at least gap.
func TestInsertSessionOrderFree(t *testing.T) {
	for seed := range 300 {
		rng := rand.New(rand.NewPCG(uint64(seed), 7))
		gap := 1 + rng.Int64N(10)
		ts := make([]int64, 1+rng.IntN(40))
		for i := range ts {
			ts[i] = rng.Int64N(200)
		}
		sorted := slices.Clone(ts)
		slices.Sort(sorted)
		var want []Window
		for _, v := range sorted {
			if n := len(want); n > 0 && v-(want[n-1].End-gap) < gap {
				want[n-1].End = v + gap
				continue
			}
			want = append(want, Window{Start: v, End: v + gap})
		}
		for round := range 4 {
			rng.Shuffle(len(ts), func(i, j int) { ts[i], ts[j] = ts[j], ts[i] })
			var ss []Session
			if round < 2 {
				for _, v := range ts {
					ss, _ = InsertSession(ss, EventSession(v, gap, float64(v), true))
				}
			} else {
				// MergeSessions: the rows in sorted chunks of random size.
				for rest := ts; len(rest) > 0; {
					n := 1 + rng.IntN(len(rest))
					var chunk []Session
					for _, v := range rest[:n] {
						chunk = append(chunk, EventSession(v, gap, float64(v), true))
					}
					slices.SortFunc(chunk, func(a, b Session) int { return int(a.Window.Start - b.Window.Start) })
					ss, rest = MergeSessions(ss, chunk), rest[n:]
				}
			}
			var got []Window
			var n int64
			for _, s := range ss {
				got = append(got, s.Window)
				n += s.Agg.Count
			}
			if !slices.Equal(got, want) || n != int64(len(ts)) {
				t.Fatalf("seed %d gap %d: got %v (%d rows), want %v (%d rows)", seed, gap, got, n, want, len(ts))
			}
		}
	}
}

func TestEventSessionSaturates(t *testing.T) {
	if s := EventSession(MaxTime-1, 10, 0, false); s.Window.End != MaxTime || s.Agg.Count != 1 {
		t.Fatalf("got %+v", s)
	}
}
