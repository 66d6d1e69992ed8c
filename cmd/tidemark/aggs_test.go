package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"tidemark"
	"tidemark/lake"
	"tidemark/lake/store"
)

// aggsLake writes a lake with --agg avg(lat), p50(lat), count_distinct(user)
// and tumbling 1-minute windows: 120 rows over 3 minutes of one key, lat
// 1..120, user u0..u9, and the stream's rows for them (estimates from the
// sketches, exact=false).
func aggsLake(t *testing.T, gap time.Duration) string {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	st, err := store.OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	aggs, err := tidemark.ParseAggs([]string{"avg(lat)", "p50(lat)", "count_distinct(user)"})
	if err != nil {
		t.Fatal(err)
	}
	cfg := lake.Config{Keys: []string{"page"}, Window: tidemark.WindowSpec{Size: time.Minute.Microseconds()}, Aggs: aggs}
	if gap > 0 {
		cfg.Window, cfg.SessionGap = tidemark.WindowSpec{}, gap
	}
	lk, err := lake.Open(ctx, st, cfg)
	if err != nil {
		t.Fatal(err)
	}
	base := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC).UnixMicro()
	key := tidemark.MakeKey(tidemark.KeyPart{Value: "/a"})
	var recs []tidemark.Record
	byWin := map[int64]*tidemark.Result{}
	for i := range 120 {
		ev := base + int64(i)*1_500_000
		r := tidemark.Record{Source: "s", File: "f", Offset: int64(i), Payload: []byte(fmt.Sprint(i)), EventTime: ev, Arrival: ev, Key: key,
			Fields: []tidemark.AggValue{{Num: float64(i + 1), Present: true}, {Text: fmt.Sprintf("u%d", i%10), Present: true}}}
		recs = append(recs, r)
		start := ev - ev%time.Minute.Microseconds()
		if gap > 0 {
			start = base // one session
		}
		res := byWin[start]
		if res == nil {
			res = &tidemark.Result{Window: tidemark.Window{Start: start, End: start + time.Minute.Microseconds()}, Key: key, Final: true, State: aggs.NewState()}
			byWin[start] = res
		}
		if gap > 0 {
			res.Window.End = ev + gap.Microseconds()
		}
		res.Agg.Add(0, false)
		aggs.Add(res.State, r.Fields)
	}
	var rows []lake.WindowRow
	for _, res := range byWin {
		rows = append(rows, lake.WindowRow{Result: *res, Origin: lake.OriginStream, Revision: 1, ComputedAt: base})
	}
	w := base + time.Hour.Microseconds()
	if err := lk.AppendBatch(ctx, lake.Batch{AppID: "stream", BatchID: 0, Records: recs, Closed: rows, Watermark: &w}); err != nil {
		t.Fatal(err)
	}
	return dir
}

// jsonRows parses one JSON object a line.
func jsonRows(t *testing.T, out string) []map[string]any {
	t.Helper()
	var rows []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("%v: %s", err, l)
		}
		rows = append(rows, m)
	}
	return rows
}

// windows, recompute and sessions show the --agg aggregates; windows
// shows exact, false before reconcile and true after, with the values
// recompute computes.
func TestCommandsShowAggregates(t *testing.T) {
	lakeDir := aggsLake(t, 0)
	out, errs, code := runApp(t, "recompute", "--lake", lakeDir, "--format", "json")
	if code != 0 {
		t.Fatalf("recompute: exit %d: %s", code, errs)
	}
	exact := jsonRows(t, out)
	// Minute 0 holds rows 1..40 (1.5 s apart), users u0..u9.
	if len(exact) != 3 || exact[0]["avg_lat"] != 20.5 || exact[0]["p50_lat"] != 20.0 || exact[0]["count_distinct_user"] != 10.0 {
		t.Fatalf("recompute: got %v, want 3 windows, the first avg 20.5, p50 20, 10 users", exact)
	}
	show := func() []map[string]any {
		out, errs, code := runApp(t, "windows", "--lake", lakeDir, "--format", "json")
		if code != 0 {
			t.Fatalf("windows: exit %d: %s", code, errs)
		}
		return jsonRows(t, out)
	}
	for _, r := range show() {
		if r["exact"] != false || r["p50_lat"] == nil {
			t.Errorf("before reconcile: %v, want exact false and an estimate", r)
		}
	}
	if _, errs, code := runApp(t, "reconcile", "--lake", lakeDir); code != 0 {
		t.Fatalf("reconcile: exit %d: %s", code, errs)
	}
	for i, r := range show() {
		for _, c := range []string{"avg_lat", "p50_lat", "count_distinct_user"} {
			if r[c] != exact[i][c] || r["exact"] != true {
				t.Errorf("after reconcile, window %d %s: %v (exact %v), want %v (exact true)", i, c, r[c], r["exact"], exact[i][c])
			}
		}
	}

	sessLake := aggsLake(t, 10*time.Second)
	out, errs, code = runApp(t, "sessions", "--lake", sessLake, "--format", "json")
	if code != 0 {
		t.Fatalf("sessions: exit %d: %s", code, errs)
	}
	if s := jsonRows(t, out); len(s) != 1 || s[0]["avg_lat"] != 60.5 || s[0]["p50_lat"] != 60.0 || s[0]["count_distinct_user"] != 10.0 {
		t.Errorf("sessions: got %v, want one session with avg 60.5, p50 60, 10 users", s)
	}
}
