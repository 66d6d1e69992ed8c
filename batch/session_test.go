package batch_test

import (
	"cmp"
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"tidemark"
	"tidemark/batch"
	"tidemark/lake"
)

// naiveSessions sessionizes recs from scratch: per key, sorted by event
// time, a new session wherever the gap to the previous row is at least
// gap; it keeps the sessions overlapping [from, to).
func naiveSessions(recs []tidemark.Record, gap, from, to int64) []batch.Row {
	byKey := map[tidemark.Key][]tidemark.Record{}
	for _, r := range recs {
		byKey[r.Key] = append(byKey[r.Key], r)
	}
	var out []batch.Row
	for key, rs := range byKey {
		slices.SortStableFunc(rs, func(a, b tidemark.Record) int { return cmp.Compare(a.EventTime, b.EventTime) })
		var cur []batch.Row
		for _, r := range rs {
			if n := len(cur); n == 0 || r.EventTime-(cur[n-1].Window.End-gap) >= gap {
				cur = append(cur, batch.Row{Result: tidemark.Result{Window: tidemark.Window{Start: r.EventTime}, Key: key, Final: true}})
			}
			c := &cur[len(cur)-1]
			c.Window.End = r.EventTime + gap
			c.Agg.Add(r.Value, r.HasValue)
			if r.Status == tidemark.StatusLate {
				c.Late++
			}
		}
		for _, c := range cur {
			if c.Window.Start < to && c.Window.End > from {
				out = append(out, c)
			}
		}
	}
	slices.SortFunc(out, func(a, b batch.Row) int { return tidemark.CompareResults(a.Result, b.Result) })
	return out
}

// TestSessionizeCrossesPartitions: one user's session runs from 23:30 on
// Dec 31 to 01:10 on Jan 1 (a row every 4 minutes, gap 5m), across two
// days and three event hours. A query for one minute in the middle must
// return the whole session, read the three hours it spans plus the one
// each side that proves the gap, and not the far hours of other rows.
func TestSessionizeCrossesPartitions(t *testing.T) {
	ctx := context.Background()
	lk := openLake(t, tidemark.WindowSpec{Size: 10 * minute})
	start := time.Date(2025, 12, 31, 23, 30, 0, 0, time.UTC).UnixMicro()
	user := tidemark.MakeKey(tidemark.KeyPart{Value: "u1"})
	other := tidemark.MakeKey(tidemark.KeyPart{Value: "u2"})
	var recs []tidemark.Record
	add := func(t int64, key tidemark.Key, st tidemark.Status) {
		recs = append(recs, tidemark.Record{Source: "s", File: "f", Offset: int64(len(recs)), Payload: []byte("x"),
			EventTime: t, Arrival: t, Key: key, Value: 1, HasValue: true, Status: st})
	}
	for m := int64(0); m <= 100; m += 4 {
		st := tidemark.StatusOK
		if m == 48 {
			st = tidemark.StatusLate
		}
		add(start+m*minute, user, st)
	}
	// Another key busy all the time in the same hours, and rows of both
	// keys far away: neither may widen the scan beyond u1's session.
	for m := int64(-25); m <= 130; m++ {
		add(start+m*minute, other, tidemark.StatusOK)
	}
	add(start-30*time.Hour.Microseconds(), user, tidemark.StatusOK)
	add(start+30*time.Hour.Microseconds(), user, tidemark.StatusOK)
	if err := lk.AppendBatch(ctx, lake.Batch{AppID: "s", BatchID: 1, Records: recs}); err != nil {
		t.Fatal(err)
	}
	mid := start + 40*minute // 00:10 on Jan 1
	got, st, err := batch.Sessionize(ctx, lk, batch.SessionQuery{Gap: 5 * time.Minute, From: mid, To: mid + minute, Keys: []tidemark.Key{user}})
	if err != nil {
		t.Fatal(err)
	}
	want := tidemark.Window{Start: start, End: start + 105*minute}
	if len(got) != 1 || got[0].Window != want || got[0].Agg.Count != 26 || got[0].Late != 1 || got[0].Key != user {
		t.Fatalf("got %+v, want one session %v of u1 with 26 rows, 1 late", got, want)
	}
	if st.PartitionsRead > 5 || st.ScannedFrom > start || st.ScannedTo < want.End {
		t.Errorf("stats %+v: want at most 5 hours read, covering the session", st)
	}
	// Every key: u2's session from 23:05 to 01:40 too.
	got, _, err = batch.Sessionize(ctx, lk, batch.SessionQuery{Gap: 5 * time.Minute, From: mid, To: mid + minute})
	if err != nil {
		t.Fatal(err)
	}
	if g, w := sessionText(got), sessionText(naiveSessions(recs, 5*minute, mid, mid+minute)); g != w || len(got) != 2 {
		t.Fatalf("got\n%s\nwant\n%s", g, w)
	}
}

func sessionText(rows []batch.Row) string {
	var b strings.Builder
	for _, r := range rows {
		fmt.Fprintf(&b, "%s %q n=%d vals=%d sum=%.6f min=%g max=%g late=%d\n", r.Window, r.Key, r.Agg.Count, r.Agg.Values, r.Agg.Total(), r.Agg.Min, r.Agg.Max, r.Late)
	}
	return b.String()
}

