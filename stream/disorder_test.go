package stream

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"tidemark/lake"
	"tidemark/lake/store"
)

// slicedEvents is 8 hours of events, 8 to 200 ms apart, each up to 5 s out
// of order: hour i in slice i, each hour's events between :00:10 and
// :50:00 (so no disorder spans two hours). Lines carry a unique id.
func slicedEvents(seed uint64) [8][]string {
	rng := rand.New(rand.NewPCG(seed, 1))
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var out [8][]string
	id := 0
	for h := range 8 {
		t := base.Add(time.Duration(h)*time.Hour + 10*time.Second)
		end := base.Add(time.Duration(h)*time.Hour + 50*time.Minute)
		for t.Before(end) && len(out[h]) < 600 {
			t = t.Add(time.Duration(8+rng.IntN(192)) * time.Millisecond)
			ev := t
			if rng.IntN(10) == 0 { // one in ten arrives late by up to 5 s
				ev = t.Add(-time.Duration(rng.IntN(5000)) * time.Millisecond)
			}
			id++
			out[h] = append(out[h], fmt.Sprintf(`{"event_time":%q,"page":"/p%d","value":1,"id":%d}`, ev.Format(time.RFC3339Nano), id%7, id))
		}
	}
	return out
}

// disorderByID runs a --once stream over files and returns disorder_us per
// line id.
func disorderByID(t *testing.T, files map[string][]string, maxBatch int) map[string]int64 {
	t.Helper()
	dir, lakeDir := t.TempDir(), t.TempDir()
	for name, lines := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cfg := runnerConfig(t, dir, lakeDir)
	cfg.Once = true
	cfg.MaxBatchRows = maxBatch
	cfg.Engine.Lateness = 10 * time.Second
	if _, err := Run(context.Background(), cfg); err != nil {
		t.Fatal(err)
	}
	st, err := store.OpenDir(lakeDir)
	if err != nil {
		t.Fatal(err)
	}
	lk, err := lake.Open(context.Background(), st, lake.Config{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int64{}
	err = lk.ScanRaw(context.Background(), lake.RawQuery{Columns: []string{lake.ColDisorder, lake.ColPayload}}, func(b lake.RawBatch) error {
		for i := range b.N {
			p := string(b.Payload[i])
			out[p[strings.LastIndex(p, `"id":`):]] = b.Disorder[i]
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestDisorderAcrossFiles: the same events in one file and in 8 files each
// holding an hour give every row the same disorder_us, whatever the batch
// size: aligned reading's read-ahead (a line of every file in batch 0,
// files read while they lag) is not disorder. Before, the 8-file run
// measured rows against events of later hours already read: hours of
// disorder for events a few seconds out of order.
func TestDisorderAcrossFiles(t *testing.T) {
	hours := slicedEvents(7)
	var all []string
	sliced := map[string][]string{}
	for h, lines := range hours {
		all = append(all, lines...)
		sliced[fmt.Sprintf("hour-%02d.ndjson", h)] = lines
	}
	one := disorderByID(t, map[string][]string{"all.ndjson": all}, 0)
	if len(one) != len(all) {
		t.Fatalf("one file: %d rows, want %d", len(one), len(all))
	}
	var maxOne int64
	for _, d := range one {
		maxOne = max(maxOne, d)
	}
	if maxOne == 0 || maxOne > 5e6 {
		t.Fatalf("one file: max disorder %d µs, want some, at most 5 s", maxOne)
	}
	for _, batch := range []int{0, 1000, 37} {
		t.Run(fmt.Sprintf("batch %d", batch), func(t *testing.T) {
			if batch == 37 && testing.Short() {
				t.Skip("full tier: 130 batches of lake commits take seconds")
			}
			got := disorderByID(t, sliced, batch)
			if len(got) != len(one) {
				t.Fatalf("8 files: %d rows, want %d", len(got), len(one))
			}
			diff := 0
			for id, want := range one {
				if got[id] != want {
					if diff++; diff <= 5 {
						t.Errorf("row %s: disorder %s in 8 files, %s in one", id, time.Duration(got[id])*time.Microsecond, time.Duration(want)*time.Microsecond)
					}
				}
			}
			if diff > 0 {
				t.Errorf("%d of %d rows differ", diff, len(one))
			}
		})
	}
}
