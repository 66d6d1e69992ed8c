package stream

import (
	"fmt"
	"testing"

	"tidemark"
	"tidemark/ingest"
)

// BenchmarkDisorderMeasure is one batch of the disorder meter over a
// source of many files that all hold its watermark, read in runs of 100
// records a file, each file's event times rising: every record moves its
// file in the heap of holding files (sourceLevel.holding). One op is the
// batch; ns/record is what the meter adds to a record.
func BenchmarkDisorderMeasure(b *testing.B) {
	for _, files := range []int{8, 256} {
		b.Run(fmt.Sprintf("files=%d", files), func(b *testing.B) {
			const perFile, run = 2000, 100
			base := int64(1_772_359_200_000_000)
			var pos ingest.Position
			for f := range files {
				pos.Files = append(pos.Files, ingest.FilePosition{Path: fmt.Sprintf("f%03d.log", f), Max: base, HasMax: true, Hold: true})
			}
			var recs []tidemark.Record
			for r := 0; r < perFile; r += run {
				for f := range files {
					for i := range run {
						// File f lags f seconds: its records trail the others'.
						t := base + int64(r+i)*1e6 - int64(f)*1e6
						recs = append(recs, tidemark.Record{Source: "logs", File: pos.Files[f].Path, EventTime: t})
					}
				}
			}
			start := map[string]decodedPosition{"logs": {pos: pos}}
			end := map[string]decodedPosition{"logs": {pos: pos}}
			noBudget := func(string) int64 { return 0 }
			var m disorderMeter
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				m.measure(recs, start, end, nil, 0, false, noBudget)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(recs)), "ns/record")
			var sum int64
			for i := range recs {
				sum += recs[i].Disorder
			}
			if sum == 0 {
				b.Fatal("no record measured any disorder: the files do not interleave")
			}
		})
	}
}
