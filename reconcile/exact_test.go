package reconcile_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"tidemark"
	"tidemark/lake"
	"tidemark/lake/store"
	"tidemark/reconcile"
)

var exactAggs = []string{"avg(lat)", "p50(lat)", "p99(lat)", "p99.9(lat)", "max(lat)", "count_distinct(user)"}

// aggRecords makes n records of keys k0-k2 with a latency (quarter
// multiples, some absent) and a user (some absent) as their inputs, event
// times from base over span seconds.
func aggRecords(rng *rand.Rand, aggs tidemark.AggList, n int, base, span int64) []tidemark.Record {
	recs := make([]tidemark.Record, n)
	for i := range recs {
		recs[i] = rec(i, base+rng.Int64N(span)*second, fmt.Sprintf("k%d", rng.IntN(3)), 1)
		fields := make([]tidemark.AggValue, len(aggs.Inputs))
		for j, in := range aggs.Inputs {
			switch {
			case rng.IntN(9) == 0: // absent
			case in.Text:
				fields[j] = tidemark.AggValue{Text: fmt.Sprintf("u%d", rng.IntN(50)), Present: true}
			default:
				fields[j] = tidemark.AggValue{Num: float64(rng.IntN(8000)) / 4, Present: true}
			}
		}
		recs[i].Fields = fields
	}
	return recs
}

// estimates is what the stream emits for the records when its watermark
// moves from after to w: the windows ending in (after, w], each
// window×key's count and the sketches' estimates (Result.State),
// exact=false.
func estimates(spec tidemark.WindowSpec, aggs tidemark.AggList, recs []tidemark.Record, after, w int64) []lake.WindowRow {
	byWin := map[wk]*tidemark.Result{}
	for _, r := range recs {
		for _, win := range spec.Assign(nil, r.EventTime) {
			if win.End <= after || win.End > w {
				continue
			}
			res := byWin[wk{win.Start, r.Key}]
			if res == nil {
				res = &tidemark.Result{Window: win, Key: r.Key, Final: true, State: aggs.NewState()}
				byWin[wk{win.Start, r.Key}] = res
			}
			res.Agg.Add(r.Value, r.HasValue)
			aggs.Add(res.State, r.Fields)
		}
	}
	var out []tidemark.Result
	for _, r := range byWin {
		out = append(out, *r)
	}
	slices.SortFunc(out, tidemark.CompareResults)
	return streamRows(out, w, true)
}

// exactText renders the aggregates of each window×key of recs by hand
// (exactOf).
func exactText(spec tidemark.WindowSpec, recs []tidemark.Record) map[wk]string {
	m := map[wk][]tidemark.Record{}
	for _, r := range recs {
		for _, win := range spec.Assign(nil, r.EventTime) {
			m[wk{win.Start, r.Key}] = append(m[wk{win.Start, r.Key}], r)
		}
	}
	out := map[wk]string{}
	for k, rs := range m {
		out[k] = exactOf(rs)
	}
	return out
}

// exactOf renders exactAggs over recs: sorted values and the nearest rank
// counted, distinct users in a map.
func exactOf(recs []tidemark.Record) string {
	var lat []float64
	users := map[string]bool{}
	for _, r := range recs {
		if r.Fields[0].Present {
			lat = append(lat, r.Fields[0].Num)
		}
		if r.Fields[1].Present {
			users[r.Fields[1].Text] = true
		}
	}
	rank := func(vs []float64, num, den int) float64 {
		for i := range vs {
			if (i+1)*den >= num*len(vs) {
				return vs[i]
			}
		}
		return -1
	}
	slices.Sort(lat)
	var b strings.Builder
	if len(lat) == 0 {
		b.WriteString("∅ ∅ ∅ ∅ ∅ ")
	} else {
		var sum float64
		for _, v := range lat {
			sum += v
		}
		fmt.Fprintf(&b, "%g %g %g %g %g ", sum/float64(len(lat)), rank(lat, 1, 2), rank(lat, 99, 100), rank(lat, 999, 1000), lat[len(lat)-1])
	}
	fmt.Fprintf(&b, "%d ", len(users))
	return b.String()
}

