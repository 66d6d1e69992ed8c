package lateness

import (
	"testing"

	"tidemark"
	"tidemark/stream/engine"
)

// TestBadTimestampsDoNotMoveTheRecommendation is the report: 10,000
// normal rows plus 200 from a client that sends epoch zero made the report
// recommend --lateness 20395d. Rows years off are bad timestamps: counted and
// named, but kept out of the measures, the recommendation and the replay.
func TestBadTimestampsDoNotMoveTheRecommendation(t *testing.T) {
	clean := makeLake(t, genConfig{n: 10_000, sources: []string{"s1"}, lateness: 30 * usSecond, seed: 11, maxBatch: 200})
	want := run(t, clean, Config{}).Groups[0]
	for _, tc := range []struct {
		name    string
		bad     int
		badTime int64
	}{
		{"epoch zero, 2%", 200, 0},
		{"a few rows three years back", 3, t0 - 3*365*usDay},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := makeLake(t, genConfig{n: 10_000, sources: []string{"s1"}, lateness: 30 * usSecond, seed: 11, maxBatch: 200, bad: tc.bad, badTime: tc.badTime})
			g := run(t, d, Config{}).Groups[0]
			if g.RecommendedLateness != want.RecommendedLateness {
				t.Errorf("recommended --lateness %s, want %s (as without the bad rows)",
					FormatDuration(g.RecommendedLateness), FormatDuration(want.RecommendedLateness))
			}
			if g.Rows != want.Rows || g.Disorder != want.Disorder || g.ArrivalLag != want.ArrivalLag {
				t.Errorf("measured %d rows, disorder %+v, lag %+v; want %d, %+v, %+v", g.Rows, g.Disorder, g.ArrivalLag, want.Rows, want.Disorder, want.ArrivalLag)
			}
			// The replay leaves the bad rows out: it drops what the stream
			// drops on the same batches without them.
			good := &testData{}
			for _, b := range d.batches {
				var kept []tidemark.Record
				for _, r := range b {
					if r.EventTime >= t0-usDay {
						kept = append(kept, r)
					}
				}
				if len(kept) > 0 {
					good.batches = append(good.batches, kept)
				}
			}
			all := func(*tidemark.Record) string { return "" }
			wantDrop := float64(good.streamDrops(t, int64(g.RecommendedLateness*1e6), engine.LateWindow, all)[""]) / float64(g.Rows)
			if g.RecommendedDropFraction != wantDrop {
				t.Errorf("drop fraction %v, want %v: the replay must leave the bad rows out", g.RecommendedDropFraction, wantDrop)
			}
			b := g.BadTimestamps
			if b.Rows != int64(tc.bad) || b.Past != int64(tc.bad) {
				t.Errorf("bad timestamps: got %+v, want %d rows in the past", b, tc.bad)
			}
			if b.Oldest != fmtTime(tc.badTime) {
				t.Errorf("oldest bad event time %s, want %s", b.Oldest, fmtTime(tc.badTime))
			}
			if b.SuggestedMinEventTime == "" || b.SuggestedMinEventTime > fmtTime(t0) {
				t.Errorf("suggested time floor %q, want one at or before the first good event %s", b.SuggestedMinEventTime, fmtTime(t0))
			}
		})
	}
}
