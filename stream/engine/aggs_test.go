package engine

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"tidemark"
)

// testAggs reads v (the --value field, as a number) and u (as text).
var testAggs = func() tidemark.AggList {
	l, err := tidemark.ParseAggs([]string{"p50(v)", "avg(v)", "p99(v)", "count_distinct(u)"})
	if err != nil {
		panic(err)
	}
	return l
}()

// genAggRun is genRun with --agg: each valid record's Fields hold its
// value (so the aggregate state must absorb exactly the rows the engine's
// own sum/min/max does) and a user among a few dozen.
func genAggRun(rng *rand.Rand) (Config, []batchIn) {
	cfg, batches := genRun(rng)
	cfg.Aggs = testAggs
	for _, b := range batches {
		for i := range b.recs {
			r := &b.recs[i]
			if !r.Valid() {
				continue
			}
			r.Fields = []tidemark.AggValue{{Num: r.Value, Present: r.HasValue}, {}}
			if rng.IntN(4) > 0 {
				r.Fields[1] = tidemark.AggValue{Text: "u" + strconv.Itoa(rng.IntN(40)), Present: true}
			}
		}
	}
	return cfg, batches
}

// renderResults renders results with their aggregates' values, comparable
// across engines (a state's pointer is not).
func renderResults(l tidemark.AggList, rs []tidemark.Result) string {
	var b strings.Builder
	for _, r := range rs {
		fmt.Fprintf(&b, "%v %q %+v final=%v", r.Window, r.Key, r.Agg, r.Final)
		if r.State != nil {
			fmt.Fprintf(&b, " aggs=%v absorbed=%v", l.Values(r.State), r.State.Absorbed())
		}
		b.WriteByte('\n')
	}
	return b.String()
}

// checkAbsorbed: every result's state absorbed exactly the values its
// aggregate counted (Values), with the same sum, min and max.
func checkAbsorbed(rs []tidemark.Result) error {
	for _, r := range rs {
		if r.State == nil {
			return fmt.Errorf("%v %q: no aggregate state", r.Window, r.Key)
		}
		m := r.State.Moments[0]
		if got := r.State.Absorbed()[0]; got != r.Agg.Values || m.Values != r.Agg.Values {
			return fmt.Errorf("%v %q: the sketch absorbed %d values, the moments %d, the window's aggregate counted %d", r.Window, r.Key, got, m.Values, r.Agg.Values)
		}
		if m.Values > 0 && (m.Min != r.Agg.Min || m.Max != r.Agg.Max || math.Abs(m.Total()-r.Agg.Total()) > 1e-9*math.Max(1, math.Abs(r.Agg.Total()))) {
			return fmt.Errorf("%v %q: moments %+v, aggregate %+v", r.Window, r.Key, m, r.Agg)
		}
	}
	return nil
}

// TestAggsFollowTheEngine: over random runs (sliding windows, lateness,
// both late rules and output modes) every emitted and open pair's state
// absorbed exactly the rows the engine counted in it, through restarts
// from a snapshot and from changelogs replayed on the last snapshot, and
// the restarted engine emits what an uninterrupted one does.
func TestAggsFollowTheEngine(t *testing.T) {
	runs := 200
	if testing.Short() {
		runs = 60
	}
	for seed := range runs {
		rng := rand.New(rand.NewPCG(uint64(seed), 32))
		cfg, batches := genAggRun(rng)
		whole := mustNew(t, cfg, nil)
		e := mustNew(t, cfg, nil)
		var snap []byte
		var logs [][]byte
		for i, b := range batches {
			want := whole.Process(slices.Clone(b.recs), b.now)
			got := e.Process(slices.Clone(b.recs), b.now)
			if err := checkAbsorbed(got.Emitted); err != nil {
				t.Fatalf("seed %d batch %d: %v", seed, i, err)
			}
			if g, w := renderResults(cfg.Aggs, got.Emitted), renderResults(cfg.Aggs, want.Emitted); g != w {
				t.Fatalf("seed %d batch %d: emitted\n%s\nwant\n%s", seed, i, g, w)
			}
			log, _ := e.Changelog()
			logs = append(logs, log)
			switch rng.IntN(4) {
			case 0: // checkpoint: a snapshot, the changelogs start over
				snap, logs = e.MarshalSnapshot(), nil
			case 1: // restart from the snapshot and the changelogs since
				e = restart(t, cfg, snap, logs)
			}
		}
		if err := checkAbsorbed(e.State().Open); err != nil {
			t.Fatalf("seed %d open state: %v", seed, err)
		}
		got, want := e.Drain(), whole.Drain()
		if g, w := renderResults(cfg.Aggs, got.Emitted), renderResults(cfg.Aggs, want.Emitted); g != w {
			t.Fatalf("seed %d drain: emitted\n%s\nwant\n%s", seed, g, w)
		}
		if err := checkAbsorbed(got.Emitted); err != nil {
			t.Fatalf("seed %d drain: %v", seed, err)
		}
	}
}

