package lateness

import (
	"bytes"
	"encoding/csv"
	"encoding/xml"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"tidemark"
	"tidemark/stream/engine"
)

// TestByHourAgainstExact: per-hour percentiles against an exact
// computation on generated data with an injected outage (30% of one
// hour's events hours late); the outage hour, and only it, is marked; the
// recommendation says it is driven by it and names the budget the normal
// hours need; each hour's late share is what the stream drops with that
// budget.
func TestByHourAgainstExact(t *testing.T) {
	outage := t0 + usHour
	d := makeLake(t, genConfig{n: 24_000, sources: []string{"s1"}, lateness: 30 * usSecond, seed: 12, maxBatch: 300, outage: outage})
	rep := run(t, d, Config{Period: PeriodHour})
	g := rep.Groups[0]
	hour := func(r *tidemark.Record) string { return fmtTime(r.EventTime - mod(r.EventTime, usHour)) }
	lags, dis := map[string][]int64{}, map[string][]int64{}
	var normalDis []int64
	for _, r := range d.recs {
		h := hour(&r)
		lags[h] = append(lags[h], r.Arrival-r.EventTime)
		dis[h] = append(dis[h], r.Disorder)
		if h != fmtTime(outage) {
			normalDis = append(normalDis, r.Disorder)
		}
	}
	if len(g.Periods) != len(lags) || len(g.Periods) < 4 {
		t.Fatalf("got %d periods, want %d (at least 4)", len(g.Periods), len(lags))
	}
	slices.Sort(normalDis)
	normal := RoundUp(int64(exactQuantile(normalDis, 0.99)))
	if g.Outages == nil || g.Outages.NormalLateness != float64(normal)/1e6 {
		t.Fatalf("outages %+v, want normal lateness %s", g.Outages, FormatDuration(float64(normal)/1e6))
	}
	drops := d.streamDrops(t, normal, engine.LateWindow, hour)
	var rows int64
	for i, p := range g.Periods {
		if i > 0 && p.Start <= g.Periods[i-1].Start {
			t.Errorf("periods out of order: %s after %s", p.Start, g.Periods[i-1].Start)
		}
		rows += p.Rows
		if p.Rows != int64(len(lags[p.Start])) {
			t.Errorf("%s: %d rows, want %d", p.Start, p.Rows, len(lags[p.Start]))
		}
		for _, m := range []struct {
			name string
			got  Percentiles
			vals []int64
		}{{"arrival lag", p.ArrivalLag, lags[p.Start]}, {"disorder", p.Disorder, dis[p.Start]}} {
			slices.Sort(m.vals)
			for _, q := range []struct {
				q   float64
				got float64
			}{{0, m.got.Min}, {0.5, m.got.P50}, {0.9, m.got.P90}, {0.99, m.got.P99}, {1, m.got.Max}} {
				want := exactQuantile(m.vals, q.q) / 1e6
				if math.Abs(q.got-want) > Alpha*math.Abs(want)+1e-12 {
					t.Errorf("%s %s q%v: got %vs, want %vs", p.Start, m.name, q.q, q.got, want)
				}
			}
		}
		if want := float64(drops[p.Start]) / float64(p.Rows); p.LateShare != want {
			t.Errorf("%s: late share %v, want %v (the stream's drops with %s)", p.Start, p.LateShare, want, FormatDuration(float64(normal)/1e6))
		}
		if isOutage := p.Start == fmtTime(outage); p.Marked != isOutage {
			t.Errorf("%s: marked %v (%s), want %v; p99 disorder %s", p.Start, p.Marked, p.Why, isOutage, FormatDuration(p.Disorder.P99))
		}
	}
	if rows != g.Rows {
		t.Errorf("periods hold %d rows, the group %d", rows, g.Rows)
	}
	if !g.Outages.DrivesRecommendation || g.Outages.MarkedPeriods != 1 || g.RecommendedLateness < 3600 {
		t.Errorf("recommendation %s, outages %+v: want one marked period driving an hours-long recommendation",
			FormatDuration(g.RecommendedLateness), g.Outages)
	}
	var buf strings.Builder
	if err := rep.WriteTable(&buf); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"far from the usual (disorder", "driven by 1 marked period", "(normal periods)", "final after window end", "open windows per key"} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, buf.String())
		}
	}
	if testing.Verbose() {
		t.Log("\n" + buf.String())
	}
	buf.Reset()
	if err := rep.WriteCSV(&buf); err != nil {
		t.Fatal(err)
	}
	recs, err := csv.NewReader(strings.NewReader(buf.String())).ReadAll()
	if err != nil || len(recs) != 1+len(g.Periods) {
		t.Fatalf("csv: %v, %d rows, want header + %d periods", err, len(recs), len(g.Periods))
	}
	if !strings.HasPrefix(strings.Join(recs[0], ","), "group,period_start,rows,arrival_lag_min_s") {
		t.Errorf("csv header %v", recs[0])
	}
	for i, r := range recs[1:] {
		if r[1] != g.Periods[i].Start || r[len(recs[0])-4] != strconv.FormatBool(g.Periods[i].Marked) {
			t.Errorf("csv row %d: %v, want period %s marked %v", i, r, g.Periods[i].Start, g.Periods[i].Marked)
		}
	}
	checkPeriodPlot(t, rep)
}

