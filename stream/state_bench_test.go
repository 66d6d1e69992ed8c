package stream

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"tidemark"
	"tidemark/lake/store"
	"tidemark/stream/engine"
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
func openState(b *testing.B, keys []tidemark.Key) *engine.Engine {
	return openStateIn(b, keys, "")
}

// openStateIn is openState on the Pebble store in dir, or in memory when
// dir is "". The Pebble engine is flushed after each batch, as the runner's
// commit does.
func openStateIn(b *testing.B, keys []tidemark.Key, dir string) *engine.Engine {
	e, _ := openStateStore(b, keys, dir)
	return e
}

// openStateStore is openStateIn returning the Pebble store too (nil in
// memory).
func openStateStore(b *testing.B, keys []tidemark.Key, dir string) (*engine.Engine, *pebbleStore) {
	cfg := engine.Config{Window: tidemark.WindowSpec{Size: 1000}, Lateness: (1 << 40) * time.Microsecond}
	var e *engine.Engine
	var st *pebbleStore
	if dir == "" {
		var err error
		if e, err = engine.New(cfg, nil); err != nil {
			b.Fatal(err)
		}
	} else {
		e, st = newDiskEngineStore(b, cfg, dir)
	}
	recs := make([]tidemark.Record, 0, 10_000)
	for i := 0; i < len(keys); i += cap(recs) {
		recs = recs[:0]
		for _, k := range keys[i:min(i+cap(recs), len(keys))] {
			recs = append(recs, tidemark.Record{Source: "s", EventTime: 1, Key: k, Value: 1, HasValue: true})
		}
		e.Process(recs, t0)
		if err := e.Flush(engine.FlushTag{StreamID: "bench", BatchID: int64(i)}); err != nil { // a memory engine has nothing to flush
			b.Fatal(err)
		}
	}
	return e, st
}

// BenchmarkBatchVsState measures one micro-batch of 10k records updating
// random open pairs, plus its changelog encoding (the checkpoint's share of
// the batch) and, on the Pebble store, its flush to the database, over open
// states of 10k to 1M pairs on both stores: the cost should be flat in the
// state size. It also reports what a snapshot batch adds: the whole state
// encoded (memory) or scanned twice from Pebble (measure, then stream).
func BenchmarkBatchVsState(b *testing.B) {
	for _, st := range []StateStore{StateMemory, StatePebble} {
		for _, n := range []int{10_000, 100_000, 1_000_000} {
			b.Run(fmt.Sprintf("%s/open=%d", st, n), func(b *testing.B) {
				keys := userKeys(n)
				dir := ""
				if st == StatePebble {
					dir = b.TempDir()
				}
				e := openStateIn(b, keys, dir)
				rng := rand.New(rand.NewPCG(1, 2))
				batch := make([]tidemark.Record, 10_000)
				var bytes int
				var cpu int64
				id := int64(n)
				for b.Loop() {
					b.StopTimer()
					for i := range batch {
						batch[i] = tidemark.Record{Source: "s", EventTime: 1 + rng.Int64N(999), Key: keys[rng.IntN(n)], Value: 2, HasValue: true}
					}
					b.StartTimer()
					c0 := cpuTime()
					e.Process(batch, t0)
					data, _ := e.Changes().MarshalBinary()
					if st == StatePebble {
						id++
						if err := e.Flush(engine.FlushTag{StreamID: "bench", BatchID: id}); err != nil {
							b.Fatal(err)
						}
					}
					cpu += cpuTime() - c0
					bytes = len(data)
				}
				b.ReportMetric(float64(cpu)/float64(b.N), "cpu-ns/batch") // on a shared machine CPU time is the steadier figure
				b.ReportMetric(float64(bytes), "changelog-bytes")
				// What a snapshot batch adds (and what each batch cost before
				// changelogs): the whole state encoded.
				c0 := cpuTime()
				var size int64
				if st == StateMemory {
					size = int64(len(e.MarshalSnapshot()))
				} else {
					snap, err := e.Snapshot() // the first scan measures it
					if err != nil {
						b.Fatal(err)
					}
					if size, _, err = snap.WriteTo(io.Discard); err != nil { // the second streams it
						b.Fatal(err)
					}
					snap.Release()
				}
				b.ReportMetric(float64(cpuTime()-c0), "snapshot-cpu-ns")
				b.ReportMetric(float64(size), "snapshot-bytes")
			})
		}
	}
}

// BenchmarkStateBytesPebble measures what an open pair costs on the Pebble
// store: 1M per-user pairs written through the engine, then the Go heap
// still held per pair (the slab of the last batch, Pebble's memtable and
// cache when cgo is off), the resident set's growth per pair (Linux) and
// the database's size on disk per pair after its memtable is flushed.
func BenchmarkStateBytesPebble(b *testing.B) {
	const n = 1_000_000
	var heap, rss, disk float64
	for b.Loop() {
		keys := userKeys(n)
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		rss0 := residentBytes()
		e, st := openStateStore(b, keys, b.TempDir())
		keys = nil
		runtime.GC()
		runtime.ReadMemStats(&after)
		if e.OpenRows() != n {
			b.Fatalf("got %d open pairs, want %d", e.OpenRows(), n)
		}
		if err := st.db.Flush(); err != nil {
			b.Fatal(err)
		}
		heap = (float64(after.HeapAlloc) - float64(before.HeapAlloc)) / n
		rss = float64(residentBytes()-rss0) / n
		disk = float64(st.Bytes()) / n
		if err := e.Close(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(heap, "heap-bytes/pair")
	b.ReportMetric(rss, "rss-bytes/pair")
	b.ReportMetric(disk, "disk-bytes/pair")
}

// residentBytes is the process's resident set (Linux /proc), 0 elsewhere.
func residentBytes() int64 {
	data, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return 0
	}
	var size, res int64
	if _, err := fmt.Sscan(string(data), &size, &res); err != nil {
		return 0
	}
	return res * int64(os.Getpagesize())
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
		if e.OpenRows() != n {
			b.Fatalf("got %d open pairs, want %d", e.OpenRows(), n)
		}
		perPair = float64(after.HeapAlloc-before.HeapAlloc) / n
		estimate = float64(e.StateBytes()) / n
		runtime.KeepAlive(e)
	}
	b.ReportMetric(perPair, "bytes/pair")
	b.ReportMetric(estimate, "estimated-bytes/pair")
}
