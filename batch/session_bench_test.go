package batch_test

import (
	"context"
	"math/rand/v2"
	"testing"
	"time"

	"tidemark"
	"tidemark/batch"
	"tidemark/lake"
)

// BenchmarkSessionize measures exact sessionization over raw_events: the
// rows of BenchmarkRecompute (1M over 24 event hours, 5 keys), gap 1s, so
// sessions are short and many; every session of the day.
func BenchmarkSessionize(b *testing.B) {
	ctx := context.Background()
	lk := openLake(b, tidemark.WindowSpec{Size: minute})
	rng := rand.New(rand.NewPCG(5, 6))
	const batches, per = 10, 100_000
	for i := range batches {
		recs := records(rng, per, 24*60*minute)
		if err := lk.AppendBatch(ctx, lake.Batch{AppID: "s", BatchID: int64(i), Records: recs}); err != nil {
			b.Fatal(err)
		}
	}
	q := batch.SessionQuery{Gap: time.Second, From: t0, To: t0 + 24*60*minute}
	b.ResetTimer()
	var rows, sessions int64
	for range b.N {
		got, st, err := batch.Sessionize(ctx, lk, q)
		if err != nil {
			b.Fatal(err)
		}
		rows += st.RowsRead
		sessions += int64(len(got))
	}
	b.ReportMetric(float64(rows)/b.Elapsed().Seconds(), "rows/s")
	b.ReportMetric(float64(sessions)/b.Elapsed().Seconds(), "sessions/s")
	b.ReportMetric(float64(sessions)/float64(b.N), "sessions/op")
}
