package reconcile_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"tidemark"
	"tidemark/lake"
	"tidemark/reconcile"
)

// BenchmarkReconcileBytes compares what a reconcile reads when 1% of the
// event hours (raw_events partitions) hold late rows with a full recompute
// of the same lake (--from/--to over everything): the first scales with the
// affected partitions, the second with the lake.
func BenchmarkReconcileBytes(b *testing.B) {
	const hours, perHour = 100, 2000
	ctx := context.Background()
	setup := func(b *testing.B) *testLake {
		tl := newTestLake(b, tumbling)
		base := t0.UnixMicro()
		hour := int64(time.Hour / time.Microsecond)
		for h := range int64(hours) {
			recs := make([]tidemark.Record, perHour)
			for i := range recs {
				recs[i] = rec(i, base+h*hour+int64(i)*hour/perHour, fmt.Sprintf("k%d", i%5), float64(i))
				if h%100 == 7 && i%50 == 0 {
					recs[i].Status = tidemark.StatusLate // 1% of the hours
				}
			}
			w := base + (h+1)*hour
			err := tl.lk.AppendBatch(ctx, lake.Batch{AppID: "stream", BatchID: h, Records: recs,
				Closed: streamRows([]tidemark.Result{{Window: tidemark.Window{Start: base + h*hour, End: base + h*hour + 60*second}, Key: recs[0].Key, Agg: aggOf(0), Final: true}}, w, true)})
			if err != nil {
				b.Fatal(err)
			}
		}
		return tl
	}
	for _, mode := range []string{"late-1pct", "full"} {
		b.Run(mode, func(b *testing.B) {
			tl := setup(b)
			cfg := reconcile.Config{DryRun: true}
			if mode == "full" {
				cfg.From, cfg.To = t0.Add(-time.Hour), t0.Add((hours+1)*time.Hour)
			}
			b.ResetTimer()
			var rep *reconcile.Report
			for range b.N {
				rep = tl.reconcile(b, cfg)
			}
			b.ReportMetric(float64(rep.BytesRead), "bytes-read/op")
			b.ReportMetric(float64(rep.PartitionsRead), "partitions/op")
			b.ReportMetric(float64(rep.RowsRead), "rows-read/op")
		})
	}
}
