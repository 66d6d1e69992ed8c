package tidemark

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

func TestAggAddAndMerge(t *testing.T) {
	var a Agg
	a.Add(0, false)
	if a.Count != 1 || a.Values != 0 {
		t.Fatalf("a row without a value: %+v", a)
	}
	for _, v := range []float64{3, -1, 2.5} {
		a.Add(v, true)
	}
	if a.Count != 4 || a.Values != 3 || a.Total() != 4.5 || a.Min != -1 || a.Max != 3 {
		t.Errorf("got %+v, want count 4, values 3, sum 4.5, min -1, max 3", a)
	}
	var b Agg
	b.Add(10, true)
	b.Add(0, false)
	a.Merge(b)
	if a.Count != 6 || a.Values != 4 || a.Total() != 14.5 || a.Max != 10 {
		t.Errorf("after merge got %+v", a)
	}
	var empty Agg
	a.Merge(empty)
	if a.Count != 6 || a.Total() != 14.5 {
		t.Errorf("merging an empty aggregate changed %+v", a)
	}
}

// The compensated sum does not depend on the order rows arrive in, for the
// decimal values real data carries (a plain float sum does: 0.1+0.2+0.3 !=
// 0.3+0.2+0.1).
func TestAggSumOrderIndependent(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	plainDiffers := 0
	for trial := 0; trial < 2000; trial++ {
		vals := make([]float64, 2+rng.IntN(200))
		for i := range vals {
			vals[i] = math.Round(rng.NormFloat64()*100000) / 100 // prices with cents
		}
		var fwd, rev, split Agg
		var plainF, plainR float64
		for i, v := range vals {
			fwd.Add(v, true)
			plainF += v
			rev.Add(vals[len(vals)-1-i], true)
			plainR += vals[len(vals)-1-i]
		}
		var left, right Agg
		for i, v := range vals {
			if i%3 == 0 {
				left.Add(v, true)
			} else {
				right.Add(v, true)
			}
		}
		split.Merge(right)
		split.Merge(left)
		if fwd.Total() != rev.Total() || fwd.Total() != split.Total() {
			t.Fatalf("trial %d: sums %v, %v, %v differ by order", trial, fwd.Total(), rev.Total(), split.Total())
		}
		if plainF != plainR {
			plainDiffers++
		}
	}
	if plainDiffers == 0 {
		t.Fatal("the data never made a plain sum order-dependent: the test proves nothing")
	}
}

func TestCompareResults(t *testing.T) {
	a, b := MakeKey(KeyPart{Value: "a"}), MakeKey(KeyPart{Value: "b"})
	in := []Result{
		{Window: Window{Start: 10, End: 30}, Key: a},
		{Window: Window{Start: 10, End: 20}, Key: b},
		{Window: Window{Start: 0, End: 20}, Key: b},
		{Window: Window{Start: 10, End: 20}, Key: a},
	}
	want := []Result{in[2], in[3], in[1], in[0]}
	got := slices.Clone(in)
	slices.SortFunc(got, CompareResults)
	if !slices.Equal(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
}
