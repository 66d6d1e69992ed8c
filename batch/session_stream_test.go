package batch_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"tidemark"
	"tidemark/batch"
	"tidemark/lake"
	"tidemark/stream/engine"
)

// TestStreamSessionsAgreeWithBatch runs random arrival orders, batch
// sizes, gaps, budgets and both late rules through the stream's session
// engine (drained at the end), stores every row with the status the
// stream gave it, and sessionizes the lake. Where they must agree, they
// do:
//   - a key without late rows has exactly the stream's sessions;
//   - every stream session lies inside exactly one batch session, and a
//     batch session's rows are those of the stream sessions inside it
//     plus its late rows (what reconcile replaces and merges);
//   - the stream never emits two overlapping sessions of a key.
func TestStreamSessionsAgreeWithBatch(t *testing.T) {
	runs := 12
	if testing.Short() {
		runs = 4
	}
	for seed := range runs {
		run := streamSessions(t, uint64(seed), true)
		if err := checkAgreement(run.emitted, run.exact); err != nil {
			t.Fatalf("seed %d gap %v cfg %+v: %v", seed, run.gap, run.cfg, err)
		}
	}
}

// sessionRun is one random stream run over a lake and its exact sessions.
type sessionRun struct {
	gap     time.Duration
	cfg     engine.Config
	emitted []tidemark.Result // every session the stream emitted
	w       int64             // the stream's W at the end
	exact   []batch.Row       // Sessionize over every row
}

// streamSessions runs random rows (arrival roughly in event-time order,
// random batch sizes, gap, budget and late rule) through the session
// engine, stores every row with the status the stream gave it, drains
// when drain is set, and sessionizes the whole lake.
func streamSessions(t *testing.T, seed uint64, drain bool) sessionRun {
	t.Helper()
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(seed, 17))
	run := sessionRun{
		gap: time.Duration(1+rng.Int64N(20)) * time.Minute,
		cfg: engine.Config{Lateness: time.Duration(rng.Int64N(30)) * time.Minute, LateRule: engine.LateRule(rng.IntN(2))},
	}
	e, err := engine.NewSessionEngine(run.gap, run.cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	lk := openLake(t, tidemark.WindowSpec{Size: 10 * minute})
	recs := records(rng, 100+rng.IntN(400), 6*60*minute)
	slices.SortFunc(recs, func(a, b tidemark.Record) int {
		return int((a.EventTime + a.Offset%7*3*minute) - (b.EventTime + b.Offset%7*3*minute))
	})
	for i, id := 0, int64(0); i < len(recs); id++ {
		n := min(len(recs)-i, 1+rng.IntN(40))
		part := recs[i : i+n]
		res := e.Process(part, time.Unix(id, 0))
		run.emitted, run.w = append(run.emitted, res.Emitted...), res.Watermark
		if err := lk.AppendBatch(ctx, lake.Batch{AppID: "s", BatchID: id, Records: part}); err != nil {
			t.Fatal(err)
		}
		i += n
	}
	if drain {
		res := e.Drain()
		run.emitted, run.w = append(run.emitted, res.Emitted...), res.Watermark
	}
	run.exact, _, err = batch.Sessionize(ctx, lk, batch.SessionQuery{Gap: run.gap, From: t0 - 24*60*minute, To: t0 + 48*60*minute})
	if err != nil {
		t.Fatal(err)
	}
	return run
}

func checkAgreement(streamed []tidemark.Result, exact []batch.Row) error {
	lateKeys := map[tidemark.Key]bool{}
	for _, r := range exact {
		if r.Late > 0 {
			lateKeys[r.Key] = true
		}
	}
	inside := make([]tidemark.Agg, len(exact))
	byKey := map[tidemark.Key][]tidemark.Window{}
	for _, s := range streamed {
		byKey[s.Key] = append(byKey[s.Key], s.Window)
		n := 0
		for i, b := range exact {
			if b.Key == s.Key && b.Window.Start <= s.Window.Start && s.Window.End <= b.Window.End {
				n++
				inside[i].Merge(s.Agg)
			}
		}
		if n != 1 {
			return fmt.Errorf("stream session %v %q lies in %d batch sessions, want 1", s.Window, s.Key, n)
		}
		if !lateKeys[s.Key] && !slices.ContainsFunc(exact, func(b batch.Row) bool {
			return b.Key == s.Key && b.Window == s.Window && b.Agg.Count == s.Agg.Count && b.Agg.Min == s.Agg.Min && b.Agg.Max == s.Agg.Max
		}) {
			return fmt.Errorf("key %q has no late rows, but stream session %v is not a batch session", s.Key, s.Window)
		}
	}
	for i, b := range exact {
		if inside[i].Count+b.Late != b.Agg.Count {
			return fmt.Errorf("batch session %v %q: %d rows, stream sessions inside hold %d and %d are late", b.Window, b.Key, b.Agg.Count, inside[i].Count, b.Late)
		}
	}
	for key, ws := range byKey {
		slices.SortFunc(ws, func(a, b tidemark.Window) int { return int(a.Start - b.Start) })
		for i := 1; i < len(ws); i++ {
			if ws[i].Start < ws[i-1].End {
				return fmt.Errorf("key %q: stream sessions %v and %v overlap", key, ws[i-1], ws[i])
			}
		}
	}
	return nil
}
