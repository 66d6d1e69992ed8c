package engine

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"tidemark"
)

// TestSessionDrainCheckpoint: after a --drain batch the checkpointed state
// resumes a run in which a row touching a drained session is late under
// the window rule (not a second, overlapping session), and one after it
// is not.
func TestSessionDrainCheckpoint(t *testing.T) {
	key := tidemark.MakeKey(tidemark.KeyPart{Value: "u1"})
	e, err := NewSessionEngine(5*time.Minute, Config{Lateness: time.Hour}, nil)
	if err != nil {
		t.Fatal(err)
	}
	e.Process([]tidemark.Record{{Source: "s", EventTime: minutesOf(0), Key: key}, {Source: "s", EventTime: minutesOf(3), Key: key}}, time.Unix(0, 0))
	res, saved := e.DrainForCheckpoint()
	st := saved.(*SessionState)
	if len(res.Emitted) != 1 || st.Watermark != minutesOf(8) || len(st.Closed) != 1 || st.Closed[0].End != minutesOf(8) {
		t.Fatalf("drain emitted %v, state %+v", res.Emitted, st)
	}
	data, _ := st.MarshalBinary()
	var back SessionState
	if err := back.UnmarshalBinary(data); err != nil {
		t.Fatal(err)
	}
	e, err = NewSessionEngine(5*time.Minute, Config{Lateness: time.Hour}, &back)
	if err != nil {
		t.Fatal(err)
	}
	recs := []tidemark.Record{{Source: "s", EventTime: minutesOf(7), Key: key}, {Source: "s", EventTime: minutesOf(8), Key: key}}
	e.Process(recs, time.Unix(1, 0))
	if recs[0].Status != tidemark.StatusLate || recs[1].Status != tidemark.StatusOK {
		t.Fatalf("after the drain: 10:07 %v, 10:08 %v; want late, ok", recs[0].Status, recs[1].Status)
	}
}

// TestSessionWatermarkLikeEngine: the session engine's watermark and
// per-source marks are the window engine's for the same input (both embed
// the one watermark mechanism; this keeps it so).
func TestSessionWatermarkLikeEngine(t *testing.T) {
	for seed := range 200 {
		rng := rand.New(rand.NewPCG(uint64(seed), 99))
		gap, cfg, batches := genSessionRun(rng)
		cfg.Window = tidemark.WindowSpec{Size: gap}
		we, err := New(cfg, nil)
		if err != nil {
			t.Fatal(err)
		}
		se, err := NewSessionEngine(time.Duration(gap)*time.Microsecond, cfg, nil)
		if err != nil {
			t.Fatal(err)
		}
		for i, b := range batches {
			for j, f := range []int64{5, 50} {
				if (i+j)%3 == 0 {
					we.SetFrontier(fmt.Sprintf("src%d", j), f, i%2 == 0)
					se.SetFrontier(fmt.Sprintf("src%d", j), f, i%2 == 0)
				}
			}
			a := we.Process(slices.Clone(b.recs), b.now)
			s := se.Process(slices.Clone(b.recs), b.now)
			if a.Watermark != s.Watermark || a.HasWatermark != s.HasWatermark || a.Rows != s.Rows || a.Quarantined != s.Quarantined {
				t.Fatalf("seed %d batch %d: engine W %d/%v rows %d, session engine W %d/%v rows %d", seed, i, a.Watermark, a.HasWatermark, a.Rows, s.Watermark, s.HasWatermark, s.Rows)
			}
			if !maps.Equal(we.SourceWatermarks(), se.SourceWatermarks()) || !slices.Equal(we.SourceMarks(b.now), se.SourceMarks(b.now)) {
				t.Fatalf("seed %d batch %d: source marks differ", seed, i)
			}
		}
	}
}