// restart is a new engine from an encoded snapshot (nil: none) and the
// encoded changelogs after it.
func restart(t *testing.T, cfg Config, snap []byte, logs [][]byte) *Engine {
	t.Helper()
	var st *State
	if snap != nil {
		st = new(State)
		if err := st.UnmarshalBinary(snap); err != nil {
			t.Fatal(err)
		}
		if !st.Aggs {
			t.Fatal("a snapshot of an engine with --agg does not say so")
		}
	}
	e := mustNew(t, cfg, st)
	for _, data := range logs {
		var c Changes
		if err := c.UnmarshalBinary(data); err != nil {
			t.Fatal(err)
		}
		if err := e.Apply(&c); err != nil {
			t.Fatal(err)
		}
	}
	return e
}

// TestAggsStoreMatchesMemory: an engine on a Store carries the states
// through its reads, flushes, closes and a reopen, emitting what the
// memory engine does.
func TestAggsStoreMatchesMemory(t *testing.T) {
	for seed := range 30 {
		rng := rand.New(rand.NewPCG(uint64(seed), 33))
		cfg, batches := genAggRun(rng)
		mem := mustNew(t, cfg, nil)
		st := new(MemStore)
		disk, err := OpenStore(cfg, st, Resume{})
		if err != nil {
			t.Fatal(err)
		}
		for i, b := range batches {
			mres := mem.Process(slices.Clone(b.recs), b.now)
			dres := disk.Process(slices.Clone(b.recs), b.now)
			if err := disk.Err(); err != nil {
				t.Fatal(err)
			}
			if g, w := renderResults(cfg.Aggs, dres.Emitted), renderResults(cfg.Aggs, mres.Emitted); g != w {
				t.Fatalf("seed %d batch %d: store engine emitted\n%s\nmemory\n%s", seed, i, g, w)
			}
			if rng.IntN(2) == 0 {
				continue
			}
			tag := FlushTag{StreamID: "s", BatchID: int64(i)}
			if err := disk.Flush(tag); err != nil {
				t.Fatal(err)
			}
			if g, w := renderResults(cfg.Aggs, disk.State().Open), renderResults(cfg.Aggs, mem.State().Open); g != w {
				t.Fatalf("seed %d batch %d: stored state\n%s\nmemory\n%s", seed, i, g, w)
			}
			if rng.IntN(3) == 0 {
				if disk, err = OpenStore(cfg, st, Resume{Tag: tag, Committed: true}); err != nil {
					t.Fatal(err)
				}
			}
		}
		if g, w := renderResults(cfg.Aggs, disk.Drain().Emitted), renderResults(cfg.Aggs, mem.Drain().Emitted); g != w {
			t.Fatalf("seed %d: the drains differ:\n%s\nmemory\n%s", seed, g, w)
		}
	}
}

