package main

import (
	"context"
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"tidemark/lake"
)

// aggFlags asks for sketched aggregates over the crash input's value.
var aggFlags = []string{"--agg", "p95(value)", "--agg", "p50(value)", "--agg", "count_distinct(value)", "--agg", "avg(value)"}

// TestCrashKill9Aggs is the high-cardinality crash test with percentile
// and distinct-count sketches in the state (snapshots, changelogs and
// restarts carry them): after the kills every window's aggregates equal an
// uninterrupted run's, and each sketch absorbed exactly one value per row
// the window counted (every valid line has a value): none lost, none
// doubled.
func TestCrashKill9Aggs(t *testing.T) {
	if testing.Short() {
		t.Skip("crash test: not in -short")
	}
	lakeDir, refDir := t.TempDir(), t.TempDir()
	crashKill9With(t, 12, 300, lakeDir, refDir, nil, append([]string{"--window", "10m", "--lateness", "30m"}, aggFlags...))
	checkAggsAfterKills(t, lakeDir, refDir)
}

// TestCrashKill9AggsPebble is TestCrashKill9Aggs with the open state in
// Pebble (--state-store pebble), whose values carry the sketches.
func TestCrashKill9AggsPebble(t *testing.T) {
	if testing.Short() {
		t.Skip("crash test: not in -short")
	}
	lakeDir, refDir := t.TempDir(), t.TempDir()
	flags := append([]string{"--window", "10m", "--lateness", "30m", "--state-store", "pebble", "--state-dir", filepath.Join(t.TempDir(), "state")}, aggFlags...)
	crashKill9With(t, 8, 300, lakeDir, refDir, nil, flags)
	checkAggsAfterKills(t, lakeDir, refDir)
}

func checkAggsAfterKills(t *testing.T, lakeDir, refDir string) {
	t.Helper()
	got, want := aggSummary(t, openTestLake(t, lakeDir)), aggSummary(t, openTestLake(t, refDir))
	if got != want {
		t.Errorf("aggregates after the kills differ from an uninterrupted run:\n%s", diffLines(got, want))
	}
	if n := strings.Count(got, "\n") + 1; n < 100 {
		t.Errorf("only %d window rows", n)
	}
}

// aggSummary renders every window row's aggregates and how many values its
// sketch absorbed, sorted, failing t on a row whose sketch absorbed another
// number of values than the rows it counted.
func aggSummary(t *testing.T, lk *lake.Lake) string {
	t.Helper()
	rows, err := lk.Windows(context.Background(), lake.AllFrom, lake.AllTo, -1)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]string, len(rows))
	for i, r := range rows {
		if r.State == nil {
			t.Fatalf("window %v %s has no aggregate state", r.Window, r.Key)
		}
		absorbed := r.State.Absorbed()
		if absorbed[0] != r.Agg.Count || r.State.Moments[0].Values != r.Agg.Count {
			t.Errorf("window %v %s: the sketch absorbed %d values, the moments %d, the window counted %d rows", r.Window, r.Key, absorbed[0], r.State.Moments[0].Values, r.Agg.Count)
		}
		out[i] = fmt.Sprintf("%s %s n=%d aggs=%v absorbed=%v exact=%v", r.Window, r.Key, r.Agg.Count, r.Aggs, absorbed, r.Exact)
	}
	sort.Strings(out)
	return strings.Join(out, "\n")
}
