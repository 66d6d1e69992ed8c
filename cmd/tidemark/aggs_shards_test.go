package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"tidemark"
)

// TestThreeStreamsAggs: three streams write one lake with percentiles and
// distinct counts; window_results holds the merge of their partials'
// sketches, within the sketches' stated error of the exact values computed
// from every line, and each merged sketch absorbed exactly the rows its
// window counted.
func TestThreeStreamsAggs(t *testing.T) {
	needBinary(t)
	lakeDir := filepath.Join(t.TempDir(), "lake")
	files, written := writeHostFiles(t, 3, 4000)
	var wg sync.WaitGroup
	for h, f := range files {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, stderr, code := run(t, "stream", "--name", fmt.Sprintf("host-%d", h), "--source", f, "--key", "page", "--value", "value",
				"--agg", "p95(value)", "--agg", "p50(value)", "--agg", "count_distinct(value)",
				"--window", "10m", "--lateness", "1m", "--max-batch-rows", "500", "--once", "--drain", "--lake", lakeDir, "--progress", "/dev/null")
			if code != 0 {
				t.Errorf("stream host-%d: exit %d\n%s", h, code, stderr)
			}
		}()
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	lk := openTestLake(t, lakeDir)
	checkShardedLake(t, lk, written)

	// The exact values, from every line.
	type wk struct {
		start int64
		page  string
	}
	values := map[wk][]float64{}
	for _, f := range files {
		fh, err := os.Open(f)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(fh)
		for sc.Scan() {
			var ev struct {
				EventTime time.Time `json:"event_time"`
				Page      string    `json:"page"`
				Value     float64   `json:"value"`
			}
			if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
				t.Fatal(err)
			}
			us := ev.EventTime.UnixMicro()
			k := wk{us - us%(10*time.Minute).Microseconds(), ev.Page}
			values[k] = append(values[k], ev.Value)
		}
		fh.Close()
	}
	rows, err := lk.Windows(t.Context(), -1<<62, 1<<62, 0)
	if err != nil {
		t.Fatal(err)
	}
	sketched := 0
	for _, r := range rows {
		k := wk{r.Window.Start, r.Key.Parts()[0].Value}
		vs := slices.Sorted(slices.Values(values[k]))
		if int64(len(vs)) != r.Agg.Count {
			t.Fatalf("window %v %s: %d rows, %d lines (a row dropped as late?)", r.Window, k.page, r.Agg.Count, len(vs))
		}
		if got := r.State.Absorbed()[0]; got != r.Agg.Count {
			t.Errorf("window %v %s: the merged sketch absorbed %d values, the window counted %d", r.Window, k.page, got, r.Agg.Count)
		}
		if len(vs) > 16 {
			sketched++
		}
		for i, q := range []float64{0.95, 0.5} {
			// The stated error: within 1% of a value between the rank
			// DDSketch estimates, q(n-1), and quantile_disc's, ⌈nq⌉-1
			// (exact, quantile_disc's, while a state keeps its values).
			disc := vs[max(1, int(math.Ceil(float64(len(vs))*q-1e-9)))-1]
			lo, hi := min(disc, vs[int(q*float64(len(vs)-1))]), max(disc, vs[int(q*float64(len(vs)-1))])
			got := r.Aggs[i].V
			if len(vs) <= 16 && got != disc || got < lo*(1-tidemark.QuantileAccuracy) || got > hi*(1+tidemark.QuantileAccuracy) {
				t.Errorf("window %v %s: p%g %v, quantile_disc %v, sketch rank's %v: beyond 1%%", r.Window, k.page, q*100, got, disc, vs[int(q*float64(len(vs)-1))])
			}
		}
		distinct := map[float64]bool{}
		for _, v := range vs {
			distinct[v] = true
		}
		if got, want := r.Aggs[2].V, float64(len(distinct)); math.Abs(got-want) > 3*tidemark.DistinctError*want+0.5 {
			t.Errorf("window %v %s: %v distinct values, exact %v: beyond 3 standard errors", r.Window, k.page, got, want)
		}
		if r.Exact {
			t.Errorf("window %v %s: a stream's row is marked exact", r.Window, k.page)
		}
	}
	if sketched == 0 {
		t.Error("no window held enough values for its sketches")
	}
	t.Logf("%d windows, %d with more values than a state keeps exactly", len(rows), sketched)
}
