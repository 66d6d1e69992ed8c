package ingest

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"tidemark"
)

// BenchmarkDirReadAligned is BenchmarkDirRead with the same lines written
// round-robin over 16 files: the worst case of aligned reading, where the
// lagging file changes at nearly every record.
func BenchmarkDirReadAligned(b *testing.B) {
	dir := b.TempDir()
	lines := benchLines(200_000)
	const files = 16
	bufs := make([]bytes.Buffer, files)
	for i, l := range lines {
		bufs[i%files].Write(l)
		bufs[i%files].WriteByte('\n')
	}
	size := 0
	for i := range bufs {
		size += bufs[i].Len()
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("host%02d.ndjson", i)), bufs[i].Bytes(), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	cfg := SourceConfig{Once: true, Clock: fixedClock, DecoderConfig: DecoderConfig{Keys: []string{"page"}, ValueField: "latency_ms", MaxFuture: -1}}
	b.SetBytes(int64(size))
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
