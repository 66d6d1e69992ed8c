package tidemark

import (
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"
)

func testList(t testing.TB) AggList {
	t.Helper()
	l, err := ParseAggs([]string{"avg(lat)", "p50(lat)", "p95(lat)", "p99.9(lat)", "p0(lat)", "p100(lat)", "sum(bytes)", "min(bytes)", "max(bytes)", "count_distinct(user)"})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// row makes one record's inputs: lat, bytes, user (as text).
func row(lat, bytes float64, user string, hasBytes bool) []AggValue {
	return []AggValue{{Num: lat, Present: true}, {Num: bytes, Present: hasBytes}, {Text: user, Present: user != ""}}
}

// sketchRank is the value at the rank DDSketch states its accuracy for,
// floor((n-1)q) of the sorted values.
func sketchRank(sorted []float64, q float64) float64 {
	return sorted[int(q*float64(len(sorted)-1))]
}

// quantileDisc is DuckDB's quantile_disc: index max(1, ⌈n·q⌉) − 1.
func quantileDisc(sorted []float64, q float64) float64 {
	return sorted[max(1, int(math.Ceil(float64(len(sorted))*q-1e-9)))-1]
}

// near reports whether v is within rel of a value between the sketch's
// rank and quantile_disc's (the live estimate's stated error).
func near(v float64, sorted []float64, q, rel float64) bool {
	lo, hi := min(sketchRank(sorted, q), quantileDisc(sorted, q)), max(sketchRank(sorted, q), quantileDisc(sorted, q))
	return v >= lo*(1-rel) && v <= hi*(1+rel)
}

func TestAggStateValues(t *testing.T) {
	l := testList(t)
	rng := rand.New(rand.NewPCG(1, 2))
	s := l.NewState()
	var lats, bytes []float64
	users := map[string]bool{}
	for i := range 20000 {
		lat := math.Exp(rng.NormFloat64()*1.5 + 3) // long-tailed, like latencies
		b := float64(rng.IntN(10000))
		u := "u" + strconv.Itoa(rng.IntN(5000))
		has := i%3 != 0
		l.Add(s, row(lat, b, u, has))
		lats = append(lats, lat)
		if has {
			bytes = append(bytes, b)
		}
		users[u] = true
	}
	slices.Sort(lats)
	out := l.Values(s)
	var sum float64
	for _, v := range lats {
		sum += v
	}
	check := func(i int, want, rel float64) {
		t.Helper()
		if !out[i].Valid {
			t.Errorf("%s is null", l.Specs[i])
			return
		}
		if math.Abs(out[i].V-want) > rel*math.Abs(want) {
			t.Errorf("%s = %v, want %v within %v", l.Specs[i], out[i].V, want, rel)
		}
	}
	check(0, sum/float64(len(lats)), 1e-12)
	for i, q := range map[int]float64{1: 0.5, 2: 0.95, 3: 0.999} {
		if !near(out[i].V, lats, q, QuantileAccuracy) {
			t.Errorf("%s = %v, sketch rank %v, quantile_disc %v", l.Specs[i], out[i].V, sketchRank(lats, q), quantileDisc(lats, q))
		}
	}
	check(4, lats[0], 0)
	check(5, lats[len(lats)-1], 0)
	var bsum float64
	for _, v := range bytes {
		bsum += v
	}
	check(6, bsum, 0)
	check(7, slices.Min(bytes), 0)
	check(8, slices.Max(bytes), 0)
	check(9, float64(len(users)), 3*DistinctError)
	if got := s.Absorbed(); len(got) != 1 || got[0] != int64(len(lats)) {
		t.Errorf("Absorbed() = %v, want [%d]", got, len(lats))
	}
}

func TestAggStateEmpty(t *testing.T) {
	l := testList(t)
	s := l.NewState()
	l.Add(s, []AggValue{{}, {}, {}})
	for i, o := range l.Values(s) {
		if l.Specs[i].Func == AggDistinct {
			if !o.Valid || o.V != 0 {
				t.Errorf("%s over no values = %v, want 0", l.Specs[i], o)
			}
		} else if o.Valid {
			t.Errorf("%s over no values = %v, want null", l.Specs[i], o)
		}
	}
}

// TestAggStateMerge: states merged in any grouping give what one state
// fed every row gives, and survive encoding on the way.
func TestAggStateMerge(t *testing.T) {
	l := testList(t)
	rng := rand.New(rand.NewPCG(3, 4))
	whole := l.NewState()
	parts := []*AggState{l.NewState(), l.NewState(), l.NewState()}
	for range 5000 {
		r := row(float64(rng.IntN(1000)), float64(rng.IntN(100)), "u"+strconv.Itoa(rng.IntN(300)), rng.IntN(2) == 0)
		l.Add(whole, r)
		l.Add(parts[rng.IntN(3)], r)
	}
	merged := l.NewState()
	for _, p := range parts {
		b, err := p.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		var back AggState
		if err := back.UnmarshalBinary(b); err != nil {
			t.Fatal(err)
		}
		if err := merged.Merge(&back); err != nil {
			t.Fatal(err)
		}
	}
	want, got := l.Values(whole), l.Values(merged)
	for i := range want {
		// Sums may differ in the last bits with the grouping; the rest is exact.
		if got[i].Valid != want[i].Valid || math.Abs(got[i].V-want[i].V) > 1e-9*math.Abs(want[i].V) {
			t.Errorf("%s merged = %v, whole = %v", l.Specs[i], got[i], want[i])
		}
	}
	if !slices.Equal(merged.Absorbed(), whole.Absorbed()) {
		t.Errorf("merged absorbed %v, whole %v", merged.Absorbed(), whole.Absorbed())
	}
	// Merge copies: changing the source afterwards leaves the merge as it was.
	c := l.NewState()
	if err := c.Merge(parts[0]); err != nil {
		t.Fatal(err)
	}
	before := l.Values(c)
	l.Add(parts[0], row(1e6, 1e6, "new-user", true))
	if !slices.Equal(before, l.Values(c)) {
		t.Error("a merged state changed with the state it was merged from")
	}
	other, _ := ParseAggs([]string{"avg(x)"})
	if err := c.Merge(other.NewState()); !errors.Is(err, errShape) {
		t.Errorf("merging states of different lists: %v, want errShape", err)
	}
}

func TestAggStateEncoding(t *testing.T) {
	l := testList(t)
	s := l.NewState()
	empty, err := s.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	for i := range 100 {
		l.Add(s, row(float64(i), float64(-i), strconv.Itoa(i%7), true))
	}
	b, err := s.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	var back AggState
	if err := back.UnmarshalBinary(b); err != nil {
		t.Fatal(err)
	}
	if !l.Fits(&back) || !slices.Equal(l.Values(&back), l.Values(s)) {
		t.Errorf("decoded state gives %v, want %v", l.Values(&back), l.Values(s))
	}
	if err := back.UnmarshalBinary(empty); err != nil || !slices.Equal(l.Values(&back), l.Values(l.NewState())) {
		t.Errorf("empty state round trip: %v, %v", err, l.Values(&back))
	}
	for _, bad := range [][]byte{nil, {2}, b[:len(b)-1], append(slices.Clone(b), 0)} {
		if err := back.UnmarshalBinary(bad); !errors.Is(err, ErrAggState) {
			t.Errorf("UnmarshalBinary(% x...) = %v, want ErrAggState", bad[:min(len(bad), 4)], err)
		}
	}
	t.Logf("state of 100 rows: %d bytes encoded, empty %d", len(b), len(empty))
}

func FuzzAggStateDecode(f *testing.F) {
	l, _ := ParseAggs([]string{"p95(lat)", "count_distinct(u)", "max(b)"})
	s := l.NewState()
	for i := range 50 {
		l.Add(s, []AggValue{{Num: float64(i) * 1.5, Present: true}, {Text: strconv.Itoa(i), Present: true}, {Num: float64(-i), Present: i%2 == 0}})
	}
	full, _ := s.MarshalBinary()
	empty, _ := l.NewState().MarshalBinary()
	f.Add(full)
	f.Add(empty)
	f.Add([]byte{1, 0, 0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		var s AggState
		if err := s.UnmarshalBinary(b); err != nil {
			if !errors.Is(err, ErrAggState) {
				t.Fatalf("error %v does not wrap ErrAggState", err)
			}
			return
		}
		// A state that decodes encodes, decodes again, merges and reports.
		again, err := s.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		var s2 AggState
		if err := s2.UnmarshalBinary(again); err != nil {
			t.Fatalf("re-encoded state does not decode: %v", err)
		}
		if err := s2.Merge(&s); err != nil {
			t.Fatal(err)
		}
		if l.Fits(&s) {
			l.Values(&s)
		}
	})
}

func BenchmarkAggStateAdd(b *testing.B) {
	l := testList(b)
	s := l.NewState()
	r := row(12.5, 300, "user-1", true)
	for i := 0; b.Loop(); i++ {
		r[0].Num = float64(i % 1000)
		l.Add(s, r)
	}
}

// TestAggStateSmallExact: up to smallMax values a state keeps them, so its
// percentiles are DuckDB's quantile_disc and its distinct counts exact; one
// more turns it into sketches without losing a value, by adding or merging.
func TestAggStateSmallExact(t *testing.T) {
	l := testList(t)
	for _, n := range []int{1, 2, 5, smallMax, smallMax + 1, 3 * smallMax} {
		rng := rand.New(rand.NewPCG(uint64(n), 9))
		s, merged := l.NewState(), l.NewState()
		var lats []float64
		users := map[string]bool{}
		for i := range n {
			r := row(float64(rng.IntN(1000))+0.25, 1, "u"+strconv.Itoa(rng.IntN(n)), true)
			l.Add(s, r)
			part := l.NewState()
			l.Add(part, r)
			if err := merged.Merge(part); err != nil {
				t.Fatal(err)
			}
			lats = append(lats, r[0].Num)
			users[r[2].Text] = true
			_ = i
		}
		slices.Sort(lats)
		for _, st := range []*AggState{s, merged} {
			out := l.Values(st)
			exact := n <= smallMax
			for i, q := range map[int]float64{1: 0.5, 2: 0.95, 3: 0.999} {
				want := quantileDisc(lats, q)
				if exact && out[i].V != want || !exact && !near(out[i].V, lats, q, QuantileAccuracy) {
					t.Errorf("n=%d: %s = %v, quantile_disc %v (exact: %v)", n, l.Specs[i], out[i].V, want, exact)
				}
			}
			if got := out[9].V; exact && got != float64(len(users)) || math.Abs(got-float64(len(users))) > 0.05*float64(len(users))+1 {
				t.Errorf("n=%d: distinct %v, want %d", n, got, len(users))
			}
			if got := st.Absorbed(); got[0] != int64(n) {
				t.Errorf("n=%d: absorbed %v", n, got)
			}
			var back AggState
			b, err := st.MarshalBinary()
			if err != nil {
				t.Fatal(err)
			}
			if err := back.UnmarshalBinary(b); err != nil || !slices.Equal(l.Values(&back), out) {
				t.Errorf("n=%d: round trip %v (%v), want %v", n, l.Values(&back), err, out)
			}
		}
	}
}
