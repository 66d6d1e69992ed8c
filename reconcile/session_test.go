package reconcile_test

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"tidemark"
	"tidemark/lake"
	"tidemark/lake/store"
	"tidemark/reconcile"
	"tidemark/stream/engine"
)

// sessionLake is a session lake (keys k, value v) on a real directory.
func sessionLake(t testing.TB, gap time.Duration) *testLake {
	t.Helper()
	st, err := store.OpenDir(lakeDir(t))
	if err != nil {
		t.Fatal(err)
	}
	lk, err := lake.Open(context.Background(), st, lake.Config{Keys: []string{"k"}, ValueField: "v", SessionGap: gap})
	if err != nil {
		t.Fatal(err)
	}
	return &testLake{st: st, lk: lk}
}

// sessionStream runs recs through a session engine in batches of the given
// sizes, writing every batch to the lake as the stream does (rows with the
// status the engine gave them, emitted sessions, the watermark). With
// drain it drains at the end and records W as the drain does (the largest
// end emitted).
type sessionStream struct {
	t     testing.TB
	tl    *testLake
	e     *engine.SessionEngine
	batch int64
	w     int64
	hasW  bool
	ends  map[endOf]bool // the ends of the sessions emitted, by key
}

type endOf struct {
	key tidemark.Key
	end int64
}

