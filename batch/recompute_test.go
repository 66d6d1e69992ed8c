package batch_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"tidemark"
	"tidemark/batch"
	"tidemark/lake"
	"tidemark/lake/store"
)

var t0 = time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC).UnixMicro()

const minute = int64(time.Minute / time.Microsecond)

func openLake(t testing.TB, spec tidemark.WindowSpec) *lake.Lake {
	t.Helper()
	st, err := store.OpenDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	lk, err := lake.Open(context.Background(), st, lake.Config{Keys: []string{"page"}, ValueField: "v", Window: spec})
	if err != nil {
		t.Fatal(err)
	}
	return lk
}

// records makes n valid records over span µs from t0 with a few keys, null
// keys, missing values and late rows.
func records(rng *rand.Rand, n int, span int64) []tidemark.Record {
	recs := make([]tidemark.Record, n)
	for i := range recs {
		r := &recs[i]
		r.Source, r.File, r.Offset = "s", "f", int64(i)
		r.Payload = []byte(fmt.Sprint(i))
		r.EventTime = t0 + rng.Int64N(span)
		r.Arrival = r.EventTime
		if rng.IntN(9) == 0 {
			r.Key = tidemark.MakeKey(tidemark.KeyPart{Null: true})
		} else {
			r.Key = tidemark.MakeKey(tidemark.KeyPart{Value: fmt.Sprintf("/p%d", rng.IntN(4))})
		}
		if rng.IntN(5) != 0 {
			r.Value, r.HasValue = float64(rng.IntN(1000))/8, true
		}
		if rng.IntN(6) == 0 {
			r.Status = tidemark.StatusLate
		}
	}
	return recs
}

// naive is the reference: every record folded into every window Assign
// gives it, kept when keep says so.
func naive(spec tidemark.WindowSpec, recs []tidemark.Record, keep func(tidemark.Window) bool) []batch.Row {
	type k struct {
		start int64
		key   tidemark.Key
	}
	m := map[k]*batch.Row{}
	for _, r := range recs {
		for _, w := range spec.Assign(nil, r.EventTime) {
			if !keep(w) {
				continue
			}
			row := m[k{w.Start, r.Key}]
			if row == nil {
				row = &batch.Row{Result: tidemark.Result{Window: w, Key: r.Key, Final: true}}
				m[k{w.Start, r.Key}] = row
			}
			row.Agg.Add(r.Value, r.HasValue)
			if r.Status == tidemark.StatusLate {
				row.Late++
			}
		}
	}
	var out []batch.Row
	for _, r := range m {
		out = append(out, *r)
	}
	slices.SortFunc(out, func(a, b batch.Row) int {
		if a.Window.Start != b.Window.Start {
			return int(a.Window.Start - b.Window.Start)
		}
		return strings.Compare(string(a.Key), string(b.Key))
	})
	return out
}

func rowText(rows []batch.Row) string {
	var b strings.Builder
	for _, r := range rows {
		// Sums are rounded: addition order differs between the two.
		fmt.Fprintf(&b, "%s %s n=%d vals=%d sum=%.6f min=%g max=%g late=%d\n", r.Window, r.Key, r.Agg.Count, r.Agg.Values, r.Agg.Total(), r.Agg.Min, r.Agg.Max, r.Late)
	}
	return b.String()
}

func TestRecompute(t *testing.T) {
	ctx := context.Background()
	tumbling := tidemark.WindowSpec{Size: 10 * minute, Slide: 10 * minute}
	sliding := tidemark.WindowSpec{Size: 10 * minute, Slide: 3 * minute}
	cases := []struct {
		name    string
		spec    tidemark.WindowSpec
		windows []int64 // window starts, minutes after t0; nil: range
		from    int64   // minutes after t0 (range)
		to      int64
		workers int
	}{
		{"tumbling range", tumbling, nil, 0, 240, 1},
		{"tumbling range 2 workers", tumbling, nil, 30, 200, 2},
		{"tumbling windows", tumbling, []int64{0, 50, 120, 130, 230}, 0, 0, 2},
		{"sliding range", sliding, nil, -9, 240, 2},
		{"sliding windows", sliding, []int64{-6, 0, 3, 60, 177}, 0, 0, 2},
		{"range without rows", tumbling, nil, 1000, 1100, 2},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			lk := openLake(t, tc.spec)
			rng := rand.New(rand.NewPCG(1, 2))
			var all []tidemark.Record
			for b := range 5 {
				recs := records(rng, 400, 4*60*minute)
				if err := lk.AppendBatch(ctx, lake.Batch{AppID: "s", BatchID: int64(b), Records: recs}); err != nil {
					t.Fatal(err)
				}
				all = append(all, recs...)
			}
			q := batch.Query{Workers: tc.workers}
			var keep func(tidemark.Window) bool
			if tc.windows != nil {
				set := map[int64]bool{}
				for _, m := range tc.windows {
					s := t0 + m*minute
					set[s] = true
					q.Windows = append(q.Windows, tidemark.Window{Start: s, End: s + tc.spec.Size})
				}
				keep = func(w tidemark.Window) bool { return set[w.Start] }
			} else {
				q.From, q.To = t0+tc.from*minute, t0+tc.to*minute
				keep = func(w tidemark.Window) bool { return w.Start >= q.From && w.Start < q.To }
			}
			got, st, err := batch.Recompute(ctx, lk, q)
			if err != nil {
				t.Fatal(err)
			}
			want := naive(tc.spec, all, keep)
			if g, w := rowText(got), rowText(want); g != w {
				t.Errorf("got\n%s\nwant\n%s", g, w)
			}
			if tc.name != "range without rows" && (st.RowsRead == 0 || st.FilesRead == 0 || st.PartitionsRead == 0 || st.BytesRead == 0) {
				t.Errorf("got stats %+v, want all positive", st)
			}
		})
	}
}

func TestRecomputeVersionAndErrors(t *testing.T) {
	ctx := context.Background()
	spec := tidemark.WindowSpec{Size: 10 * minute, Slide: 10 * minute}
	lk := openLake(t, spec)
	rng := rand.New(rand.NewPCG(3, 4))
	first := records(rng, 300, 60*minute)
	if err := lk.AppendBatch(ctx, lake.Batch{AppID: "s", BatchID: 1, Records: first}); err != nil {
		t.Fatal(err)
	}
	if err := lk.AppendBatch(ctx, lake.Batch{AppID: "s", BatchID: 2, Records: records(rng, 300, 60*minute)}); err != nil {
		t.Fatal(err)
	}
	all := func(tidemark.Window) bool { return true }
	got, _, err := batch.Recompute(ctx, lk, batch.Query{From: t0 - 60*minute, To: t0 + 120*minute, Version: 1})
	if err != nil {
		t.Fatal(err)
	}
	if g, w := rowText(got), rowText(naive(spec, first, all)); g != w {
		t.Errorf("version 1: got\n%s\nwant\n%s", g, w)
	}
	bad := []batch.Query{
		{From: 5, To: 5},
		{Windows: []tidemark.Window{{Start: t0, End: t0 + 7}}},
		{Windows: []tidemark.Window{{Start: t0 + 1, End: t0 + 1 + spec.Size}}},
		{From: lake.AllFrom, To: lake.AllTo},
	}
	for _, q := range bad {
		if _, _, err := batch.Recompute(ctx, lk, q); err == nil {
			t.Errorf("query %+v: got nil error, want one", q)
		}
	}
}