// TestSessionizeMatchesNaive: random rows over a few days in several
// commits, random gaps (from seconds to beyond an hour) and query ranges;
// Sessionize must equal sessionizing everything from scratch.
func TestSessionizeMatchesNaive(t *testing.T) {
	ctx := context.Background()
	runs := 10
	if testing.Short() {
		runs = 4
	}
	for seed := range runs {
		rng := rand.New(rand.NewPCG(uint64(seed), 5))
		lk := openLake(t, tidemark.WindowSpec{Size: 10 * minute})
		var all []tidemark.Record
		span := (1 + rng.Int64N(30)) * 60 * minute
		for b := range 1 + rng.IntN(3) {
			recs := records(rng, 50+rng.IntN(300), span)
			if err := lk.AppendBatch(ctx, lake.Batch{AppID: "s", BatchID: int64(b), Records: recs}); err != nil {
				t.Fatal(err)
			}
			all = append(all, recs...)
		}
		for range 4 {
			gap := (1 + rng.Int64N(90)) * minute
			if rng.IntN(3) == 0 {
				gap = 1 + rng.Int64N(minute)
			}
			from := t0 + rng.Int64N(span) - 60*minute
			to := from + 1 + rng.Int64N(span/2)
			q := batch.SessionQuery{Gap: time.Duration(gap) * time.Microsecond, From: from, To: to}
			want := naiveSessions(all, gap, from, to)
			if rng.IntN(2) == 0 {
				// Only some keys.
				q.Keys = []tidemark.Key{tidemark.MakeKey(tidemark.KeyPart{Null: true}), tidemark.MakeKey(tidemark.KeyPart{Value: fmt.Sprintf("/p%d", rng.IntN(4))})}
				want = slices.DeleteFunc(want, func(r batch.Row) bool { return !slices.Contains(q.Keys, r.Key) })
			}
			got, _, err := batch.Sessionize(ctx, lk, q)
			if err != nil {
				t.Fatal(err)
			}
			if g, w := sessionText(got), sessionText(want); g != w {
				t.Fatalf("seed %d gap %d range [%d, %d): got\n%s\nwant\n%s", seed, gap, from, to, g, w)
			}
		}
	}
}

func TestSessionizeErrors(t *testing.T) {
	lk := openLake(t, tidemark.WindowSpec{Size: 10 * minute})
	for _, q := range []batch.SessionQuery{
		{Gap: 0, From: 0, To: 10},
		{Gap: time.Nanosecond, From: 0, To: 10},
		{Gap: time.Minute, From: 10, To: 10},
		{Gap: time.Minute, From: lake.AllFrom, To: lake.AllTo},
	} {
		if _, _, err := batch.Sessionize(context.Background(), lk, q); err == nil {
			t.Errorf("query %+v: got nil error, want one", q)
		}
	}
	got, _, err := batch.Sessionize(context.Background(), lk, batch.SessionQuery{Gap: time.Minute, From: 0, To: 10})
	if err != nil || len(got) != 0 {
		t.Errorf("empty lake: got %v, %v", got, err)
	}
}

// TestLateSessions: a late row committed after a version selects exactly
// the session it falls in (whole, bridged), and nothing before or after.
func TestLateSessions(t *testing.T) {
	ctx := context.Background()
	lk := openLake(t, tidemark.WindowSpec{Size: 10 * minute})
	u1, u2 := tidemark.MakeKey(tidemark.KeyPart{Value: "u1"}), tidemark.MakeKey(tidemark.KeyPart{Value: "u2"})
	rec := func(mm int64, key tidemark.Key, st tidemark.Status) tidemark.Record {
		tt := t0 + mm*minute
		return tidemark.Record{Source: "s", File: "f", Offset: mm, Payload: []byte("x"), EventTime: tt, Arrival: tt, Key: key, Status: st}
	}
	first := []tidemark.Record{rec(0, u1, tidemark.StatusOK), rec(3, u1, tidemark.StatusOK), rec(11, u1, tidemark.StatusOK),
		rec(0, u2, tidemark.StatusOK), rec(1, u2, tidemark.StatusLate), rec(40, u1, tidemark.StatusOK)}
	if err := lk.AppendBatch(ctx, lake.Batch{AppID: "s", BatchID: 1, Records: first}); err != nil {
		t.Fatal(err)
	}
	v1, err := lk.Version(ctx, lake.TableRawEvents)
	if err != nil {
		t.Fatal(err)
	}
	if err := lk.AppendBatch(ctx, lake.Batch{AppID: "s", BatchID: 2, Records: []tidemark.Record{rec(7, u1, tidemark.StatusLate)}}); err != nil {
		t.Fatal(err)
	}
	got, _, err := batch.LateSessions(ctx, lk, batch.LateSessionQuery{Gap: 5 * time.Minute, SinceVersion: v1})
	if err != nil {
		t.Fatal(err)
	}
	want := "[2026-01-01T10:00:00Z, 2026-01-01T10:16:00Z) \"u1\" n=4 vals=0 sum=0.000000 min=0 max=0 late=1\n"
	if g := sessionText(got); g != want {
		t.Fatalf("since v%d: got\n%s\nwant\n%s", v1, g, want)
	}
	// Every late row: u2's session too.
	if got, _, err = batch.LateSessions(ctx, lk, batch.LateSessionQuery{Gap: 5 * time.Minute}); err != nil || len(got) != 2 {
		t.Fatalf("all late rows: got %v, %v; want u1's and u2's sessions", got, err)
	}
	v2, _ := lk.Version(ctx, lake.TableRawEvents)
	if got, _, err = batch.LateSessions(ctx, lk, batch.LateSessionQuery{Gap: 5 * time.Minute, SinceVersion: v2}); err != nil || len(got) != 0 {
		t.Fatalf("since the last version: got %v, %v; want none", got, err)
	}
}
