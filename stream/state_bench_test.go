package stream

import (
	"context"
	"fmt"
	"math/rand/v2"
	"runtime"
	"strings"
	"testing"
	"time"

	"tidemark"
	"tidemark/lake/store"
)

// userKeys makes n distinct keys shaped like a user id, each a fresh string.
func userKeys(n int) []tidemark.Key {
	keys := make([]tidemark.Key, n)
	for i := range keys {
		keys[i] = tidemark.Key(strings.Clone(string(tidemark.MakeKey(tidemark.KeyPart{Value: fmt.Sprintf("u%07d", i)}))))
	}
	return keys
}

// openState returns an engine holding n open (window, key) pairs: n keys in
// one window that nothing closes (the lateness is far beyond the span).
func openState(b *testing.B, keys []tidemark.Key) *Engine {
	e, err := New(Config{Window: tidemark.WindowSpec{Size: 1000}, Lateness: (1 << 40) * time.Microsecond}, nil)
	if err != nil {
		b.Fatal(err)
	}
	recs := make([]tidemark.Record, 0, 10_000)
	for i := 0; i < len(keys); i += cap(recs) {
		recs = recs[:0]
		for _, k := range keys[i:min(i+cap(recs), len(keys))] {
			recs = append(recs, tidemark.Record{Source: "s", EventTime: 1, Key: k, Value: 1, HasValue: true})
		}
		e.Process(recs, t0)
	}
	return e
}

// BenchmarkBatchVsState measures one micro-batch of 10k records updating
// random open pairs, plus its changelog encoding (the checkpoint's share of
// the batch), over open states of 10k to 1M pairs: the cost should be flat
// in the state size.
func BenchmarkBatchVsState(b *testing.B) {
	for _, n := range []int{10_000, 100_000, 1_000_000} {
		b.Run(fmt.Sprintf("open=%d", n), func(b *testing.B) {
			keys := userKeys(n)
			e := openState(b, keys)
			rng := rand.New(rand.NewPCG(1, 2))
			batch := make([]tidemark.Record, 10_000)
			var bytes int
			var cpu int64
			for b.Loop() {
				b.StopTimer()
				for i := range batch {
					batch[i] = tidemark.Record{Source: "s", EventTime: 1 + rng.Int64N(999), Key: keys[rng.IntN(n)], Value: 2, HasValue: true}
				}
				b.StartTimer()
				c0 := cpuTime()
				e.Process(batch, t0)
				data, _ := e.Changes().MarshalBinary()
				cpu += cpuTime() - c0
				bytes = len(data)
			}
			b.ReportMetric(float64(cpu)/float64(b.N), "cpu-ns/batch") // on a shared machine CPU time is the steadier figure
			b.ReportMetric(float64(bytes), "changelog-bytes")
			// For comparison, what each batch cost before changelogs: the
			// whole state sorted and encoded (now: a snapshot's cost).
			c0 := cpuTime()
			data, _ := e.State().MarshalBinary()
			b.ReportMetric(float64(cpuTime()-c0), "full-state-cpu-ns")
			b.ReportMetric(float64(len(data)), "full-state-bytes")
		})
	}
}

// BenchmarkCheckpointBytes commits 60 batches through a directory
// checkpoint over an open state of 100k pairs, each batch touching k
// pairs, and reports the checkpoint bytes written per batch (changelogs and
// the snapshots the rule writes, amortized; the first snapshot excluded)
// and per changed pair.
func BenchmarkCheckpointBytes(b *testing.B) {
	const n, batches = 100_000, 60
	keys := userKeys(n)
	for _, k := range []int{10, 1000, 10_000} {
		b.Run(fmt.Sprintf("changed=%d", k), func(b *testing.B) {
			var perBatch float64
			for b.Loop() {
				b.StopTimer()
				e := openState(b, keys)
				dir, err := store.OpenDir(b.TempDir())
				if err != nil {
					b.Fatal(err)
				}
				ck := &checkpoint{st: dir}
				ctx := context.Background()
				if err := ck.commit(ctx, 0, nil, e, nil); err != nil {
					b.Fatal(err)
				}
				ck.takeWritten()
				rng := rand.New(rand.NewPCG(3, uint64(k)))
				batch := make([]tidemark.Record, k)
				b.StartTimer()
				var total int64
				for id := int64(1); id <= batches; id++ {
					for i := range batch {
						batch[i] = tidemark.Record{Source: "s", EventTime: 1, Key: keys[rng.IntN(n)], Value: 1, HasValue: true}
					}
					e.Process(batch, t0)
					if err := ck.commit(ctx, id, nil, e, nil); err != nil {
						b.Fatal(err)
					}
					if err := ck.cleanup(ctx, id); err != nil {
						b.Fatal(err)
					}
					total += ck.takeWritten()
				}
				perBatch = float64(total) / batches
			}
			b.ReportMetric(perBatch, "ckpt-bytes/batch")
			b.ReportMetric(perBatch/float64(k), "ckpt-bytes/changed-pair")
		})
	}
}

// BenchmarkStateBytesPerUser measures the heap held per open (window, key)
// when every pair has a key of its own (per-user state: 200k users, each in
// 1 window), next to the engine's own estimate (state_bytes).
func BenchmarkStateBytesPerUser(b *testing.B) {
	const n = 200_000
	var perPair, estimate float64
	for b.Loop() {
		keys := userKeys(n)
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		e := openState(b, keys)
		keys = nil
		runtime.GC()
		runtime.ReadMemStats(&after)
		if e.index.Len() != n {
			b.Fatalf("got %d open pairs, want %d", e.index.Len(), n)
		}
		perPair = float64(after.HeapAlloc-before.HeapAlloc) / n
		estimate = float64(e.stateBytes()) / n
		runtime.KeepAlive(e)
	}
	b.ReportMetric(perPair, "bytes/pair")
	b.ReportMetric(estimate, "estimated-bytes/pair")
}
