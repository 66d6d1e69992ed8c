package lateness

import (
	"context"
	"reflect"
	"testing"
	"time"

	"tidemark"
)

// TestReplayOnceEqualsPerEngine checks the one-pass what-if (one engine,
// its watermark shifted by each budget) against one engine per budget and
// rule, on lakes where the shift could go wrong: several files per source
// (the frontier caps each source's level), sliding windows (a row is late
// when its first window closed), several sources under --by source, and
// the sort spilling.
func TestReplayOnceEqualsPerEngine(t *testing.T) {
	budgets := []time.Duration{0, time.Second, 10 * time.Second, 30 * time.Second, time.Minute, 5 * time.Minute, time.Hour}
	for _, tc := range []struct {
		name string
		gen  genConfig
		cfg  Config
	}{
		{"files", genConfig{n: 6_000, sources: []string{"s1", "s2"}, files: 3, lateness: 30 * usSecond, seed: 3, maxBatch: 80}, Config{By: BySource}},
		{"sliding", genConfig{n: 6_000, sources: []string{"s1"}, slide: testWindow / 4, lateness: 10 * usSecond, seed: 4, maxBatch: 50}, Config{}},
		{"spill", genConfig{n: 6_000, sources: []string{"s1", "s2", "s3"}, files: 2, lateness: 30 * usSecond, seed: 5, maxBatch: 60}, Config{ChunkRows: 300, MaxBatchRows: 40}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := makeLake(t, tc.gen)
			win := tidemark.WindowSpec{Size: testWindow, Slide: tc.gen.slide}
			cfg := tc.cfg
			cfg.Budgets = budgets
			cfg.TempDir = t.TempDir()
			cfg.Replay = replayerFor(win)
			once, err := Run(context.Background(), d.lk, cfg)
			if err != nil {
				t.Fatal(err)
			}
			cfg.Replay = perEngine(replayerFor(win))
			each, err := Run(context.Background(), d.lk, cfg)
			if err != nil {
				t.Fatal(err)
			}
			var dropped int64
			for i := range once.Groups {
				g, w := once.Groups[i], each.Groups[i]
				if !reflect.DeepEqual(g.WhatIf, w.WhatIf) || g.RecommendedDropFraction != w.RecommendedDropFraction {
					t.Errorf("group %s: one pass gives %+v (drop fraction %v), one engine per budget %+v (%v)",
						g.Group, g.WhatIf, g.RecommendedDropFraction, w.WhatIf, w.RecommendedDropFraction)
				}
				for _, x := range g.WhatIf {
					dropped += x.DroppedEvent + x.DroppedWindow
				}
			}
			if dropped == 0 {
				t.Fatal("nothing dropped under any budget: the test proves nothing")
			}
		})
	}
}