// checkPeriodPlot draws the report with periods, checks the SVG's parts
// and has rsvg-convert render it (with -update both go to testdata/ to
// look at: periods.svg, periods.png).
func checkPeriodPlot(t *testing.T, rep *Report) {
	var svg bytes.Buffer
	if err := rep.WritePlot(&svg); err != nil {
		t.Fatal(err)
	}
	dec := xml.NewDecoder(bytes.NewReader(svg.Bytes()))
	for {
		if _, err := dec.Token(); err == io.EOF {
			break
		} else if err != nil {
			t.Fatalf("plot is not well-formed XML: %v", err)
		}
	}
	s := svg.String()
	if got := strings.Count(s, `class="marked"`); got != 1 {
		t.Errorf("plot shades %d periods, want 1", got)
	}
	if got := strings.Count(s, `class="period-series"`); got != 4 {
		t.Errorf("plot has %d period lines, want 4 (p50 and p99 of both measures)", got)
	}
	for _, want := range []string{"over time", "disorder p99", "arrival lag p50", "recommended --lateness 3h", "normal periods need 10m", ">11h<"} {
		if !strings.Contains(s, want) {
			t.Errorf("plot lacks %q", want)
		}
	}
	png := filepath.Join(t.TempDir(), "periods.png")
	if *update {
		png = "testdata/periods.png"
		if err := os.WriteFile("testdata/periods.svg", svg.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	bin, err := exec.LookPath("rsvg-convert")
	if err != nil {
		if os.Getenv("TIDEMARK_REQUIRE_BROWSER") == "1" {
			t.Fatal("rsvg-convert not on PATH (apt-get install librsvg2-bin)")
		}
		t.Log("rsvg-convert not on PATH: the SVG is not rendered")
		return
	}
	cmd := exec.Command(bin, "-o", png)
	cmd.Stdin = bytes.NewReader(svg.Bytes())
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("rsvg-convert: %v: %s", err, out)
	}
	if fi, err := os.Stat(png); err != nil || fi.Size() < 10_000 {
		t.Errorf("rendered PNG: %v, %v", fi, err)
	}
}

// TestBySourceAndDay combines --by source with --by day: each source's
// periods sum to it, and without enough periods nothing is marked.
func TestBySourceAndDay(t *testing.T) {
	d := makeLake(t, genConfig{n: 3_000, sources: []string{"a", "b"}, lateness: 10 * usSecond, seed: 13, maxBatch: 100})
	rep := run(t, d, Config{By: BySource, Period: PeriodDay})
	if len(rep.Groups) != 2 {
		t.Fatalf("got %d groups, want 2", len(rep.Groups))
	}
	for _, g := range rep.Groups {
		if len(g.Periods) != 1 || g.Periods[0].Rows != g.Rows || g.Periods[0].Start != "2026-03-01T00:00:00Z" {
			t.Errorf("group %s: periods %+v, want one day with all %d rows", g.Group, g.Periods, g.Rows)
		}
		if g.Outages == nil || g.Outages.MarkedPeriods != 0 || g.Outages.DrivesRecommendation || g.Outages.NormalLateness != g.RecommendedLateness {
			t.Errorf("group %s: outages %+v with one period", g.Group, g.Outages)
		}
	}
	if _, err := (func() (*Report, error) {
		cfg := Config{Period: 2 * time.Hour, Replay: testReplayer}
		return Run(t.Context(), d.lk, cfg)
	})(); err == nil {
		t.Errorf("a 2h period: want an error")
	}
}

// TestMarkPeriods pins the rule on hand-made p99s.
func TestMarkPeriods(t *testing.T) {
	mk := func(dis ...float64) []Period {
		ps := make([]Period, len(dis))
		for i, v := range dis {
			ps[i].Disorder.P99 = v
			ps[i].ArrivalLag.P99 = 1
		}
		return ps
	}
	for _, c := range []struct {
		dis  []float64
		want string
	}{
		{[]float64{10, 12, 11, 3600}, "---x"},
		{[]float64{10, 3600}, "--"},         // too few periods
		{[]float64{0, 0, 0, 30}, "----"},    // 30s is not a minute above the usual
		{[]float64{0, 0, 0, 90}, "---x"},    // median 0: a minute and a half above
		{[]float64{10, 40, 39, 41}, "----"}, // 4x but not a minute above the median
		{[]float64{600, 3000, 2000, 700}, "-x--"},
	} {
		ps := mk(c.dis...)
		n := markPeriods(ps)
		var got strings.Builder
		marked := 0
		for _, p := range ps {
			if p.Marked {
				got.WriteByte('x')
				marked++
			} else {
				got.WriteByte('-')
			}
		}
		if got.String() != c.want || n != marked {
			t.Errorf("p99s %v: marked %s (%d), want %s", c.dis, got.String(), n, c.want)
		}
	}
}
