package stream

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"tidemark"
	"tidemark/stream/engine"
)

// Helpers the runner's tests share with stream/engine's (each package has
// its own copy: test files do not cross packages).

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// batchIn is one micro-batch of a generated run.
type batchIn struct {
	recs []tidemark.Record
	now  time.Time
}

func mustNew(t testing.TB, cfg engine.Config, st *engine.State) *engine.Engine {
	t.Helper()
	e, err := engine.New(cfg, st)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return e
}

// genRun draws a random configuration (stream/engine's property tests
// draw from the same) and a random run of batches.
func genRun(rng *rand.Rand) (engine.Config, []batchIn) {
	size := 1 + rng.Int64N(20)
	slide := size
	if rng.IntN(2) == 0 {
		slide = 1 + rng.Int64N(size)
	}
	cfg := engine.Config{
		Window:     tidemark.WindowSpec{Size: size, Slide: slide},
		Lateness:   time.Duration(rng.Int64N(15)) * time.Microsecond,
		LateRule:   engine.LateRule(rng.IntN(2)),
		OutputMode: engine.OutputMode(rng.IntN(2)),
		Policy:     engine.Policy(rng.IntN(2)),
	}
	if rng.IntN(2) == 0 {
		cfg.IdleTimeout = time.Duration(1+rng.IntN(5)) * time.Second
	}
	nsrc := 1 + rng.IntN(3)
	clocks := make([]int64, nsrc)
	base := rng.Int64N(2000) - 1000
	for i := range clocks {
		clocks[i] = base + rng.Int64N(20)
	}
	keys := []tidemark.Key{"", tidemark.MakeKey(tidemark.KeyPart{Null: true}), tidemark.MakeKey(tidemark.KeyPart{Value: "a"}), tidemark.MakeKey(tidemark.KeyPart{Value: "b"})}
	keys = keys[:1+rng.IntN(len(keys))]
	var recs []tidemark.Record
	for range 1 + rng.IntN(150) {
		s := rng.IntN(nsrc)
		clocks[s] += rng.Int64N(4)
		r := tidemark.Record{
			Source:    fmt.Sprintf("src%d", s),
			EventTime: clocks[s] - rng.Int64N(1+rng.Int64N(25)),
			Key:       keys[rng.IntN(len(keys))],
		}
		if rng.IntN(3) > 0 {
			r.Value, r.HasValue = float64(rng.IntN(100)-50), true
		}
		switch rng.IntN(20) {
		case 0:
			r.Reason, r.EventTime = tidemark.ReasonFutureTime, clocks[s]+1_000_000
		case 1:
			r.Reason, r.EventTime = tidemark.ReasonMalformed, 0
		}
		recs = append(recs, r)
	}
	var batches []batchIn
	now := time.Unix(1_700_000_000, 0)
	for len(recs) > 0 {
		n := min(len(recs), 1+rng.IntN(8))
		if rng.IntN(10) == 0 {
			n = 0 // an empty batch: only the clock moves
		}
		now = now.Add(time.Duration(rng.IntN(3000)) * time.Millisecond)
		batches = append(batches, batchIn{recs: slices.Clone(recs[:n]), now: now})
		recs = recs[n:]
	}
	return cfg, batches
}
