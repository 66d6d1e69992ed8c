package stream

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"tidemark"
	"tidemark/lake"
	"tidemark/lake/store"
)

// TestRunAggs: a stream with --agg prints each window's aggregates under
// their columns, writes them to window_results (exact=false), shows the
// batch's on its progress line, and its status page lists them per window.
func TestRunAggs(t *testing.T) {
	dir, lakeDir := t.TempDir(), t.TempDir()
	// Page /a: latencies 10..19 and users u0..u4 in second 0; /b: one row
	// without a latency.
	for i := range 10 {
		appendLine(t, filepath.Join(dir, "in.ndjson"), fmt.Sprintf(`{"event_time":"2026-01-01T00:00:00.%d00Z","page":"/a","value":1,"req":{"ms":%d},"user":"u%d"}`, i, 10+i, i%5))
	}
	appendLine(t, filepath.Join(dir, "in.ndjson"), `{"event_time":"2026-01-01T00:00:00.5Z","page":"/b","value":1,"user":"x"}`)
	cfg := runnerConfig(t, dir, lakeDir)
	var err error
	if cfg.Engine.Aggs, err = tidemark.ParseAggs([]string{"p50(req.ms)", "p100(req.ms)", "avg(req.ms)", "count_distinct(user)"}); err != nil {
		t.Fatal(err)
	}
	var out, progress bytes.Buffer
	cfg.Print, cfg.Progress = &out, &progress
	cfg.Once, cfg.Drain = true, true
	if _, err := Run(context.Background(), cfg); err != nil {
		t.Fatal(err)
	}
	want := `{"window_start":"2026-01-01T00:00:00Z","window_end":"2026-01-01T00:00:01Z","page":"/a","count":10,"sum":10,"min":1,"max":1,"p50_ms":14,"p100_ms":19,"avg_ms":14.5,"count_distinct_user":5,"final":true}
{"window_start":"2026-01-01T00:00:00Z","window_end":"2026-01-01T00:00:01Z","page":"/b","count":1,"sum":1,"min":1,"max":1,"p50_ms":null,"p100_ms":null,"avg_ms":null,"count_distinct_user":1,"final":true}
`
	if out.String() != want {
		t.Errorf("--print:\n%s\nwant\n%s", out.String(), want)
	}
	var found bool
	for _, line := range strings.Split(strings.TrimSpace(progress.String()), "\n") {
		var p progressLine
		if err := json.Unmarshal([]byte(line), &p); err != nil {
			t.Fatal(err)
		}
		if p.Aggregates == nil {
			continue
		}
		found = true
		if got := fmt.Sprint(*p.Aggregates["p50_ms"], " ", *p.Aggregates["count_distinct_user"]); got != "14 6" {
			t.Errorf("progress line aggregates %s, want p50 14 and 6 users over both windows", got)
		}
	}
	if !found {
		t.Errorf("no progress line has the aggregates:\n%s", progress.String())
	}
	st, err := store.OpenDir(lakeDir)
	if err != nil {
		t.Fatal(err)
	}
	lk, err := lake.Open(context.Background(), st, lake.Config{})
	if err != nil {
		t.Fatal(err)
	}
	rows, err := lk.Windows(context.Background(), lake.AllFrom, lake.AllTo, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 2 || rows[0].Exact || fmt.Sprint(rows[0].Aggs) != "[{14 true} {19 true} {14.5 true} {5 true}]" {
		t.Errorf("window_results rows: %+v", rows)
	}
	cfg.Clock = time.Now
	s := newStatus(cfg)
	s.add(progress1(), []tidemark.Result{{Key: rows[0].Key, State: rows[0].State}})
	d := s.doc()
	if strings.Join(d.Info.Aggs, " ") != "p50(req.ms) p100(req.ms) avg(req.ms) count_distinct(user)" || *d.Windows[0].Aggs["avg_ms"] != 14.5 {
		t.Errorf("status: info aggs %v, window aggs %v", d.Info.Aggs, d.Windows[0].Aggs)
	}
}

// progressLine reads the part of a progress line the test checks.
type progressLine struct {
	Aggregates map[string]*float64 `json:"aggregates"`
}

func progress1() progress { return progress{BatchID: 1} }