func newSessionStream(t testing.TB, tl *testLake, gap time.Duration, cfg engine.Config) *sessionStream {
	t.Helper()
	e, err := engine.NewSessionEngine(gap, cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	return &sessionStream{t: t, tl: tl, e: e, ends: map[endOf]bool{}}
}

func (s *sessionStream) process(recs []tidemark.Record) {
	s.t.Helper()
	s.write(recs, s.e.Process(recs, t0.Add(time.Duration(s.batch)*time.Second)))
}

func (s *sessionStream) drain() {
	s.t.Helper()
	res := s.e.Drain()
	res.Watermark, res.HasWatermark = s.w, s.hasW
	for _, r := range res.Emitted {
		res.Watermark, res.HasWatermark = max(res.Watermark, r.Window.End), true
	}
	s.write(nil, res)
}

func (s *sessionStream) write(recs []tidemark.Record, res engine.BatchResult) {
	s.t.Helper()
	b := lake.Batch{AppID: "stream", BatchID: s.batch, Records: recs, Closed: streamRows(res.Emitted, res.Watermark, res.HasWatermark)}
	for _, r := range res.Emitted {
		s.ends[endOf{r.Key, r.Window.End}] = true
	}
	if res.HasWatermark {
		s.w, s.hasW = res.Watermark, true
		w := res.Watermark
		b.Watermark = &w
	}
	if err := s.tl.lk.AppendBatch(context.Background(), b); err != nil {
		s.t.Fatal(err)
	}
	s.batch++
}

// at is 2026-03-01 hh:mm UTC in µs.
func at(hh, mm int) int64 { return t0.UnixMicro() + int64(hh-10)*3600*second + int64(mm)*60*second }

// sessionsText renders window_results as "start end key count sum origin
// rev" lines.
func sessionsText(t testing.TB, tl *testLake) string {
	t.Helper()
	rows, err := tl.lk.Windows(context.Background(), lake.AllFrom, lake.AllTo, 0)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, r := range rows {
		fmt.Fprintf(&b, "%s %s n=%d s=%g %s rev %d\n", r.Window, r.Key, r.Agg.Count, r.Agg.Sum, r.Origin, r.Revision)
	}
	return b.String()
}

// TestSessionReconcileMerges: late rows that bridge emitted sessions merge
// them in window_results (one commit removes both and adds the exact
// session, revision 2), including across a day (window_date partition)
// boundary, and reconcile_log names each replaced session.
func TestSessionReconcileMerges(t *testing.T) {
	ctx := context.Background()
	tl := sessionLake(t, 5*time.Minute)
	s := newSessionStream(t, tl, 5*time.Minute, engine.Config{LateRule: engine.LateWindow})
	u1, u2, u3 := "u1", "u2", "u3"
	// u1: 10:00, 10:03, 10:11, then the late 10:07 (the README's walk-through).
	// u2: 23:55, then 00:01 the next day, then the late 23:58.
	// u3: 02:00 the next day, which moves W past every session.
	i := 0
	for _, r := range []struct {
		t int64
		k string
	}{{at(10, 0), u1}, {at(10, 3), u1}, {at(10, 11), u1}, {at(10, 7), u1}, {at(23, 55), u2}, {at(24, 1), u2}, {at(23, 58), u2}, {at(26, 0), u3}} {
		s.process([]tidemark.Record{rec(i, r.t, r.k, float64(i+1))})
		i++
	}
	before := "[2026-03-01T10:00:00Z, 2026-03-01T10:08:00Z) u1 n=2 s=3 stream rev 1\n" +
		"[2026-03-01T10:11:00Z, 2026-03-01T10:16:00Z) u1 n=1 s=3 stream rev 1\n" +
		"[2026-03-01T23:55:00Z, 2026-03-02T00:00:00Z) u2 n=1 s=5 stream rev 1\n" +
		"[2026-03-02T00:01:00Z, 2026-03-02T00:06:00Z) u2 n=1 s=6 stream rev 1\n"
	if got := sessionsText(t, tl); got != before {
		t.Fatalf("stream wrote\n%s\nwant\n%s", got, before)
	}
	dry := tl.reconcile(t, reconcile.Config{DryRun: true})
	if got := sessionsText(t, tl); got != before || dry.Merged != 4 {
		t.Fatalf("dry run: merged %d, window_results\n%s", dry.Merged, got)
	}
	rep := tl.reconcile(t, reconcile.Config{})
	if rep.Corrected != 2 || rep.Merged != 4 || rep.LateRowsAbsorbed != 2 || len(rep.Merges) != 2 {
		t.Errorf("report: %s merged %d merges %v", reportLine(rep), rep.Merged, rep.Merges)
	}
	after := "[2026-03-01T10:00:00Z, 2026-03-01T10:16:00Z) u1 n=4 s=10 batch rev 2\n" +
		"[2026-03-01T23:55:00Z, 2026-03-02T00:06:00Z) u2 n=3 s=18 batch rev 2\n"
	if got := sessionsText(t, tl); got != after {
		t.Errorf("after reconcile\n%s\nwant\n%s", got, after)
	}
	var text bytes.Buffer
	if err := rep.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"sessions merged    4",
		"[2026-03-01T10:00:00Z, 2026-03-01T10:16:00Z) <- [2026-03-01T10:00:00Z, 2026-03-01T10:08:00Z) + [2026-03-01T10:11:00Z, 2026-03-01T10:16:00Z) (key u1)"} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("report text lacks %q:\n%s", want, text.String())
		}
	}
	logRows, err := tl.lk.ReconcileLog(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, l := range logRows {
		got = append(got, fmt.Sprintf("%s %s replaced %s old %d new %d late %d", l.Window, l.Key, l.Replaced, l.Old.Count, l.New.Count, l.LateRows))
	}
	slices.Sort(got)
	want := []string{
		"[2026-03-01T10:00:00Z, 2026-03-01T10:16:00Z) u1 replaced [2026-03-01T10:00:00Z, 2026-03-01T10:08:00Z) old 2 new 4 late 1",
		"[2026-03-01T10:00:00Z, 2026-03-01T10:16:00Z) u1 replaced [2026-03-01T10:11:00Z, 2026-03-01T10:16:00Z) old 1 new 4 late 1",
		"[2026-03-01T23:55:00Z, 2026-03-02T00:06:00Z) u2 replaced [2026-03-01T23:55:00Z, 2026-03-02T00:00:00Z) old 1 new 3 late 1",
		"[2026-03-01T23:55:00Z, 2026-03-02T00:06:00Z) u2 replaced [2026-03-02T00:01:00Z, 2026-03-02T00:06:00Z) old 1 new 3 late 1",
	}
	if !slices.Equal(got, want) {
		t.Errorf("reconcile_log:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// The 2026-03-02 partition lost its only session: it holds no file.
	rows, err := tl.lk.Windows(ctx, at(24, 0), at(48, 0), 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 0 {
		t.Errorf("window_date 2026-03-02 still holds %v", rows)
	}
	for _, cfg := range []reconcile.Config{{}, {From: t0.Add(-24 * time.Hour), To: t0.Add(48 * time.Hour)}} {
		again := tl.reconcile(t, cfg)
		if again.Corrected+again.Inserted+again.Merged != 0 || sessionsText(t, tl) != after {
			t.Errorf("run %+v after reconcile: %s merged %d", cfg, reportLine(again), again.Merged)
		}
	}
}

// TestSessionReconcileDeferred: a late row inside a session the stream
// still holds open is deferred (the exact session ends after W), and the
// next run, with no new late rows, corrects the session once the stream has
// emitted it, though the late row lies far more than a gap before the W of
// the run that deferred it.
func TestSessionReconcileDeferred(t *testing.T) {
	for _, rule := range []engine.LateRule{engine.LateWindow, engine.LateEvent} {
		tl := sessionLake(t, 30*time.Minute)
		s := newSessionStream(t, tl, 30*time.Minute, engine.Config{LateRule: rule})
		i := 0
		for ts := at(8, 0); ts <= at(11, 0); ts += 10 * 60 * second {
			s.process([]tidemark.Record{rec(i, ts, "u1", 1)})
			i++
		}
		s.process([]tidemark.Record{rec(i, at(9, 5), "u1", 1)}) // late: W is 11:00
		rep := tl.reconcile(t, reconcile.Config{})
		if rep.Pending != 1 || rep.Corrected+rep.Inserted != 0 || sessionsText(t, tl) != "" {
			t.Fatalf("%s: first run %s, window_results\n%s", rule, reportLine(rep), sessionsText(t, tl))
		}
		s.process([]tidemark.Record{rec(i+1, at(13, 0), "u2", 1)}) // W 13:00 closes [08:00,11:30)
		if got, want := sessionsText(t, tl), "[2026-03-01T08:00:00Z, 2026-03-01T11:30:00Z) u1 n=19 s=19 stream rev 1\n"; got != want {
			t.Fatalf("%s: stream wrote\n%s\nwant\n%s", rule, got, want)
		}
		rep = tl.reconcile(t, reconcile.Config{})
		want := "[2026-03-01T08:00:00Z, 2026-03-01T11:30:00Z) u1 n=20 s=20 batch rev 2\n"
		if got := sessionsText(t, tl); rep.Corrected != 1 || got != want {
			t.Errorf("%s: second run %s, window_results\n%s\nwant\n%s", rule, reportLine(rep), got, want)
		}
	}
}

// TestSessionReconcileNoLaterOverlap: under the window rule a row that is
// not late may still start up to a gap before W, after the end of the
// key's last stream session. A late row that extends a closed session past
// that end therefore waits until W is a gap past the exact session's end:
// written earlier, the stream could emit a session overlapping it. The
// next run, with no new late rows, writes it, whether such a row came
// (and the sessions merge) or not.
func TestSessionReconcileNoLaterOverlap(t *testing.T) {
	for _, row := range []bool{true, false} {
		tl := sessionLake(t, 5*time.Minute)
		s := newSessionStream(t, tl, 5*time.Minute, engine.Config{LateRule: engine.LateWindow})
		s.process([]tidemark.Record{rec(0, at(10, 0), "u1", 1)})
		s.process([]tidemark.Record{rec(1, at(10, 10), "u2", 1)})          // W 10:10 closes [10:00,10:05)
		s.process([]tidemark.Record{rec(2, at(10, 4)+59*second, "u1", 1)}) // [10:04:59,10:09:59) ends before W: late
		rep := tl.reconcile(t, reconcile.Config{})
		if rep.Pending != 1 || rep.Corrected != 0 {
			t.Errorf("row=%v: first run: %s, want the session [10:00,10:09:59) pending", row, reportLine(rep))
		}
		want := "[2026-03-01T10:00:00Z, 2026-03-01T10:09:59Z) u1 n=2 s=2 batch rev 2\n"
		if row {
			s.process([]tidemark.Record{rec(3, at(10, 6), "u1", 1)}) // not late: ends 10:11 > W, starts after 10:05
			want = "[2026-03-01T10:00:00Z, 2026-03-01T10:11:00Z) u1 n=3 s=3 batch rev 2\n"
		}
		s.process([]tidemark.Record{rec(4, at(10, 20), "u2", 1)}) // W 10:20
		if bad := sessionMismatches(t, tl, 5*60*second, nil, func(tidemark.Key, tidemark.Window) bool { return false }); len(bad) > 0 {
			t.Fatalf("row=%v: window_results before the next run:\n%s", row, strings.Join(bad, "\n"))
		}
		rep = tl.reconcile(t, reconcile.Config{})
		if got := sessionsText(t, tl); !strings.HasPrefix(got, want) || rep.Corrected != 1 {
			t.Errorf("row=%v: second run: %s, window_results\n%s\nwant first\n%s", row, reportLine(rep), got, want)
		}
	}
}

// TestSessionReconcileCrashBetweenCommits: a run that dies after the
// window_results commit leaves exact, non-overlapping sessions; the next
// run finds nothing to change.
func TestSessionReconcileCrashBetweenCommits(t *testing.T) {
	tl := sessionLake(t, 5*time.Minute)
	s := newSessionStream(t, tl, 5*time.Minute, engine.Config{LateRule: engine.LateEvent})
	for i, ts := range []int64{at(10, 0), at(10, 3), at(10, 11), at(10, 7), at(11, 0)} {
		s.process([]tidemark.Record{rec(i, ts, "u1", float64(i+1))})
	}
	fs := &failingStore{Store: tl.st, table: "reconcile_log"} // window_results is committed
	if _, err := reconcile.Run(context.Background(), reconcile.Config{LakeStore: fs, Clock: fixedClock}); err == nil || !strings.Contains(err.Error(), "injected crash") {
		t.Fatalf("got %v, want the injected failure", err)
	}
	want := "[2026-03-01T10:00:00Z, 2026-03-01T10:16:00Z) u1 n=4 s=10 batch rev 2\n"
	if got := sessionsText(t, tl); got != want {
		t.Fatalf("after the crash\n%s\nwant\n%s", got, want)
	}
	rep := tl.reconcile(t, reconcile.Config{})
	if rep.Corrected+rep.Inserted+rep.Merged != 0 || rep.Unchanged != 1 {
		t.Errorf("next run: %s merged %d", reportLine(rep), rep.Merged)
	}
	if got := sessionsText(t, tl); got != want {
		t.Errorf("after the next run\n%s\nwant\n%s", got, want)
	}
}

// refSessions sessionizes recs from scratch, independently of package
// batch: per key, sort by event time and cut where the next event is a gap
// or more after the previous one.
func refSessions(gap int64, recs []tidemark.Record) map[tidemark.Key][]tidemark.Session {
	byKey := map[tidemark.Key][]tidemark.Record{}
	for _, r := range recs {
		if r.Valid() {
			byKey[r.Key] = append(byKey[r.Key], r)
		}
	}
	out := map[tidemark.Key][]tidemark.Session{}
	for k, rs := range byKey {
		slices.SortFunc(rs, func(a, b tidemark.Record) int { return cmp.Compare(a.EventTime, b.EventTime) })
		var ss []tidemark.Session
		for _, r := range rs {
			if n := len(ss); n > 0 && r.EventTime < ss[n-1].Window.End {
				ss[n-1].Window.End = max(ss[n-1].Window.End, r.EventTime+gap)
				ss[n-1].Agg.Add(r.Value, r.HasValue)
				continue
			}
			s := tidemark.Session{Window: tidemark.Window{Start: r.EventTime, End: r.EventTime + gap}}
			s.Agg.Add(r.Value, r.HasValue)
			ss = append(ss, s)
		}
		out[k] = ss
	}
	return out
}

// TestSessionContract is the contract on session lakes as a property: for
// random events, arrival orders, batch sizes, gaps, budgets and both late
// rules, with reconcile runs at random points while the stream goes on
// (and a drain at the end or not): after a final reconcile every settled
// exact session is in window_results as it is, every stored row inside a
// settled exact session is that session, no two rows of a key overlap,
// and a second run (and a full-range run) changes nothing. Settled at W:
// it ends a gap or more before W, or it ends at or before W where a
// session the stream emitted ends (a session a late row extended past
// the stream's may still be touched by a row the window rule accepts).
func TestSessionContract(t *testing.T) {
	iters := 8
	if testing.Short() {
		iters = 4
	}
	sessionContract(t, iters, t0)
}

// TestSessionContractPre1970 is TestSessionContract over sessions before
// and across the epoch (issue 30).
func TestSessionContractPre1970(t *testing.T) {
	for _, base := range []time.Time{time.Unix(-3600, 0).UTC(), time.Date(1955, 3, 1, 8, 0, 0, 0, time.UTC)} {
		t.Run(base.Format(time.RFC3339), func(t *testing.T) { sessionContract(t, 3, base) })
	}
}

func sessionContract(t *testing.T, iters int, bt time.Time) {
	ctx := context.Background()
	for it := range iters {
		rng := rand.New(rand.NewPCG(uint64(it), 13))
		gap := time.Duration(1+rng.IntN(10)) * time.Minute
		cfg := engine.Config{Lateness: time.Duration(rng.IntN(5)) * time.Minute, LateRule: engine.LateRule(rng.IntN(2))}
		drain := rng.IntN(2) == 0
		name := fmt.Sprintf("%d/gap=%s,lateness=%s,rule=%s,drain=%v", it, gap, cfg.Lateness, cfg.LateRule, drain)
		t.Run(name, func(t *testing.T) {
			tl := sessionLake(t, gap)
			s := newSessionStream(t, tl, gap, cfg)
			n := 50 + rng.IntN(150)
			// Some runs cross midnight; disorder up to two gaps: late rows
			// that touch open sessions, whose exact sessions a run defers.
			base := bt.UnixMicro() + int64(rng.IntN(3))*12*3600*second
			recs := randomRecords(rng, n, base, 90, 1+int(2*gap.Microseconds()/second))
			for i := 0; i < n; {
				m := min(n-i, 1+rng.IntN(30))
				s.process(recs[i : i+m])
				i += m
				if rng.IntN(3) == 0 {
					tl.reconcile(t, reconcile.Config{})
				}
			}
			if drain {
				s.drain()
			}
			rep := tl.reconcile(t, reconcile.Config{})
			settled := func(k tidemark.Key, w tidemark.Window) bool {
				return w.End+gap.Microseconds() <= rep.Watermark || (w.End <= rep.Watermark && s.ends[endOf{k, w.End}])
			}
			if bad := sessionMismatches(t, tl, gap.Microseconds(), recs, settled); len(bad) > 0 {
				t.Errorf("after reconcile (W=%s, report %s), %d differ:\n%s", tidemark.FormatTime(rep.Watermark), reportLine(rep), len(bad), strings.Join(bad, "\n"))
			}
			stored := sessionsText(t, tl)
			for _, c := range []reconcile.Config{{}, {From: bt.Add(-48 * time.Hour), To: bt.Add(72 * time.Hour)}} {
				again := tl.reconcile(t, c)
				if again.Corrected+again.Inserted+again.Merged != 0 || sessionsText(t, tl) != stored {
					t.Errorf("run %+v after reconcile: got %s merged %d, want no change", c, reportLine(again), again.Merged)
				}
			}
			logRows, err := tl.lk.ReconcileLog(ctx)
			if err != nil {
				t.Fatal(err)
			}
			for _, l := range logRows {
				if l.Replaced != nil && (l.Replaced.Start < l.Window.Start || l.Replaced.End > l.Window.End) {
					t.Errorf("reconcile_log: %s replaced %s, which it does not cover", l.Window, l.Replaced)
				}
			}
		})
	}
}

// sessionMismatches compares window_results with the reference sessions
// of recs, for the settled ones; any two rows of a key that overlap are a
// mismatch too.
func sessionMismatches(t testing.TB, tl *testLake, gap int64, recs []tidemark.Record, settled func(tidemark.Key, tidemark.Window) bool) []string {
	t.Helper()
	rows, err := tl.lk.Windows(context.Background(), lake.AllFrom, lake.AllTo, 0)
	if err != nil {
		t.Fatal(err)
	}
	want := refSessions(gap, recs)
	byKey := map[tidemark.Key][]lake.WindowRow{}
	for _, r := range rows {
		byKey[r.Key] = append(byKey[r.Key], r)
	}
	var bad []string
	for k, rs := range byKey {
		slices.SortFunc(rs, func(a, b lake.WindowRow) int { return cmp.Compare(a.Window.Start, b.Window.Start) })
		for i := 1; i < len(rs); i++ {
			if rs[i].Window.Start < rs[i-1].Window.End {
				bad = append(bad, fmt.Sprintf("key %s: rows %s and %s overlap", k, rs[i-1].Window, rs[i].Window))
			}
		}
		for _, r := range rs {
			for _, e := range want[k] {
				inside := e.Window.Start <= r.Window.Start && r.Window.End <= e.Window.End
				if inside && settled(k, e.Window) && (r.Window != e.Window || !aggEqual(r.Agg, e.Agg)) {
					bad = append(bad, fmt.Sprintf("key %s: row %s %+v inside the settled session %s %+v", k, r.Window, r.Agg, e.Window, e.Agg))
				}
			}
		}
	}
	for k, ss := range want {
		for _, e := range ss {
			if !settled(k, e.Window) {
				continue
			}
			if !slices.ContainsFunc(byKey[k], func(r lake.WindowRow) bool { return r.Window == e.Window && aggEqual(r.Agg, e.Agg) }) {
				bad = append(bad, fmt.Sprintf("key %s: settled session %s %+v missing", k, e.Window, e.Agg))
			}
		}
	}
	slices.Sort(bad)
	return bad
}