// TestAggsCheckpointMismatch: a checkpoint with states does not restore
// into an engine without --agg, nor one without into an engine with.
func TestAggsCheckpointMismatch(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 34))
	cfg, batches := genAggRun(rng)
	e := mustNew(t, cfg, nil)
	for _, b := range batches[:len(batches)/2+1] {
		e.Process(slices.Clone(b.recs), b.now)
	}
	st := e.State()
	if len(st.Open) == 0 {
		t.Skip("no open pair to restore")
	}
	plain := cfg
	plain.Aggs = tidemark.AggList{}
	if _, err := New(plain, st); err == nil || !strings.Contains(err.Error(), "with other --agg aggregates") {
		t.Errorf("a state with --agg restored without: %v", err)
	}
	st.Aggs = false
	for i := range st.Open {
		st.Open[i].State = nil
	}
	if _, err := New(cfg, st); err == nil || !strings.Contains(err.Error(), "without --agg") {
		t.Errorf("a state without --agg restored with: %v", err)
	}
}

// TestSessionRefusesAggs: --agg with session windows is a clear error.
func TestSessionRefusesAggs(t *testing.T) {
	if _, err := NewSessionEngine(time.Minute, Config{Aggs: testAggs}, nil); err != ErrSessionAggs {
		t.Errorf("NewSessionEngine with --agg: %v, want ErrSessionAggs", err)
	}
}

// BenchmarkStateBytesAggs is BenchmarkStateBytes with --agg p95(v),
// avg(v), count_distinct(u) and rows rows per open (window, key): the heap
// a pair's state costs with a DDSketch and a HyperLogLog beside its
// aggregate. (bytes/entry without --agg: BenchmarkStateBytes.)
func BenchmarkStateBytesAggs(b *testing.B) {
	l, err := tidemark.ParseAggs([]string{"p95(v)", "avg(v)", "count_distinct(u)"})
	if err != nil {
		b.Fatal(err)
	}
	const nkeys, nwins = 1000, 20
	for _, rows := range []int{1, 10, 100} {
		b.Run(fmt.Sprintf("rows=%d", rows), func(b *testing.B) {
			keys := make([]tidemark.Key, nkeys)
			for i := range keys {
				keys[i] = tidemark.MakeKey(tidemark.KeyPart{Value: fmt.Sprintf("/page/%04d", i)})
			}
			rng := rand.New(rand.NewPCG(1, 2))
			var perEntry, estimate, encoded float64
			for b.Loop() {
				e, err := New(Config{Window: tidemark.WindowSpec{Size: 10}, Lateness: (1 << 40) * time.Microsecond, Aggs: l}, nil)
				if err != nil {
					b.Fatal(err)
				}
				var before, after runtime.MemStats
				runtime.GC()
				runtime.ReadMemStats(&before)
				recs := make([]tidemark.Record, 0, nkeys*rows)
				for w := range nwins {
					recs = recs[:0]
					for _, k := range keys {
						for range rows {
							k = tidemark.Key(strings.Clone(string(k)))
							v := math.Exp(rng.NormFloat64() + 3) // latency-like
							recs = append(recs, tidemark.Record{Source: "s", EventTime: int64(w) * 10, Key: k, Value: v, HasValue: true,
								Fields: []tidemark.AggValue{{Num: v, Present: true}, {Text: "u" + strconv.Itoa(rng.IntN(100000)), Present: true}}})
						}
					}
					e.Process(recs, time.Time{})
				}
				recs = nil
				runtime.GC()
				runtime.ReadMemStats(&after)
				n := float64(e.index.Len())
				perEntry = float64(after.HeapAlloc-before.HeapAlloc) / n
				estimate = float64(e.StateBytes()) / n
				encoded = float64(len(e.MarshalSnapshot())) / n
				runtime.KeepAlive(e)
			}
			b.ReportMetric(perEntry, "bytes/entry")
			b.ReportMetric(estimate, "estimated-bytes/entry")
			b.ReportMetric(encoded, "snapshot-bytes/entry")
		})
	}
}
