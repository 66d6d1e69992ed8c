package stream

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"tidemark"
	"tidemark/lake/store"
	"tidemark/stream/engine"
)

// perUserRecords makes n events shaped like `scripts/gen -rate 2000`'s: 2000
// events per second of event time, up to 2 s out of order, keyed by user
// (Zipf over a million ids, as the generator draws them) or by page (50).
// Every event's key is a fresh string, as a decoder that stopped interning
// hands them over.
func perUserRecords(n int, byUser bool) []tidemark.Record {
	rng := rand.New(rand.NewPCG(7, 7))
	zipf := rand.NewZipf(rand.New(rand.NewPCG(8, 8)), 1.05, 10, 999_999)
	pages := rand.NewZipf(rand.New(rand.NewPCG(9, 9)), 1.1, 1, 49)
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixMicro()
	recs := make([]tidemark.Record, n)
	for i := range recs {
		var v string
		if byUser {
			v = fmt.Sprintf("u%d", zipf.Uint64())
		} else {
			v = fmt.Sprintf("/p/%d", pages.Uint64())
		}
		recs[i] = tidemark.Record{
			Source:    "in",
			EventTime: base + int64(i)*500 - rng.Int64N(2_000_000),
			Key:       tidemark.MakeKey(tidemark.KeyPart{Value: v}),
			Value:     float64(rng.IntN(1000)) / 10,
			HasValue:  true,
		}
	}
	return recs
}

// BenchmarkPerUserStream is the engine's and the checkpoint's part of the
// issue-16 run (`stream --once --drain --window 1m --lateness 5m`, 600k
// events in batches of 100k): every batch processed and checkpointed by the
// snapshot rule to a directory store, then the drain. It reports the CPU of
// each part per run, for keys by page (50) and by user (~220k open pairs at
// the drain): the per-user extra the runner's share of the ratio comes from;
// and what a restart after the last batch before the drain costs (reading
// the snapshot and changelogs the rule left, and building the engine).
func BenchmarkPerUserStream(b *testing.B) {
	const events, batch = 600_000, 100_000
	for _, byUser := range []bool{false, true} {
		name := "page"
		if byUser {
			name = "user"
		}
		b.Run(name, func(b *testing.B) {
			recs := perUserRecords(events, byUser)
			cfg := engine.Config{Window: tidemark.WindowSpec{Size: time.Minute.Microseconds()}, Lateness: 5 * time.Minute}
			ctx := context.Background()
			var process, ckpt, drain, restart, written int64
			var windows int
			work := make([]tidemark.Record, batch)
			for b.Loop() {
				b.StopTimer()
				dir, err := store.OpenDir(b.TempDir())
				if err != nil {
					b.Fatal(err)
				}
				ck := &checkpoint{st: dir}
				e, err := engine.New(cfg, nil)
				if err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				id := int64(0)
				for i := 0; i < len(recs); i += batch {
					copy(work, recs[i:i+batch])
					c0 := cpuTime()
					e.Process(work, t0)
					c1 := cpuTime()
					if err := ck.commit(ctx, id, nil, e, nil); err != nil {
						b.Fatal(err)
					}
					if err := ck.cleanup(ctx, id); err != nil {
						b.Fatal(err)
					}
					process += c1 - c0
					ckpt += cpuTime() - c1
					id++
				}
				c0 := cpuTime()
				rec, err := (&checkpoint{st: dir}).recover(ctx)
				if err != nil {
					b.Fatal(err)
				}
				again, err := rec.engine(cfg)
				if err != nil || again.OpenRows() != e.OpenRows() {
					b.Fatalf("restart: %v, %d open rows, want %d", err, again.OpenRows(), e.OpenRows())
				}
				restart += cpuTime() - c0
				c0 = cpuTime()
				res, after := e.DrainForCheckpoint()
				if err := ck.commit(ctx, id, nil, e, after); err != nil {
					b.Fatal(err)
				}
				drain += cpuTime() - c0
				windows = len(res.Emitted)
				written += ck.takeWritten()
			}
			n := int64(b.N)
			b.ReportMetric(float64(process/n)/1e6, "process-cpu-ms")
			b.ReportMetric(float64(ckpt/n)/1e6, "checkpoint-cpu-ms")
			b.ReportMetric(float64(drain/n)/1e6, "drain-cpu-ms")
			b.ReportMetric(float64(restart/n)/1e6, "restart-cpu-ms")
			b.ReportMetric(float64(written/n)/(1<<20), "checkpoint-MiB")
			b.ReportMetric(float64(windows), "windows")
		})
	}
}
