package batch_test

import (
	"context"
	"math/rand/v2"
	"testing"

	"tidemark"
	"tidemark/batch"
	"tidemark/lake"
)

// BenchmarkRecompute measures recomputation throughput over raw_events:
// 1M rows over 24 event hours, 1-minute tumbling windows, every window.
func BenchmarkRecompute(b *testing.B) {
	for _, workers := range []int{1, 2} {
		b.Run(map[int]string{1: "workers=1", 2: "workers=2"}[workers], func(b *testing.B) {
			benchRecompute(b, workers)
		})
	}
}

func benchRecompute(b *testing.B, workers int) {
	ctx := context.Background()
	spec := tidemark.WindowSpec{Size: minute, Slide: minute}
	lk := openLake(b, spec)
	rng := rand.New(rand.NewPCG(5, 6))
	const batches, per = 10, 100_000
	for i := range batches {
		recs := records(rng, per, 24*60*minute)
		if err := lk.AppendBatch(ctx, lake.Batch{AppID: "s", BatchID: int64(i), Records: recs}); err != nil {
			b.Fatal(err)
		}
	}
	q := batch.Query{From: t0, To: t0 + 24*60*minute, Workers: workers}
	b.ResetTimer()
	var rows int64
	var st batch.Stats
	for range b.N {
		var err error
		_, st, err = batch.Recompute(ctx, lk, q)
		if err != nil {
			b.Fatal(err)
		}
		rows += st.RowsRead
	}
	b.ReportMetric(float64(rows)/b.Elapsed().Seconds(), "rows/s")
	b.ReportMetric(float64(st.BytesRead), "bytes/op-read")
}
