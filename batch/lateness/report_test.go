package lateness

import (
	"context"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"tidemark"
	"tidemark/lake"
	"tidemark/stream/engine"
)

func run(t testing.TB, d *testData, cfg Config) *Report {
	t.Helper()
	cfg.Replay = testReplayer
	rep, err := Run(context.Background(), d.lk, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

func TestRunPercentilesAndBuckets(t *testing.T) {
	d := makeLake(t, genConfig{n: 20_000, sources: []string{"s1"}, lateness: 30 * usSecond, seed: 1, maxBatch: 400})
	rep := run(t, d, Config{})
	if len(rep.Groups) != 1 {
		t.Fatalf("got %d groups, want 1", len(rep.Groups))
	}
	g := rep.Groups[0]
	if g.Group != "all" || g.Rows != int64(len(d.recs)) {
		t.Errorf("got %s, want all (%d rows)", fmtGroup(&g), len(d.recs))
	}
	var lags, dis []int64
	var want Buckets
	for _, r := range d.recs {
		lags = append(lags, r.Arrival-r.EventTime)
		dis = append(dis, r.Disorder)
		switch {
		case r.Disorder < usMinute:
			want.Lt1m++
		case r.Disorder < 10*usMinute:
			want.M1m10m++
		case r.Disorder < usHour:
			want.M10m1h++
		default:
			want.Ge1h++
		}
	}
	slices.Sort(lags)
	slices.Sort(dis)
	for _, m := range []struct {
		name string
		got  Percentiles
		vals []int64
	}{{"arrival lag", g.ArrivalLag, lags}, {"disorder", g.Disorder, dis}} {
		for _, p := range []struct {
			q   float64
			got float64
		}{{0, m.got.Min}, {0.5, m.got.P50}, {0.9, m.got.P90}, {0.95, m.got.P95}, {0.99, m.got.P99}, {0.999, m.got.P999}, {1, m.got.Max}} {
			want := exactQuantile(m.vals, p.q) / 1e6
			if math.Abs(p.got-want) > Alpha*math.Abs(want)+1e-12 {
				t.Errorf("%s q%v: got %vs, want %vs within %v", m.name, p.q, p.got, want, Alpha)
			}
		}
	}
	if g.Buckets != want {
		t.Errorf("buckets: got %+v, want %+v", g.Buckets, want)
	}
	b := g.Buckets
	if sum := b.Lt1m + b.M1m10m + b.M10m1h + b.Ge1h; sum != g.Rows {
		t.Errorf("buckets sum to %d, want %d rows", sum, g.Rows)
	}
	if b.Ge1h == 0 || b.M1m10m == 0 {
		t.Errorf("generated data should fill every bucket, got %+v", b)
	}
	if got, want := g.RecommendedLateness, float64(RoundUp(int64(exactQuantile(dis, 0.99))))/1e6; got != want {
		t.Errorf("recommended lateness: got %vs, want %vs (exact disorder p99 rounded up)", got, want)
	}
}

// TestWhatIfEqualsStream checks every what-if number, and the drop fraction
// of the recommendation, against a fresh stream engine run over the batches
// the stream really processed; and the replay at the budget the lake was
// written with against the late marks in the lake. Spilling (ChunkRows
// small) must not change anything.
func TestWhatIfEqualsStream(t *testing.T) {
	const written = 30 * usSecond
	d := makeLake(t, genConfig{n: 6_000, sources: []string{"s1", "s2", "s3"}, lateness: written, seed: 2, maxBatch: 60})
	for _, chunk := range []int{0, 257} {
		budgets := []time.Duration{10 * time.Second, 30 * time.Second, time.Minute, 5 * time.Minute, 10 * time.Minute, time.Hour}
		rep := run(t, d, Config{By: BySource, Budgets: budgets, ChunkRows: chunk})
		if len(rep.Groups) != 3 {
			t.Fatalf("chunk %d: got %d groups, want 3", chunk, len(rep.Groups))
		}
		source := func(r *tidemark.Record) string { return r.Source }
		lakeLate := map[string]int64{}
		for _, r := range d.recs {
			if r.Status == tidemark.StatusLate {
				lakeLate[r.Source]++
			}
		}
		for _, g := range rep.Groups {
			if len(g.WhatIf) < len(budgets) {
				t.Errorf("chunk %d group %s: %d what-if rows, want >= %d", chunk, g.Group, len(g.WhatIf), len(budgets))
			}
			for _, w := range g.WhatIf {
				b := int64(math.Round(w.Lateness * 1e6))
				ev := d.streamDrops(t, b, engine.LateEvent, source)[g.Group]
				win := d.streamDrops(t, b, engine.LateWindow, source)[g.Group]
				if w.DroppedEvent != ev || w.DroppedWindow != win {
					t.Errorf("chunk %d group %s lateness %vs: got dropped event %d window %d, want %d %d", chunk, g.Group, w.Lateness, w.DroppedEvent, w.DroppedWindow, ev, win)
				}
				if b == written && w.DroppedWindow != lakeLate[g.Group] {
					t.Errorf("chunk %d group %s: replay at the lake's own budget drops %d, the lake holds %d late rows", chunk, g.Group, w.DroppedWindow, lakeLate[g.Group])
				}
				if g.isRecommended(w) {
					if got, want := g.RecommendedDropFraction, float64(win)/float64(g.Rows); got != want {
						t.Errorf("group %s: drop fraction %v, want %v", g.Group, got, want)
					}
				}
			}
		}
		if lakeLate["s1"] == 0 {
			t.Fatalf("generated data has no late rows: the test proves nothing")
		}
	}
}

func TestBySource(t *testing.T) {
	d := makeLake(t, genConfig{n: 3_000, sources: []string{"b", "a", "c"}, lateness: 10 * usSecond, seed: 3, maxBatch: 100})
	all := run(t, d, Config{})
	rep := run(t, d, Config{By: BySource})
	want := map[string]int64{}
	for _, r := range d.recs {
		want[r.Source]++
	}
	var names []string
	var rows int64
	drops := make([]int64, len(all.Groups[0].WhatIf))
	for _, g := range rep.Groups {
		names = append(names, g.Group)
		rows += g.Rows
		if g.Rows != want[g.Group] {
			t.Errorf("group %s: got %d rows, want %d", g.Group, g.Rows, want[g.Group])
		}
		for _, w := range g.WhatIf {
			for i, aw := range all.Groups[0].WhatIf {
				if aw.Lateness == w.Lateness {
					drops[i] += w.DroppedEvent
				}
			}
		}
	}
	if got := strings.Join(names, ","); got != "a,b,c" {
		t.Errorf("groups: got %s, want a,b,c", got)
	}
	if rows != all.Groups[0].Rows {
		t.Errorf("rows over groups: got %d, want %d", rows, all.Groups[0].Rows)
	}
	for i, aw := range all.Groups[0].WhatIf {
		if !all.Groups[0].isRecommended(aw) || slices.Contains(defaultBudgets, int64(aw.Lateness*1e6)) {
			if drops[i] != aw.DroppedEvent {
				t.Errorf("lateness %vs: groups drop %d, all drops %d", aw.Lateness, drops[i], aw.DroppedEvent)
			}
		}
	}
}

func TestByKey(t *testing.T) {
	d := makeLake(t, genConfig{n: 2_000, sources: []string{"s"}, lateness: 10 * usSecond, seed: 4, maxBatch: 100})
	rep := run(t, d, Config{By: "page"})
	want := map[string]int64{}
	for i := range d.recs {
		want[keyGroup(&d.recs[i])]++
	}
	if len(rep.Groups) != len(want) {
		t.Errorf("got %d groups, want %d", len(rep.Groups), len(want))
	}
	for _, g := range rep.Groups {
		if g.Rows != want[g.Group] {
			t.Errorf("group %s: got %d rows, want %d", g.Group, g.Rows, want[g.Group])
		}
	}
	if _, ok := want[nullGroup]; !ok {
		t.Errorf("generated data has no null page")
	}
	_, err := Run(context.Background(), d.lk, Config{By: "nope", Replay: testReplayer})
	if err == nil || !strings.Contains(err.Error(), "--by nope") {
		t.Errorf("--by nope: got %v, want an error naming it", err)
	}
}

func TestTimeRange(t *testing.T) {
	d := makeLake(t, genConfig{n: 2_000, sources: []string{"s"}, lateness: 10 * usSecond, seed: 5, maxBatch: 100})
	from, to := t0+10*usSecond, t0+20*usSecond
	rep := run(t, d, Config{Time: lake.Between(from, to)})
	var want int64
	for _, r := range d.recs {
		if r.EventTime >= from && r.EventTime < to {
			want++
		}
	}
	if got := rep.Groups[0].Rows; got != want {
		t.Errorf("rows in range: got %d, want %d", got, want)
	}
	empty := run(t, d, Config{Time: lake.Between(t0-2*usHour, t0-usHour)})
	if len(empty.Groups) != 0 {
		t.Errorf("empty range: got %d groups, want 0", len(empty.Groups))
	}
}

// TestTimeRangePre1970: events before and across the epoch are ordinary;
// a range ending or starting at 1970-01-01T00:00:00Z (0 µs) is a bound like
// any other, not "unbounded" (issue 30).
func TestTimeRangePre1970(t *testing.T) {
	d := makeLake(t, genConfig{n: 2_000, sources: []string{"s"}, lateness: 10 * usSecond, seed: 5, maxBatch: 100, shift: -t0 - 500*usSecond})
	count := func(from, to int64) (n int64) {
		for _, r := range d.recs {
			if r.EventTime >= from && r.EventTime < to {
				n++
			}
		}
		return n
	}
	for _, r := range [][2]int64{{-300 * usSecond, 0}, {0, 300 * usSecond}, {lake.AllFrom, 0}, {-1, 1}} {
		want := count(r[0], r[1])
		rep := run(t, d, Config{Time: lake.Between(r[0], r[1])})
		var got int64
		if len(rep.Groups) > 0 {
			got = rep.Groups[0].Rows
		}
		if got != want || (want == 0 && r[0] != -1) {
			t.Errorf("rows in [%d, %d): got %d, want %d", r[0], r[1], got, want)
		}
	}
	all := run(t, d, Config{})
	if got := all.Groups[0].Rows; got != int64(len(d.recs)) {
		t.Errorf("all rows: got %d, want %d", got, len(d.recs))
	}
}

// TestSince counts back from the injected clock: with the clock 1000 s
// after t0, --since 990s keeps the events of the last 990 s, and a clock
// 10 h after t0 keeps none of the last hour.
func TestSince(t *testing.T) {
	d := makeLake(t, genConfig{n: 2_000, sources: []string{"s"}, lateness: 10 * usSecond, seed: 5, maxBatch: 100})
	now := time.UnixMicro(t0 + 1000*usSecond)
	rep := run(t, d, Config{Since: 990 * time.Second, Clock: func() time.Time { return now }})
	var want int64
	for _, r := range d.recs {
		if r.EventTime >= t0+10*usSecond {
			want++
		}
	}
	if got := rep.Groups[0].Rows; got != want || want == 0 || want == int64(len(d.recs)) {
		t.Errorf("rows since now-990s: got %d, want %d (of %d)", got, want, len(d.recs))
	}
	late := run(t, d, Config{Since: time.Hour, Clock: func() time.Time { return time.UnixMicro(t0 + 10*usHour) }})
	if len(late.Groups) != 0 {
		t.Errorf("since after the data: got %d groups, want 0", len(late.Groups))
	}
	for _, cfg := range []Config{{Since: -time.Second}, {Since: time.Hour, Time: lake.Between(t0, lake.AllTo)}, {Since: time.Hour, Time: lake.Between(lake.AllFrom, t0)}} {
		cfg.Replay = testReplayer
		if _, err := Run(context.Background(), d.lk, cfg); err == nil {
			t.Errorf("Run(%+v): got nil error, want one", cfg)
		}
	}
}

func TestRunNeedsReplay(t *testing.T) {
	d := makeLake(t, genConfig{n: 10, sources: []string{"s"}, seed: 6, maxBatch: 100})
	if _, err := Run(context.Background(), d.lk, Config{}); err == nil {
		t.Errorf("Run without Replay: got nil error, want one")
	}
}
