package reconcile_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"tidemark"
	"tidemark/lake"
	"tidemark/lake/store"
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

// BenchmarkReconcileAggs compares a full reconcile (every window of 200,000
// rows, dry run) of a lake without --agg with the same over a lake with
// avg, p50, p99 and count_distinct: what exact aggregates cost. Each row
// has a latency and a user among 5,000.
func BenchmarkReconcileAggs(b *testing.B) {
	const hours, perHour = 20, 10_000
	ctx := context.Background()
	for _, mode := range []string{"plain", "aggs"} {
		b.Run(mode, func(b *testing.B) {
			var aggs tidemark.AggList
			if mode == "aggs" {
				var err error
				if aggs, err = tidemark.ParseAggs([]string{"avg(lat)", "p50(lat)", "p99(lat)", "count_distinct(user)"}); err != nil {
					b.Fatal(err)
				}
			}
			st, err := store.OpenDir(b.TempDir())
			if err != nil {
				b.Fatal(err)
			}
			lk, err := lake.Open(ctx, st, lake.Config{Keys: []string{"k"}, ValueField: "v", Window: tumbling, Aggs: aggs})
			if err != nil {
				b.Fatal(err)
			}
			tl := &testLake{st: st, lk: lk}
			base := t0.UnixMicro()
			hour := int64(time.Hour / time.Microsecond)
			for h := range int64(hours) {
				recs := make([]tidemark.Record, perHour)
				for i := range recs {
					recs[i] = rec(i, base+h*hour+int64(i)*hour/perHour, fmt.Sprintf("k%d", i%50), float64(i%1000))
					if !aggs.Empty() {
						recs[i].Fields = []tidemark.AggValue{{Num: float64((i * 7919) % 5000), Present: true}, {Text: fmt.Sprintf("u%d", (i*31)%5000), Present: true}}
					}
				}
				w := base + (h+1)*hour
				if err := lk.AppendBatch(ctx, lake.Batch{AppID: "stream", BatchID: h, Records: recs, Watermark: &w}); err != nil {
					b.Fatal(err)
				}
			}
			cfg := reconcile.Config{DryRun: true, From: t0.Add(-time.Hour), To: t0.Add((hours + 1) * time.Hour)}
			b.ResetTimer()
			var rep *reconcile.Report
			for range b.N {
				rep = tl.reconcile(b, cfg)
			}
			b.ReportMetric(float64(rep.RowsRead)*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
			b.ReportMetric(float64(rep.Checked), "windows/op")
		})
	}
}
