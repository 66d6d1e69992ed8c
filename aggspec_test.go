package tidemark

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestParseAgg(t *testing.T) {
	for _, c := range []struct{ in, canon, col string }{
		{"count", "count", "count"},
		{"COUNT", "count", "count"},
		{"sum(bytes)", "sum(bytes)", "sum_bytes"},
		{"min(bytes)", "min(bytes)", "min_bytes"},
		{"max(bytes)", "max(bytes)", "max_bytes"},
		{"avg(latency_ms)", "avg(latency_ms)", "avg_latency_ms"},
		{"AVG( latency_ms )", "avg(latency_ms)", "avg_latency_ms"},
		{"p95(latency_ms)", "p95(latency_ms)", "p95_latency_ms"},
		{"p99.9(latency_ms)", "p99.9(latency_ms)", "p99_9_latency_ms"},
		{"p99.90(latency_ms)", "p99.9(latency_ms)", "p99_9_latency_ms"},
		{"p095(latency_ms)", "p95(latency_ms)", "p95_latency_ms"},
		{"p0(x)", "p0(x)", "p0_x"},
		{"p100(x)", "p100(x)", "p100_x"},
		{"p50.0(x)", "p50(x)", "p50_x"},
		{"count_distinct(user)", "count_distinct(user)", "count_distinct_user"},
		{"p99(request.latency_ms)", "p99(request.latency_ms)", "p99_latency_ms"},
		{"p99(lat=request.latency_ms)", "p99(lat=request.latency_ms)", "p99_lat"},
		{"count_distinct(`a.b`)", "count_distinct(`a.b`)", "count_distinct_a.b"},
	} {
		a, err := ParseAgg(c.in)
		if err != nil {
			t.Errorf("ParseAgg(%q): %v", c.in, err)
			continue
		}
		if got := a.String(); got != c.canon {
			t.Errorf("ParseAgg(%q).String() = %q, want %q", c.in, got, c.canon)
		}
		if got := a.Column(); got != c.col {
			t.Errorf("ParseAgg(%q).Column() = %q, want %q", c.in, got, c.col)
		}
		back, err := ParseAgg(a.String())
		if err != nil || back.String() != a.String() {
			t.Errorf("ParseAgg(%q) does not read back: %v, %v", a.String(), back, err)
		}
	}
}

func TestParseAggRefuses(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"", "want count"},
		{"median(x)", "unknown function"},
		{"p(x)", "percentile needs its number"},
		{"p101(x)", "above 100"},
		{"p-1(x)", "not a number"},
		{"p9.9.9(x)", "not a number"},
		{"p99.(x)", "not a number"},
		{"pabc(x)", "not a number"},
		{"avg()", "needs a field"},
		{"avg(x", "missing ')'"},
		{"count(x)", "count takes no field"},
		{"sum(a..b)", "empty name"},
		{"sum", "want count"},
	} {
		_, err := ParseAgg(c.in)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("ParseAgg(%q) = %v, want an error with %q", c.in, err, c.want)
		}
	}
}

func TestParseAggs(t *testing.T) {
	l, err := ParseAggs([]string{"count", "avg(latency_ms)", "p95(latency_ms)", "p99(latency_ms)", "max(bytes)", "count_distinct(user)", "count_distinct(latency_ms)"})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := strings.Join(l.Columns(), ","), "avg_latency_ms,p95_latency_ms,p99_latency_ms,max_bytes,count_distinct_user,count_distinct_latency_ms"; got != want {
		t.Errorf("columns %s, want %s", got, want)
	}
	var ins []string
	for _, in := range l.Inputs {
		ins = append(ins, in.String())
	}
	if got, want := strings.Join(ins, ","), "latency_ms,bytes,user (as text),latency_ms (as text)"; got != want {
		t.Errorf("inputs %s, want %s", got, want)
	}
	if l.nNumeric != 2 || l.nSketch != 1 || l.nDistinct != 2 {
		t.Errorf("layout %d numeric, %d sketches, %d distinct; want 2, 1, 2", l.nNumeric, l.nSketch, l.nDistinct)
	}
	b, err := json.Marshal(l)
	if err != nil {
		t.Fatal(err)
	}
	var back AggList
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if !back.Equal(l) {
		t.Errorf("JSON round trip %s gave %v", b, back.Strings())
	}
	if other, _ := ParseAggs([]string{"avg(latency_ms)"}); other.Equal(l) {
		t.Error("lists of different aggregates are Equal")
	}
	if empty, err := ParseAggs([]string{"count"}); err != nil || !empty.Empty() || empty.NewState() != nil {
		t.Errorf("--agg count alone: %v, %v; want the empty list", empty.Strings(), err)
	}
}

func TestParseAggsRefuses(t *testing.T) {
	for _, c := range []struct {
		in   []string
		want string
	}{
		{[]string{"p95(x)", "P95(x)"}, "given twice"},
		{[]string{"p95(a.x)", "p95(b.x)"}, "both make the column \"p95_x\"; name one field: --agg 'p95(b_x=b.x)'"},
		{[]string{"p95(x)", "p95.0(x)"}, "given twice"},
		{[]string{"avg(x)", "bogus"}, "want count"},
	} {
		_, err := ParseAggs(c.in)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("ParseAggs(%q) = %v, want an error with %q", c.in, err, c.want)
		}
	}
}

func FuzzParseAgg(f *testing.F) {
	for _, s := range []string{"count", "p99.9(a.b)", "count_distinct(`x.y`)", "avg(n=a.b)", "p(", "p1e3(x)"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		a, err := ParseAgg(s)
		if err != nil {
			return
		}
		back, err := ParseAgg(a.String())
		if err != nil {
			t.Fatalf("ParseAgg(%q) renders %q, which does not parse: %v", s, a.String(), err)
		}
		if back.String() != a.String() || back.Column() != a.Column() {
			t.Fatalf("ParseAgg(%q): %q / %q reads back as %q / %q", s, a.String(), a.Column(), back.String(), back.Column())
		}
		if q := a.Quantile(); a.Func == AggQuantile && (q < 0 || q > 1) {
			t.Fatalf("ParseAgg(%q): quantile %v", s, q)
		}
	})
}

func TestQuantileIndex(t *testing.T) {
	for _, c := range []struct {
		pct  string
		n    int
		want int
	}{
		{"95", 10, 9}, {"50", 10, 4}, {"50", 11, 5}, {"0", 5, 0}, {"100", 5, 4}, {"99.9", 1000, 998}, {"99.9", 1001, 999}, {"10", 5, 0}, {"30", 5, 1}, {"95", 1, 0},
		// batch's exact layer uses this rank too (these were its own cases).
		{"0", 1, 0}, {"0", 10, 0}, {"100", 10, 9}, {"50", 1, 0}, {"50", 2, 0}, {"50", 3, 1}, {"50", 4, 1},
		{"99", 100, 98}, {"99", 101, 99}, {"7", 100, 6}, {"7", 101, 7}, {"0.1", 5, 0}, {"90", 10, 8}, {"90", 11, 9},
	} {
		if got := (AggSpec{Func: AggQuantile, Pct: c.pct}).QuantileIndex(c.n); got != c.want {
			t.Errorf("p%s of %d values: index %d, want %d", c.pct, c.n, got, c.want)
		}
	}
}
