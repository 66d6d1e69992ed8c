package stream

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"tidemark/lake"
	"tidemark/lake/store"
	"tidemark/stream/engine"
)

// TestSessionRunnerRestart: a session stream stopped twice (its context
// cancelled after a batch) and restarted, each run resuming from the
// checkpoint the last left (a snapshot and changelogs),
// prints the same sessions, leaves the same window_results and ends with
// the same engine state as one uninterrupted run over the same input, under
// both late rules, before and after a --drain.
func TestSessionRunnerRestart(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 3))
	base := time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC)
	var lines []string
	for i := range 600 {
		ts := base.Add(time.Duration(i)*time.Second - time.Duration(rng.IntN(20))*time.Second)
		lines = append(lines, fmt.Sprintf(`{"event_time":%q,"page":"/u%d","value":%d}`, ts.Format(time.RFC3339), rng.IntN(30), i%7))
	}
	dir := t.TempDir()
	for p, name := range []string{"a.ndjson", "b.ndjson", "c.ndjson"} {
		var b bytes.Buffer
		for _, l := range lines[p*200 : (p+1)*200] {
			b.WriteString(l + "\n")
		}
		if err := os.WriteFile(filepath.Join(dir, name), b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, rule := range []engine.LateRule{engine.LateWindow, engine.LateEvent} {
		t.Run(rule.String(), func(t *testing.T) {
			t.Parallel() // its own lakes; the input is only read
			// run runs the stream on lakeDir until the input ends or, with
			// stopAfter > 0, until the first batch from the stopAfter-th on
			// whose state is a changelog is committed: the restart then
			// resumes from a snapshot and changelogs.
			run := func(lakeDir string, drain bool, stopAfter int) (string, *Summary) {
				cfg := runnerConfig(t, dir, lakeDir)
				cfg.Engine = engine.Config{Lateness: 2 * time.Second, LateRule: rule}
				cfg.SessionGap = 45 * time.Second
				cfg.MaxBatchRows = 10
				cfg.Once, cfg.Drain = true, drain
				cfg.Clock = func() time.Time { return base }
				var out bytes.Buffer
				cfg.Print = &out
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				batches := 0
				cfg.OnProgress = func(p Progress) {
					batches++
					changelog := filepath.Join(lakeDir, "_checkpoints", "stream", changelogKey(p.BatchID))
					if _, err := os.Stat(changelog); err == nil && stopAfter > 0 && batches >= stopAfter {
						cancel()
					}
				}
				sum, err := Run(ctx, cfg)
				if err != nil && !errors.Is(err, context.Canceled) {
					t.Fatal(err)
				}
				return out.String(), sum
			}
			partsLake, wholeLake := t.TempDir(), t.TempDir()
			var printed strings.Builder
			late, batches := int64(0), int64(0)
			for _, stop := range []int{17, 20, 0} {
				out, sum := run(partsLake, false, stop)
				printed.WriteString(out)
				late += sum.Late
				batches += sum.Batches
				if stop > 0 && sum.Batches >= 60 {
					t.Fatalf("the run to stop after %d batches read all %d: no state of its was a changelog", stop, sum.Batches)
				}
			}
			whole, sum := run(wholeLake, false, 0)
			if printed.String() != whole {
				t.Fatalf("sessions printed in three runs differ from one run:\n%s\nwant\n%s", printed.String(), whole)
			}
			if n := strings.Count(whole, "\n"); n < 20 || late != sum.Late || sum.Late == 0 || batches != sum.Batches || batches < 50 {
				t.Fatalf("%d sessions emitted; late rows %d in parts and %d whole; %d batches in parts, %d whole: want many sessions, some late rows, the same batches", n, late, sum.Late, batches, sum.Batches)
			}
			if got, want := sessionStateOf(t, partsLake), sessionStateOf(t, wholeLake); !reflect.DeepEqual(got, want) {
				t.Fatalf("state after three runs %+v\nafter one run %+v", got, want)
			}
			if got, want := windowRows(t, partsLake), windowRows(t, wholeLake); got != want {
				t.Fatalf("window_results after three runs:\n%s\nafter one:\n%s", got, want)
			}
			gotDrain, _ := run(partsLake, true, 0)
			wantDrain, _ := run(wholeLake, true, 0)
			if gotDrain != wantDrain || gotDrain == "" {
				t.Fatalf("drain printed\n%s\nwant\n%s", gotDrain, wantDrain)
			}
			if got, want := windowRows(t, partsLake), windowRows(t, wholeLake); got != want {
				t.Fatalf("window_results after the drain:\n%s\nwant:\n%s", got, want)
			}
		})
	}
}

// sessionStateOf is the engine state a restart of the stream on lakeDir
// resumes with.
func sessionStateOf(t *testing.T, lakeDir string) *engine.SessionState {
	t.Helper()
	ctx := context.Background()
	st, err := store.Open(ctx, filepath.Join(lakeDir, "_checkpoints", "stream"), store.S3Config{})
	if err != nil {
		t.Fatal(err)
	}
	ck := &checkpoint{st: st}
	rec, err := ck.recover(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if rec.state == nil || rec.state.session == nil {
		t.Fatalf("checkpoint of %s holds no session state", lakeDir)
	}
	e, err := rec.windower(RunnerConfig{SessionGap: time.Duration(rec.state.session.Gap) * time.Microsecond, Engine: engine.Config{Lateness: 2 * time.Second}}, "")
	if err != nil {
		t.Fatal(err)
	}
	return e.(*engine.SessionEngine).State()
}

// windowRows renders window_results of a lake, sorted.
func windowRows(t *testing.T, lakeDir string) string {
	t.Helper()
	ctx := context.Background()
	st, err := store.Open(ctx, lakeDir, store.S3Config{})
	if err != nil {
		t.Fatal(err)
	}
	lk, err := lake.Open(ctx, st, lake.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if lk.Config().SessionGap != 45*time.Second {
		t.Fatalf("the lake records session gap %s", lk.Config().SessionGap)
	}
	rows, err := lk.Windows(ctx, -1<<62, 1<<62, -1)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]string, len(rows))
	for i, r := range rows {
		out[i] = fmt.Sprintf("%s %s n=%d s=%g final=%v", r.Window, r.Key, r.Agg.Count, r.Agg.Sum, r.Final)
	}
	sort.Strings(out)
	return strings.Join(out, "\n")
}
