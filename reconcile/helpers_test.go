package reconcile_test

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"tidemark"
	"tidemark/lake"
	"tidemark/lake/store"
	"tidemark/reconcile"
)

var t0 = time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)

const second = int64(time.Second / time.Microsecond)

// testLake is a lake on a real directory store.
type testLake struct {
	st store.Store
	lk *lake.Lake
}

// lakeDir is a new directory for a test's lake, removed when the test
// ends: under /dev/shm (tmpfs) where there is one, else t.TempDir(). The
// directory store's fsyncs, which no test here can observe (they matter
// only when the machine loses power; failed writes are injected by
// wrapping stores), took most of the property tests' wall time on a
// disk: TestContractPre1970 took 25.0 s there (3.9 s user, 3.6 s sys),
// 9.5 s on tmpfs. The same code runs on either: tmpfs answers fsync at
// once.
func lakeDir(t testing.TB) string {
	t.Helper()
	if fi, err := os.Stat("/dev/shm"); err == nil && fi.IsDir() {
		if d, err := os.MkdirTemp("/dev/shm", "tidemark-reconcile-test-"); err == nil {
			t.Cleanup(func() {
				if err := os.RemoveAll(d); err != nil {
					t.Errorf("remove the test lake: %v", err)
				}
			})
			return d
		}
	}
	return t.TempDir()
}

func newTestLake(t testing.TB, spec tidemark.WindowSpec) *testLake {
	t.Helper()
	st, err := store.OpenDir(lakeDir(t))
	if err != nil {
		t.Fatal(err)
	}
	lk, err := lake.Open(context.Background(), st, lake.Config{Keys: []string{"k"}, ValueField: "v", Window: spec})
	if err != nil {
		t.Fatal(err)
	}
	return &testLake{st: st, lk: lk}
}

// fixedClock is a clock that stands still (reports' durations are 0).
func fixedClock() time.Time { return t0.Add(24 * time.Hour) }

func (tl *testLake) reconcile(t testing.TB, cfg reconcile.Config) *reconcile.Report {
	t.Helper()
	cfg.LakeStore = tl.st
	if cfg.Clock == nil {
		cfg.Clock = fixedClock
	}
	rep, err := reconcile.Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

// rec makes a valid record.
func rec(i int, eventUs int64, key string, v float64) tidemark.Record {
	return tidemark.Record{
		Source: "s", File: "f", Offset: int64(i), Payload: []byte(fmt.Sprint(i)),
		EventTime: eventUs, Arrival: eventUs, Key: tidemark.MakeKey(tidemark.KeyPart{Value: key}),
		Value: v, HasValue: true,
	}
}

// randomRecords makes n records in arrival order: event times from base
// mostly advancing (record i at up to i*step seconds) with random disorder
// up to disorder seconds, whole seconds, keys k0-k2, a seventh without a
// value, and n/10 random swaps of arrival order.
func randomRecords(rng *rand.Rand, n int, base int64, step, disorder int) []tidemark.Record {
	recs := make([]tidemark.Record, n)
	for i := range recs {
		ev := base + int64(i)*int64(rng.IntN(step))*second - int64(rng.IntN(disorder))*second
		ev -= ev % second
		recs[i] = rec(i, ev, fmt.Sprintf("k%d", rng.IntN(3)), float64(rng.IntN(1000))/4)
		if rng.IntN(7) == 0 {
			recs[i].HasValue, recs[i].Value = false, 0
		}
	}
	for range n / 10 {
		i, j := rng.IntN(n), rng.IntN(n)
		recs[i], recs[j] = recs[j], recs[i]
	}
	return recs
}

// streamRows turns emitted results into the window rows the stream writes.
func streamRows(emitted []tidemark.Result, w int64, hasW bool) []lake.WindowRow {
	rows := make([]lake.WindowRow, len(emitted))
	var wm *int64
	if hasW && w != tidemark.MaxTime {
		wm = &w
	}
	for i, e := range emitted {
		rows[i] = lake.WindowRow{Result: e, Origin: lake.OriginStream, Revision: 1, ComputedAt: t0.UnixMicro(), Watermark: wm}
	}
	return rows
}

type wk struct {
	start int64
	key   tidemark.Key
}

// pureBatch recomputes every window from the records, as a reference
// independent of package batch.
func pureBatch(spec tidemark.WindowSpec, recs []tidemark.Record) map[wk]tidemark.Agg {
	out := map[wk]tidemark.Agg{}
	for _, r := range recs {
		if !r.Valid() {
			continue
		}
		for _, w := range spec.Assign(nil, r.EventTime) {
			a := out[wk{w.Start, r.Key}]
			a.Add(r.Value, r.HasValue)
			out[wk{w.Start, r.Key}] = a
		}
	}
	return out
}

// closedMismatches lists the differences between window_results and the
// reference for every window closed (end <= w, or with a final row).
func closedMismatches(t testing.TB, tl *testLake, spec tidemark.WindowSpec, want map[wk]tidemark.Agg, w int64) []string {
	t.Helper()
	rows, err := tl.lk.Windows(context.Background(), lake.AllFrom, lake.AllTo, 0)
	if err != nil {
		t.Fatal(err)
	}
	got := map[wk]lake.WindowRow{}
	final := map[int64]bool{}
	for _, r := range rows {
		k := wk{r.Window.Start, r.Key}
		if _, dup := got[k]; dup {
			t.Errorf("window %s key %s appears twice", r.Window, r.Key)
		}
		got[k] = r
		if r.Final {
			final[r.Window.Start] = true
		}
	}
	closed := func(start int64) bool { return start+spec.Size <= w || final[start] }
	var bad []string
	for k, a := range want {
		if !closed(k.start) {
			continue
		}
		g, ok := got[k]
		if !ok {
			bad = append(bad, fmt.Sprintf("%s key %s: missing, want %+v", tidemark.FormatTime(k.start), k.key, a))
			continue
		}
		if !aggEqual(g.Agg, a) {
			bad = append(bad, fmt.Sprintf("%s key %s: got %+v (%s rev %d), want %+v", tidemark.FormatTime(k.start), k.key, g.Agg, g.Origin, g.Revision, a))
		}
	}
	for k, g := range got {
		if _, ok := want[k]; !ok && closed(k.start) {
			bad = append(bad, fmt.Sprintf("%s key %s: got %+v, want no row", tidemark.FormatTime(k.start), k.key, g.Agg))
		}
	}
	slices.Sort(bad)
	return bad
}

func aggEqual(a, b tidemark.Agg) bool {
	if a.Count != b.Count || (a.Values > 0) != (b.Values > 0) {
		return false
	}
	return a.Values == 0 || (a.Min == b.Min && a.Max == b.Max && math.Abs(a.Total()-b.Total()) <= 1e-9*math.Max(1, math.Abs(b.Total())))
}

func reportLine(r *reconcile.Report) string {
	var b strings.Builder
	fmt.Fprintf(&b, "checked=%d corrected=%d inserted=%d unchanged=%d pending=%d late=%d", r.Checked, r.Corrected, r.Inserted, r.Unchanged, r.Pending, r.LateRowsAbsorbed)
	return b.String()
}