func outText(vals []tidemark.AggOut) string {
	var b strings.Builder
	for _, v := range vals {
		if !v.Valid {
			b.WriteString("∅ ")
			continue
		}
		fmt.Fprintf(&b, "%g ", v.V)
	}
	return b.String()
}

// TestReconcileMakesAggregatesExact: on a lake with --agg, the first run
// makes every closed window exact (not only those late rows touched), a
// second run corrects nothing; rows and windows a later batch adds are
// made exact by the next run, and that run leaves the others alone.
func TestReconcileMakesAggregatesExact(t *testing.T) {
	ctx := context.Background()
	aggs, err := tidemark.ParseAggs(exactAggs)
	if err != nil {
		t.Fatal(err)
	}
	for _, spec := range []tidemark.WindowSpec{{Size: 60 * second, Slide: 60 * second}, {Size: 60 * second, Slide: 20 * second}} {
		t.Run(fmt.Sprint(spec), func(t *testing.T) {
			st, err := store.OpenDir(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			lk, err := lake.Open(ctx, st, lake.Config{Keys: []string{"k"}, ValueField: "v", Window: spec, Aggs: aggs})
			if err != nil {
				t.Fatal(err)
			}
			tl := &testLake{st: st, lk: lk}
			rng := rand.New(rand.NewPCG(32, 1))
			base := t0.UnixMicro()
			first := aggRecords(rng, aggs, 3000, base, 700)
			// A key with one row a window: its estimates are exact values
			// (clamped to min = max), yet not marked exact.
			for i := range 10 {
				r := aggRecords(rng, aggs, 1, base+int64(i)*60*second, 1)[0]
				r.Key, r.Offset = tidemark.MakeKey(tidemark.KeyPart{Value: "rare"}), int64(5000+i)
				r.Fields[0] = tidemark.AggValue{Num: 7, Present: true}
				first = append(first, r)
			}
			// The windows ending after w stay open at the first run; the
			// next batch closes them without adding rows to them.
			w := base + 600*second
			if err := lk.AppendBatch(ctx, lake.Batch{AppID: "stream", BatchID: 0, Records: first, Closed: estimates(spec, aggs, first, tidemark.MinTime, w), Watermark: &w}); err != nil {
				t.Fatal(err)
			}
			check := func(recs []tidemark.Record, w int64) {
				t.Helper()
				want := exactText(spec, recs)
				rows, err := tl.lk.Windows(ctx, lake.AllFrom, lake.AllTo, 0)
				if err != nil {
					t.Fatal(err)
				}
				n := 0
				for _, r := range rows {
					if r.Window.End > w {
						continue // open: the stream's
					}
					n++
					k := wk{r.Window.Start, r.Key}
					if !r.Exact {
						t.Errorf("%s %s: exact=false after reconcile", r.Window, r.Key)
					}
					if got := outText(r.Aggs); got != want[k] {
						t.Errorf("%s %s: got %s, want %s", r.Window, r.Key, got, want[k])
					}
				}
				if n < 10 {
					t.Errorf("only %d closed windows checked", n)
				}
			}
			rep := tl.reconcile(t, reconcile.Config{})
			if rep.Corrected == 0 || rep.Checked != rep.Corrected+rep.Inserted+rep.Unchanged {
				t.Errorf("first run: %s; want every window checked and the estimates corrected", reportLine(rep))
			}
			check(first, w)
			if rep := tl.reconcile(t, reconcile.Config{}); rep.Corrected != 0 || rep.Inserted != 0 {
				t.Errorf("second run: %s; want nothing corrected", reportLine(rep))
			}

			// A later batch: late rows into the closed windows, new rows
			// in windows the stream closes now.
			late := aggRecords(rng, aggs, 200, base, 600)
			for i := range late {
				late[i].Offset += 10_000
				late[i].Status = tidemark.StatusLate
			}
			next := aggRecords(rng, aggs, 1000, base+780*second, 300)
			for i := range next {
				next[i].Offset += 20_000
			}
			w2 := base + 1080*second
			batch := append(slices.Clone(late), next...)
			if err := lk.AppendBatch(ctx, lake.Batch{AppID: "stream", BatchID: 1, Records: batch, Closed: estimates(spec, aggs, append(slices.Clone(first), next...), w, w2), Watermark: &w2}); err != nil {
				t.Fatal(err)
			}
			rep = tl.reconcile(t, reconcile.Config{})
			if rep.LateRowsAbsorbed == 0 || rep.Corrected == 0 {
				t.Errorf("third run: %s; want late rows absorbed and estimates corrected", reportLine(rep))
			}
			all := append(slices.Clone(first), batch...)
			check(all, w2)
			if rep := tl.reconcile(t, reconcile.Config{}); rep.Corrected != 0 || rep.Inserted != 0 {
				t.Errorf("fourth run: %s; want nothing corrected", reportLine(rep))
			}
		})
	}
}

// TestReconcileMakesSessionAggregatesExact: on a session lake with --agg,
// a run makes every closed session exact (the stream's rows hold
// estimates), and a second run corrects nothing.
func TestReconcileMakesSessionAggregatesExact(t *testing.T) {
	ctx := context.Background()
	aggs, err := tidemark.ParseAggs(exactAggs)
	if err != nil {
		t.Fatal(err)
	}
	gap := 30 * second
	st, err := store.OpenDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	lk, err := lake.Open(ctx, st, lake.Config{Keys: []string{"k"}, ValueField: "v", SessionGap: time.Duration(gap) * time.Microsecond, Aggs: aggs})
	if err != nil {
		t.Fatal(err)
	}
	tl := &testLake{st: st, lk: lk}
	rng := rand.New(rand.NewPCG(32, 2))
	base := t0.UnixMicro()
	recs := aggRecords(rng, aggs, 400, base, 3600)
	// The stream's sessions: the reference sessionization, each with the
	// sketches' estimates of its rows.
	var emitted []tidemark.Result
	for key, ss := range refSessions(gap, recs) {
		for _, s := range ss {
			res := tidemark.Result{Window: s.Window, Key: key, Agg: s.Agg, Final: true, State: aggs.NewState()}
			for _, r := range recs {
				if r.Key == key && r.EventTime >= s.Window.Start && r.EventTime < s.Window.End {
					aggs.Add(res.State, r.Fields)
				}
			}
			emitted = append(emitted, res)
		}
	}
	slices.SortFunc(emitted, tidemark.CompareResults)
	w := tidemark.MaxTime
	if err := lk.AppendBatch(ctx, lake.Batch{AppID: "stream", BatchID: 0, Records: recs, Closed: streamRows(emitted, w, true), Watermark: &w}); err != nil {
		t.Fatal(err)
	}
	rep := tl.reconcile(t, reconcile.Config{})
	if rep.Corrected == 0 {
		t.Errorf("first run: %s; want the estimates corrected", reportLine(rep))
	}
	rows, err := lk.Windows(ctx, lake.AllFrom, lake.AllTo, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != len(emitted) {
		t.Fatalf("%d sessions after reconcile, want %d", len(rows), len(emitted))
	}
	for _, r := range rows {
		var in []tidemark.Record
		for _, x := range recs {
			if x.Key == r.Key && x.EventTime >= r.Window.Start && x.EventTime < r.Window.End {
				in = append(in, x)
			}
		}
		if want := exactOf(in); !r.Exact || outText(r.Aggs) != want {
			t.Errorf("%s %s: exact=%v %s, want exact %s", r.Window, r.Key, r.Exact, outText(r.Aggs), exactOf(in))
		}
	}
	if rep := tl.reconcile(t, reconcile.Config{}); rep.Corrected != 0 || rep.Inserted != 0 {
		t.Errorf("second run: %s; want nothing corrected", reportLine(rep))
	}
}
