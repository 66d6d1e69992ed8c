package stream

import (
	"fmt"
	"testing"
	"time"

	"tidemark"
	"tidemark/stream/engine"
)

// BenchmarkWatermarkJump measures the batch in which a backlog clears
// (seed 001 question 3): a lagging file held the watermark for an hour of
// events over many keys, then catches up, and every window of that hour
// closes at once. One op is that one batch; ns/window and B/window say
// whether its cost stays in proportion to the windows it emits.
func BenchmarkWatermarkJump(b *testing.B) {
	for _, keys := range []int{1000, 10000} {
		for _, slide := range []time.Duration{0, 10 * time.Second} {
			b.Run(fmt.Sprintf("keys=%d/slide=%s", keys, slide), func(b *testing.B) {
				benchWatermarkJump(b, keys, slide)
			})
		}
	}
}

func benchWatermarkJump(b *testing.B, keys int, slide time.Duration) {
	spec, err := tidemark.NewWindowSpec(time.Minute, slide)
	if err != nil {
		b.Fatal(err)
	}
	base := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC).UnixMicro()
	keyOf := make([]tidemark.Key, keys)
	for i := range keyOf {
		keyOf[i] = tidemark.MakeKey(tidemark.KeyPart{Value: fmt.Sprintf("/page/%d", i)})
	}
	// One hour of backlog: every key has an event in every 10 s.
	var backlog []tidemark.Record
	for s := int64(0); s < 3600; s += 10 {
		for k := range keys {
			backlog = append(backlog, tidemark.Record{Source: "logs", EventTime: base + s*1e6 + int64(k%10)*1e6/10, Key: keyOf[k], Value: 1, HasValue: true})
		}
	}
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	var emitted int
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		e, err := engine.New(engine.Config{Window: spec, Lateness: 5 * time.Second}, nil)
		if err != nil {
			b.Fatal(err)
		}
		e.SetFrontier("logs", tidemark.MinTime, true) // a file with unread data holds the watermark
		for i := 0; i < len(backlog); i += 50000 {
			recs := backlog[i:min(i+50000, len(backlog))]
			if res := e.Process(recs, now); len(res.Emitted) != 0 {
				b.Fatalf("windows closed while the watermark was held: %d", len(res.Emitted))
			}
		}
		e.SetFrontier("logs", 0, false) // it caught up: nothing holds
		b.StartTimer()
		res := e.Process(nil, now)
		emitted = len(res.Emitted)
		if emitted == 0 {
			b.Fatal("nothing closed")
		}
	}
	b.ReportMetric(float64(emitted), "windows/batch")
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(emitted), "ns/window")
}
