package lateness

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

func TestLnGamma(t *testing.T) {
	if got, want := lnGamma, math.Log(gamma); math.Abs(got-want) > 1e-15 {
		t.Errorf("lnGamma = %v, want %v", got, want)
	}
}

func TestSketchQuantiles(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	cases := []struct {
		name string
		gen  func() int64
	}{
		{"lognormal µs", func() int64 { return int64(math.Exp(rng.NormFloat64()*3 + 12)) }},
		{"mostly zero", func() int64 {
			if rng.IntN(10) < 7 {
				return 0
			}
			return rng.Int64N(3_600_000_000)
		}},
		{"negative and positive", func() int64 { return rng.Int64N(20_000_000) - 5_000_000 }},
		{"small integers", func() int64 { return rng.Int64N(20) }},
		{"one value", func() int64 { return 42_000_000 }},
	}
	qs := []float64{0, 0.001, 0.25, 0.5, 0.9, 0.95, 0.99, 0.999, 1}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var s Sketch
			vals := make([]int64, 100_000)
			for i := range vals {
				vals[i] = c.gen()
				s.Add(vals[i])
			}
			slices.Sort(vals)
			for _, q := range qs {
				got, want := s.Quantile(q), exactQuantile(vals, q)
				if math.Abs(got-want) > Alpha*math.Abs(want)+1e-9 {
					t.Errorf("q%v: got %v, want %v within %v", q, got, want, Alpha)
				}
			}
			if got, want := s.Count(), int64(len(vals)); got != want {
				t.Errorf("count: got %d, want %d", got, want)
			}
			pts := s.CDF()
			if got := pts[len(pts)-1].Count; got != int64(len(vals)) {
				t.Errorf("CDF ends at %d, want %d", got, len(vals))
			}
		})
	}
}

func TestSketchEmpty(t *testing.T) {
	var s Sketch
	if got := s.Quantile(0.5); got != 0 {
		t.Errorf("empty p50: got %v, want 0", got)
	}
}

func TestRoundUp(t *testing.T) {
	cases := []struct{ in, want int64 }{
		{0, 0}, {1, usSecond}, {usSecond, usSecond}, {usSecond + 1, 2 * usSecond},
		{11 * usSecond, 15 * usSecond}, {31 * usSecond, usMinute}, {61 * usMinute, 2 * usHour},
		{25 * usHour, 2 * usDay}, {400 * usDay, 400 * usDay}, {400*usDay + 1, 401 * usDay},
	}
	for _, c := range cases {
		if got := RoundUp(c.in); got != c.want {
			t.Errorf("RoundUp(%d): got %d, want %d", c.in, got, c.want)
		}
	}
}

func TestFormatDuration(t *testing.T) {
	cases := []struct {
		in   float64
		want string
	}{
		{0, "0"}, {0.000250, "250µs"}, {0.0012, "1.2ms"}, {0.012, "12ms"}, {1.5, "1.5s"},
		{10, "10s"}, {300, "5m"}, {252, "4m12s"}, {9000, "2h30m"}, {3 * 86400, "3d"}, {-2, "-2s"},
	}
	for _, c := range cases {
		if got := FormatDuration(c.in); got != c.want {
			t.Errorf("FormatDuration(%v): got %q, want %q", c.in, got, c.want)
		}
	}
}

// TestSketchMerge checks a merged sketch answers exactly as one sketch fed
// every value.
func TestSketchMerge(t *testing.T) {
	var a, b, all Sketch
	v := int64(12345)
	for i := range 5000 {
		v = v*6364136223846793005 + 1442695040888963407
		x := v >> 40
		if i%7 == 0 {
			x = -x / 3
		}
		if i%11 == 0 {
			x = 0
		}
		all.Add(x)
		if i%3 == 0 {
			a.Add(x)
		} else {
			b.Add(x)
		}
	}
	var m Sketch
	m.Merge(&a)
	m.Merge(&b)
	m.Merge(&Sketch{})
	if m.Count() != all.Count() || m.Min() != all.Min() || m.Max() != all.Max() {
		t.Fatalf("merged count/min/max %d %d %d, want %d %d %d", m.Count(), m.Min(), m.Max(), all.Count(), all.Min(), all.Max())
	}
	for _, q := range []float64{0, 0.01, 0.1, 0.5, 0.9, 0.99, 0.999, 1} {
		if got, want := m.Quantile(q), all.Quantile(q); got != want {
			t.Errorf("q%v: merged %v, want %v", q, got, want)
		}
	}
}
