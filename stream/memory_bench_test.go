package stream

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"
)

// heapSampler is a progress writer that records the live heap after every
// batch (one progress line each).
type heapSampler struct{ live []uint64 }

func (h *heapSampler) Write(p []byte) (int, error) {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	h.live = append(h.live, ms.HeapAlloc)
	return len(p), nil
}

// BenchmarkLongRunMemory streams 1M events with a steady set of 500 keys
// over ~3 hours of event time in batches of 20k, from 50 files, and reports
// the live heap after each batch, averaged over the first and the second
// half of the run, and its peak: with state bounded by open windows × keys
// and finished files releasing their buffers, the halves stay level (SPEC
// §8 "memory flat"). A single sample is noisy: it depends on which batches
// are in flight.
func BenchmarkLongRunMemory(b *testing.B) {
	const events, files, keys = 1_000_000, 50, 500
	dir := b.TempDir()
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for f := 0; f < files; f++ {
		fh, err := os.Create(filepath.Join(dir, fmt.Sprintf("part-%03d.ndjson", f)))
		if err != nil {
			b.Fatal(err)
		}
		w := bufio.NewWriter(fh)
		for i := f * events / files; i < (f+1)*events/files; i++ {
			t := base.Add(time.Duration(i) * 10 * time.Millisecond)
			fmt.Fprintf(w, `{"event_time":%q,"page":"/p%d","value":%d}`+"\n", t.Format(time.RFC3339Nano), i%keys, i%1000)
		}
		if err := w.Flush(); err != nil {
			b.Fatal(err)
		}
		fh.Close()
	}
	for n := 0; n < b.N; n++ {
		cfg := runnerConfig(b, dir, b.TempDir())
		cfg.Engine.Window.Size = time.Minute.Microseconds()
		cfg.Engine.Window.Slide = cfg.Engine.Window.Size
		cfg.Once, cfg.Drain = true, true
		cfg.MaxBatchRows = 20_000
		h := &heapSampler{}
		cfg.Progress = h
		if _, err := Run(context.Background(), cfg); err != nil {
			b.Fatal(err)
		}
		live := h.live[:len(h.live)-1] // the last line is the drain
		half := len(live) / 2
		mean := func(v []uint64) float64 {
			var s float64
			for _, x := range v {
				s += float64(x)
			}
			return s / float64(len(v)) / (1 << 20)
		}
		var peak uint64
		for _, x := range live {
			peak = max(peak, x)
		}
		b.ReportMetric(mean(live[:half]), "heap-MB-1st-half")
		b.ReportMetric(mean(live[half:]), "heap-MB-2nd-half")
		b.ReportMetric(float64(peak)/(1<<20), "heap-MB-peak")
		b.ReportMetric(float64(len(live)), "batches")
	}
}
