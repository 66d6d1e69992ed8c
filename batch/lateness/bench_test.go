package lateness

import (
	"context"
	"testing"
)

// BenchmarkRun measures the whole report over raw_events: the scan, the
// sketches and the replay (one engine for every budget and rule, replayOnce).
// rows/s counts raw_events rows.
func BenchmarkRun(b *testing.B) {
	const n = 200_000
	d := makeLake(b, genConfig{n: n, sources: []string{"s1", "s2"}, lateness: 30 * usSecond, seed: 10, maxBatch: 10_000})
	for _, bc := range []struct {
		name string
		cfg  Config
	}{
		{"memory", Config{}},
		{"spill", Config{ChunkRows: 1 << 14}},
		{"by-source", Config{By: BySource}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			cfg := bc.cfg
			cfg.Replay = testReplayer
			cfg.TempDir = b.TempDir()
			for b.Loop() {
				if _, err := Run(context.Background(), d.lk, cfg); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
		})
	}
}

// BenchmarkSketchAdd is the per-value cost of one sketch.
func BenchmarkSketchAdd(b *testing.B) {
	var s Sketch
	v := int64(1)
	for b.Loop() {
		v = v*6364136223846793005 + 1442695040888963407
		s.Add(v >> 30)
	}
}
