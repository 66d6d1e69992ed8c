package reconcile_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"tidemark"
	"tidemark/lake"
	"tidemark/reconcile"
	"tidemark/stream/engine"
)

// TestContract is SPEC §5's contract as a property: for random event sets,
// arrival orders, batch sizes, lateness budgets, both late rules, both
// output modes, tumbling and sliding windows, with reconcile runs at random
// points while the stream goes on: after a final reconcile, every closed
// window in window_results equals a pure batch recomputation over every
// record, and a second run corrects nothing.
func TestContract(t *testing.T) {
	iters := 40
	if testing.Short() {
		iters = 8
	}
	contract(t, iters, t0.UnixMicro())
}

// TestContractPre1970 is TestContract over events before and across the
// epoch (issue 30): no time bound of a scan, a reconcile or a recompute may
// take 0 or a negative time for "no bound".
func TestContractPre1970(t *testing.T) {
	for _, base := range []time.Time{
		time.Unix(-20*60, 0), // windows on both sides of 1970-01-01T00:00:00Z
		time.Date(1960, 6, 1, 12, 0, 0, 0, time.UTC),
	} {
		t.Run(base.Format(time.RFC3339), func(t *testing.T) { contract(t, 6, base.UnixMicro()) })
	}
}

// contract runs TestContract's property on iters random cases of events
// from base on.
func contract(t *testing.T, iters int, base int64) {
	ctx := context.Background()
	bt := time.UnixMicro(base).UTC()
	for it := range iters {
		rng := rand.New(rand.NewPCG(uint64(it), 99))
		size := int64(1+rng.IntN(10)) * 60 * second
		slide := size
		if rng.IntN(2) == 0 {
			slide = size / int64(1+rng.IntN(3))
			slide -= slide % second
		}
		spec := tidemark.WindowSpec{Size: size, Slide: slide}
		cfg := engine.Config{
			Window:     spec,
			Lateness:   time.Duration(rng.IntN(5)) * time.Minute,
			LateRule:   engine.LateRule(rng.IntN(2)),
			OutputMode: engine.OutputMode(rng.IntN(2)),
		}
		name := fmt.Sprintf("%d/size=%ds,slide=%ds,lateness=%ds,rule=%s,mode=%s", it, size/second, slide/second, int64(cfg.Lateness/time.Second), cfg.LateRule, cfg.OutputMode)
		t.Run(name, func(t *testing.T) {
			t.Parallel() // its own engine, lake and rng; the runs wait mostly on fsync
			eng, err := engine.New(cfg, nil)
			if err != nil {
				t.Fatal(err)
			}
			tl := newTestLake(t, spec)
			n := 50 + rng.IntN(300)
			recs := randomRecords(rng, n, base, 40, 15*60)
			var w int64 = tidemark.MinTime
			var lateSeen int64
			batchID := int64(0)
			for i := 0; i < n; {
				m := min(n-i, 1+rng.IntN(20))
				chunk := recs[i : i+m]
				res := eng.Process(chunk, bt.Add(time.Duration(i)*time.Second))
				lateSeen += res.Dropped
				if res.HasWatermark {
					w = res.Watermark
				}
				err := tl.lk.AppendBatch(ctx, lake.Batch{AppID: "stream", BatchID: batchID, Records: chunk, Closed: streamRows(res.Emitted, res.Watermark, res.HasWatermark)})
				if err != nil {
					t.Fatal(err)
				}
				batchID++
				i += m
				if rng.IntN(6) == 0 {
					tl.reconcile(t, reconcile.Config{})
				}
			}
			// Closed as far as window_results tells: the highest watermark
			// the stream recorded (it records W only with an emission).
			recorded := recordedWatermark(t, tl)
			rep := tl.reconcile(t, reconcile.Config{})
			t.Logf("final run: %s", reportLine(rep))
			want := pureBatch(spec, recs)
			if bad := closedMismatches(t, tl, spec, want, recorded); len(bad) > 0 {
				t.Errorf("after reconcile (W=%s, engine W=%s, late rows %d, report %s), %d windows differ:\n%v",
					tidemark.FormatTime(recorded), tidemark.FormatTime(w), lateSeen, reportLine(rep), len(bad), bad)
			}
			again := tl.reconcile(t, reconcile.Config{})
			if again.Corrected+again.Inserted != 0 {
				t.Errorf("second run: got %s, want no corrections", reportLine(again))
			}
			full := tl.reconcile(t, reconcile.Config{From: bt.Add(-48 * time.Hour), To: bt.Add(48 * time.Hour)})
			if full.Corrected+full.Inserted != 0 {
				t.Errorf("full-range run after reconcile: got %s, want no corrections", reportLine(full))
			}
		})
	}
}

func recordedWatermark(t testing.TB, tl *testLake) int64 {
	t.Helper()
	rows, err := tl.lk.Windows(context.Background(), lake.AllFrom, lake.AllTo, 0)
	if err != nil {
		t.Fatal(err)
	}
	w := tidemark.MinTime
	for _, r := range rows {
		if r.Watermark != nil && *r.Watermark > w {
			w = *r.Watermark
		}
	}
	return w
}
