package ingest

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"

	"tidemark"
)

// BenchmarkDirRead measures a --once read of an NDJSON file: splitting,
// payload copies and decoding, in batches of 65536 records.
func BenchmarkDirRead(b *testing.B) {
	dir := b.TempDir()
	lines := benchLines(200_000)
	data := append(bytes.Join(lines, []byte("\n")), '\n')
	if err := os.WriteFile(filepath.Join(dir, "events.ndjson"), data, 0o644); err != nil {
		b.Fatal(err)
	}
	cfg := SourceConfig{Once: true, Clock: fixedClock, DecoderConfig: DecoderConfig{Keys: []string{"page"}, ValueField: "latency_ms", MaxFuture: -1}}
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	batch := make([]tidemark.Record, 0, 65536)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		s, err := Open(context.Background(), dir, cfg, Position{})
		if err != nil {
			b.Fatal(err)
		}
		n := 0
		for !s.Exhausted() {
			batch, err = s.Read(context.Background(), batch[:0], cap(batch))
			if err != nil {
				b.Fatal(err)
			}
			n += len(batch)
		}
		s.Close()
		if n != len(lines) {
			b.Fatalf("read %d records, want %d", n, len(lines))
		}
	}
	b.ReportMetric(float64(b.N*len(lines))/b.Elapsed().Seconds(), "lines/s")
}
