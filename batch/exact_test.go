package batch_test

import (
	"context"
	"encoding/json"
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

// openAggLake opens a lake with the aggregates.
func openAggLake(t testing.TB, spec tidemark.WindowSpec, aggs tidemark.AggList) *lake.Lake {
	t.Helper()
	st, err := store.OpenDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	lk, err := lake.Open(context.Background(), st, lake.Config{Keys: []string{"page"}, ValueField: "v", Window: spec, Aggs: aggs})
	if err != nil {
		t.Fatal(err)
	}
	return lk
}

// inputsOf sets each record's Fields (the aggregates' inputs) from its
// JSON payload, with encoding/json: what the decoder does for the stream.
func inputsOf(t testing.TB, recs []tidemark.Record, aggs tidemark.AggList) {
	for i := range recs {
		var m map[string]any
		if err := json.Unmarshal(recs[i].Payload, &m); err != nil {
			t.Fatal(err)
		}
		var out []tidemark.AggValue
		for _, in := range aggs.Inputs {
			v, ok := m[in.Field.Path[0]]
			switch {
			case !ok || v == nil:
				out = append(out, tidemark.AggValue{})
			case in.Text:
				out = append(out, tidemark.AggValue{Text: fmt.Sprint(v), Present: true})
			default:
				out = append(out, tidemark.AggValue{Num: v.(float64), Present: true})
			}
		}
		recs[i].Fields = out
	}
}

// TestRecomputeAggregates: every aggregate of a list, tumbling and
// sliding, against a naive reference (all values of a window×key sorted,
// the nearest rank counted by hand, distinct values in a map).
func TestRecomputeAggregates(t *testing.T) {
	ctx := context.Background()
	aggs, err := tidemark.ParseAggs(testAggs)
	if err != nil {
		t.Fatal(err)
	}
	for _, spec := range []tidemark.WindowSpec{{Size: 10 * minute, Slide: 10 * minute}, {Size: 10 * minute, Slide: 3 * minute}} {
		t.Run(fmt.Sprint(spec), func(t *testing.T) {
			lk := openAggLake(t, spec, aggs)
			rng := rand.New(rand.NewPCG(5, 6))
			var all []tidemark.Record
			for b := range 4 {
				recs := records(rng, 500, 3*60*minute)
				withPayloads(rng, recs)
				inputsOf(t, recs, aggs)
				if err := lk.AppendBatch(ctx, lake.Batch{AppID: "s", BatchID: int64(b), Records: recs}); err != nil {
					t.Fatal(err)
				}
				all = append(all, recs...)
			}
			q := batch.Query{From: t0 - 60*minute, To: t0 + 240*minute, Workers: 2}
			got, _, err := batch.Recompute(ctx, lk, q)
			if err != nil {
				t.Fatal(err)
			}
			want := naiveAggs(t, spec, all, aggs)
			if len(got) != len(want) {
				t.Fatalf("got %d rows, want %d", len(got), len(want))
			}
			for i, r := range got {
				if g, w := aggText(r.Aggs), want[i]; g != w {
					t.Errorf("%s %s: got %s, want %s", r.Window, r.Key, g, w)
				}
			}
		})
	}
}

func aggText(outs []tidemark.AggOut) string {
	var b strings.Builder
	for _, o := range outs {
		if !o.Valid {
			b.WriteString("∅ ")
			continue
		}
		fmt.Fprintf(&b, "%g ", o.V)
	}
	return b.String()
}

// naiveAggs computes the aggregates of every window×key from the records'
// payloads, in the order Recompute returns its rows.
func naiveAggs(t *testing.T, spec tidemark.WindowSpec, recs []tidemark.Record, aggs tidemark.AggList) []string {
	type k struct {
		start int64
		key   tidemark.Key
	}
	m := map[k][][]byte{}
	for _, r := range recs {
		for _, w := range spec.Assign(nil, r.EventTime) {
			m[k{w.Start, r.Key}] = append(m[k{w.Start, r.Key}], r.Payload)
		}
	}
	keys := make([]k, 0, len(m))
	for key := range m {
		keys = append(keys, key)
	}
	slices.SortFunc(keys, func(a, b k) int {
		if a.start != b.start {
			return int(a.start - b.start)
		}
		return a.key.Compare(b.key)
	})
	var out []string
	for _, key := range keys {
		out = append(out, expectAggs(t, m[key]))
	}
	return out
}

// testAggs are the aggregates the tests ask for; expectAggs computes them
// by hand.
var testAggs = []string{"avg(lat)", "p50(lat)", "p99(lat)", "p99.9(lat)", "p0(lat)", "p100(lat)", "sum(lat)", "min(lat)", "max(lat)", "count_distinct(user)", "max(bytes)"}

// expectAggs computes testAggs over the payloads of one window×key (or
// session), as aggText renders them.
func expectAggs(t *testing.T, payloads [][]byte) string {
	var lat, bytes []float64
	users := map[string]bool{}
	for _, pl := range payloads {
		var p map[string]any
		if err := json.Unmarshal(pl, &p); err != nil {
			t.Fatal(err)
		}
		if v, ok := p["lat"].(float64); ok {
			lat = append(lat, v)
		}
		if v, ok := p["bytes"].(float64); ok {
			bytes = append(bytes, v)
		}
		if v, ok := p["user"].(string); ok {
			users[v] = true
		}
	}
	// rank: the smallest value with at least num/den of the values at or
	// below it (counted, not computed).
	rank := func(vs []float64, num, den int) string {
		for i := range vs {
			if (i+1)*den >= num*len(vs) {
				return fmt.Sprintf("%g", vs[i])
			}
		}
		return "?"
	}
	slices.Sort(lat)
	var b strings.Builder
	if len(lat) == 0 {
		b.WriteString("∅ ∅ ∅ ∅ ∅ ∅ ∅ ∅ ∅ ")
	} else {
		var sum float64
		for _, v := range lat { // quarter multiples: the sum is exact in any order
			sum += v
		}
		fmt.Fprintf(&b, "%g %s %s %s %g %g %g %g %g ", sum/float64(len(lat)), rank(lat, 1, 2), rank(lat, 99, 100), rank(lat, 999, 1000),
			lat[0], lat[len(lat)-1], sum, lat[0], lat[len(lat)-1])
	}
	fmt.Fprintf(&b, "%d ", len(users))
	if len(bytes) == 0 {
		b.WriteString("∅ ")
	} else {
		fmt.Fprintf(&b, "%g ", slices.Max(bytes))
	}
	return b.String()
}

// withPayloads gives each record a JSON payload with a latency (mostly),
// bytes (sometimes) and a user (mostly).
func withPayloads(rng *rand.Rand, recs []tidemark.Record) {
	for i := range recs {
		m := map[string]any{"user": fmt.Sprintf("u%d", rng.IntN(40))}
		if rng.IntN(7) != 0 {
			m["lat"] = float64(rng.IntN(4000)) / 4
		}
		if rng.IntN(3) == 0 {
			m["bytes"] = float64(rng.IntN(100))
		}
		if rng.IntN(11) == 0 {
			m["user"] = nil
		}
		recs[i].Payload, _ = json.Marshal(m)
	}
}

// TestSessionizeAggregates: the exact aggregates of sessions, against the
// naive sessionization with the same aggregates by hand.
func TestSessionizeAggregates(t *testing.T) {
	ctx := context.Background()
	aggs, err := tidemark.ParseAggs(testAggs)
	if err != nil {
		t.Fatal(err)
	}
	gap := 5 * minute
	lk := openAggLake(t, tidemark.WindowSpec{Size: gap, Slide: gap}, aggs)
	rng := rand.New(rand.NewPCG(8, 9))
	var all []tidemark.Record
	for b := range 3 {
		recs := records(rng, 300, 5*60*minute)
		withPayloads(rng, recs)
		inputsOf(t, recs, aggs)
		if err := lk.AppendBatch(ctx, lake.Batch{AppID: "s", BatchID: int64(b), Records: recs}); err != nil {
			t.Fatal(err)
		}
		all = append(all, recs...)
	}
	from, to := t0+60*minute, t0+200*minute
	got, _, err := batch.Sessionize(ctx, lk, batch.SessionQuery{Gap: time.Duration(gap) * time.Microsecond, From: from, To: to})
	if err != nil {
		t.Fatal(err)
	}
	want := naiveSessions(all, gap, from, to)
	if len(got) != len(want) || len(got) < 10 {
		t.Fatalf("got %d sessions, want %d (and at least 10)", len(got), len(want))
	}
	for i, r := range got {
		if r.Window != want[i].Window || r.Key != want[i].Key {
			t.Fatalf("session %d: got %s %s, want %s %s", i, r.Window, r.Key, want[i].Window, want[i].Key)
		}
		var pls [][]byte
		for _, rec := range all {
			if rec.Key == r.Key && rec.EventTime >= r.Window.Start && rec.EventTime < r.Window.End {
				pls = append(pls, rec.Payload)
			}
		}
		if g, w := aggText(r.Aggs), expectAggs(t, pls); g != w {
			t.Errorf("%s %s: got %s, want %s", r.Window, r.Key, g, w)
		}
	}
}
