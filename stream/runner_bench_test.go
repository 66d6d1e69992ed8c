package stream

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// BenchmarkRunOnce is the stream end to end, in-process: NDJSON files ->
// decode -> engine -> raw_events, quarantine and window_results commits ->
// checkpoint, as `tidemark stream --once --drain` runs it (200k events,
// 1k keys, batches of 50k). scripts/bench.sh measures the same through the
// binary against DuckDB.
func BenchmarkRunOnce(b *testing.B) {
	const events, keys = 200_000, 1000
	dir := b.TempDir()
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var bytes int64
	for f := 0; f < 4; f++ {
		fh, err := os.Create(filepath.Join(dir, fmt.Sprintf("part-%d.ndjson", f)))
		if err != nil {
			b.Fatal(err)
		}
		w := bufio.NewWriter(fh)
		for i := f * events / 4; i < (f+1)*events/4; i++ {
			t := base.Add(time.Duration(i)*5*time.Millisecond - time.Duration(i%7)*time.Second)
			n, _ := fmt.Fprintf(w, `{"event_time":%q,"page":"/p%d","country":"c%d","value":%d.5}`+"\n", t.Format(time.RFC3339Nano), (i*7919)%keys, i%20, i%1000)
			bytes += int64(n)
		}
		if err := w.Flush(); err != nil {
			b.Fatal(err)
		}
		fh.Close()
	}
	b.SetBytes(bytes)
	b.ReportAllocs()
	b.ResetTimer()
	for n := 0; n < b.N; n++ {
		b.StopTimer()
		cfg := runnerConfig(b, dir, b.TempDir())
		cfg.Engine.Window.Size, cfg.Engine.Window.Slide = time.Minute.Microseconds(), time.Minute.Microseconds()
		cfg.Engine.Lateness = 10 * time.Second
		cfg.Once, cfg.Drain, cfg.MaxBatchRows = true, true, 50_000
		b.StartTimer()
		sum, err := Run(context.Background(), cfg)
		if err != nil {
			b.Fatal(err)
		}
		if sum.Lines != events {
			b.Fatalf("read %d lines, want %d", sum.Lines, events)
		}
	}
	b.ReportMetric(float64(events)*float64(b.N)/b.Elapsed().Seconds(), "events/s")
}
