package engine

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"strings"
	"testing"
	"time"

	"tidemark"
)

// benchRecords makes n events over nkeys keys from 2 sources, 10k events
// per second of event time, each up to 2 s out of order.
func benchRecords(n, nkeys int) []tidemark.Record {
	rng := rand.New(rand.NewPCG(1, 1))
	keys := make([]tidemark.Key, nkeys)
	for i := range keys {
		keys[i] = tidemark.MakeKey(tidemark.KeyPart{Value: fmt.Sprintf("/page/%04d", i)})
	}
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixMicro()
	recs := make([]tidemark.Record, n)
	for i := range recs {
		recs[i] = tidemark.Record{
			Source:    []string{"logs/a", "logs/b"}[i&1],
			EventTime: base + int64(i)*100 - rng.Int64N(2_000_000),
			Key:       keys[rng.IntN(nkeys)],
			Value:     float64(rng.IntN(1000)) / 10,
			HasValue:  true,
		}
	}
	return recs
}

// BenchmarkProcess feeds 1M events over 1k keys in batches of 10k through
// a fresh engine per iteration, with 1-minute windows and 5 s of lateness.
func BenchmarkProcess(b *testing.B) {
	const events, batch = 1_000_000, 10_000
	recs := benchRecords(events, 1000)
	minute := time.Minute.Microseconds()
	for _, bc := range []struct {
		name string
		spec tidemark.WindowSpec
		rule LateRule
		mode OutputMode
	}{
		{"tumbling", tidemark.WindowSpec{Size: minute}, LateWindow, Append},
		{"tumbling-update", tidemark.WindowSpec{Size: minute}, LateWindow, Update},
		{"sliding-1m-10s", tidemark.WindowSpec{Size: minute, Slide: minute / 6}, LateWindow, Append},
		{"tumbling-event-rule", tidemark.WindowSpec{Size: minute}, LateEvent, Append},
	} {
		b.Run(bc.name, func(b *testing.B) {
			cfg := Config{Window: bc.spec, Lateness: 5 * time.Second, LateRule: bc.rule, OutputMode: bc.mode}
			var ms0, ms1 runtime.MemStats
			runtime.ReadMemStats(&ms0)
			now := time.Unix(0, 0)
			var emitted int
			cpu0 := cpuTime()
			b.ResetTimer()
			for b.Loop() {
				e, err := New(cfg, nil)
				if err != nil {
					b.Fatal(err)
				}
				for i := 0; i < len(recs); i += batch {
					emitted += len(e.Process(recs[i:i+batch], now).Emitted)
				}
				emitted += len(e.Drain().Emitted)
			}
			b.StopTimer()
			cpu := cpuTime() - cpu0
			runtime.ReadMemStats(&ms1)
			total := float64(b.N) * events
			b.ReportMetric(total/b.Elapsed().Seconds(), "events/s")
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/total, "ns/event")
			b.ReportMetric(float64(cpu)/total, "cpu-ns/event") // includes GC on other threads
			b.ReportMetric(float64(ms1.Mallocs-ms0.Mallocs)/total, "allocs/event")
			b.ReportMetric(float64(emitted)/float64(b.N), "windows/op")
		})
	}
}

// BenchmarkStateBytes measures the heap held per open (window, key):
// 1k keys (12-byte encodings) in 100 open windows, nothing closed.
func BenchmarkStateBytes(b *testing.B) {
	const nkeys, nwins = 1000, 100
	keys := make([]tidemark.Key, nkeys)
	for i := range keys {
		keys[i] = tidemark.MakeKey(tidemark.KeyPart{Value: fmt.Sprintf("/page/%04d", i)})
	}
	recs := make([]tidemark.Record, 0, nkeys)
	var perEntry, estimate float64
	for b.Loop() {
		// Lateness far beyond the span keeps W from closing anything.
		e, err := New(Config{Window: tidemark.WindowSpec{Size: 10}, Lateness: (1 << 40) * time.Microsecond}, nil)
		if err != nil {
			b.Fatal(err)
		}
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		for w := range nwins {
			recs = recs[:0]
			for _, k := range keys {
				// A fresh key string per row, as a decoder makes: the
				// entry keeps its first row's key bytes alive.
				k = tidemark.Key(strings.Clone(string(k)))
				recs = append(recs, tidemark.Record{Source: "s", EventTime: int64(w) * 10, Key: k, Value: 1, HasValue: true})
			}
			e.Process(recs, time.Time{})
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		n := float64(e.index.Len())
		if n != nkeys*nwins {
			b.Fatalf("got %v open entries, want %d", n, nkeys*nwins)
		}
		perEntry = float64(after.HeapAlloc-before.HeapAlloc) / n
		estimate = float64(e.StateBytes()) / n
		runtime.KeepAlive(e)
	}
	b.ReportMetric(perEntry, "bytes/entry")
	b.ReportMetric(estimate, "estimated-bytes/entry")
}
