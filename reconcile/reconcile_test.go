package reconcile_test

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"tidemark"
	"tidemark/lake"
	"tidemark/lake/store"
	"tidemark/reconcile"
)

var tumbling = tidemark.WindowSpec{Size: 60 * second, Slide: 60 * second}

// lateLake writes a stream-like history: window [t0, t0+1m) emitted by the
// stream with 2 rows, then 3 late rows for it and 1 late row for a window
// the stream never emitted ([t0+1m, t0+2m)), with the watermark at t0+5m.
func lateLake(t *testing.T) *testLake {
	t.Helper()
	ctx := context.Background()
	tl := newTestLake(t, tumbling)
	base := t0.UnixMicro()
	ok := []tidemark.Record{rec(0, base+1*second, "a", 1), rec(1, base+2*second, "a", 2), rec(2, base+6*60*second, "a", 9)}
	wm := base + 5*60*second
	emitted := []tidemark.Result{{Window: tidemark.Window{Start: base, End: base + 60*second}, Key: ok[0].Key, Agg: aggOf(1, 2), Final: true}}
	if err := tl.lk.AppendBatch(ctx, lake.Batch{AppID: "stream", BatchID: 0, Records: ok, Closed: streamRows(emitted, wm, true)}); err != nil {
		t.Fatal(err)
	}
	late := []tidemark.Record{rec(3, base+3*second, "a", 10), rec(4, base+4*second, "a", -5), rec(5, base+5*second, "a", 0.5), rec(6, base+70*second, "b", 7)}
	for i := range late {
		late[i].Status = tidemark.StatusLate
	}
	if err := tl.lk.AppendBatch(ctx, lake.Batch{AppID: "stream", BatchID: 1, Records: late}); err != nil {
		t.Fatal(err)
	}
	return tl
}

func aggOf(vs ...float64) tidemark.Agg {
	var a tidemark.Agg
	for _, v := range vs {
		a.Add(v, true)
	}
	return a
}

func windowsText(t *testing.T, tl *testLake) string {
	t.Helper()
	rows, err := tl.lk.Windows(context.Background(), lake.AllFrom, lake.AllTo, 0)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, r := range rows {
		b.WriteString(r.Window.String() + " " + r.Key.String() + " " + r.Origin + " ")
		b.WriteString(strings.TrimSpace(strings.ReplaceAll(
			strings.Join([]string{itoa(r.Agg.Count), ftoa(r.Agg.Total()), ftoa(r.Agg.Min), ftoa(r.Agg.Max), "rev", itoa(r.Revision)}, " "), "  ", " ")))
		b.WriteString("\n")
	}
	return b.String()
}

func itoa(v int64) string   { b, _ := json.Marshal(v); return string(b) }
func ftoa(v float64) string { b, _ := json.Marshal(v); return string(b) }

func TestReconcileCorrectsAndInserts(t *testing.T) {
	tl := lateLake(t)
	rep := tl.reconcile(t, reconcile.Config{})
	if got, want := reportLine(rep), "checked=2 corrected=1 inserted=1 unchanged=0 pending=0 late=4"; got != want {
		t.Errorf("got report %s, want %s", got, want)
	}
	want := "[2026-03-01T10:00:00Z, 2026-03-01T10:01:00Z) a batch 5 8.5 -5 10 rev 2\n" +
		"[2026-03-01T10:01:00Z, 2026-03-01T10:02:00Z) b batch 1 7 7 7 rev 1\n"
	if got := windowsText(t, tl); got != want {
		t.Errorf("got window_results\n%s\nwant\n%s", got, want)
	}
	if rep.LargestAbs == nil || rep.LargestAbs.Field != "sum" || rep.LargestAbs.Old != 3 || rep.LargestAbs.New != 8.5 {
		t.Errorf("got largest delta %+v, want sum 3 -> 8.5", rep.LargestAbs)
	}
	if rep.RawFrom != 0 || rep.RawTo != 2 {
		t.Errorf("got raw versions %d..%d, want 0..2", rep.RawFrom, rep.RawTo)
	}
	// The window [t0+6m, t0+7m) is open (W = t0+5m): not touched.
	if strings.Contains(windowsText(t, tl), "10:06:00") {
		t.Errorf("open window written")
	}
	var text, js bytes.Buffer
	if err := rep.WriteText(&text); err != nil || !strings.Contains(text.String(), "corrected          1") {
		t.Errorf("text report %q (err %v) lacks the corrected count", text.String(), err)
	}
	if err := rep.WriteJSON(&js); err != nil {
		t.Fatal(err)
	}
	var back map[string]any
	if err := json.Unmarshal(js.Bytes(), &back); err != nil || back["windows_corrected"] != float64(1) {
		t.Errorf("json report %s: got %v (err %v), want windows_corrected 1", js.String(), back["windows_corrected"], err)
	}
}

func TestSecondRunChangesNothing(t *testing.T) {
	tl := lateLake(t)
	tl.reconcile(t, reconcile.Config{})
	before := windowsText(t, tl)
	for _, cfg := range []reconcile.Config{{}, {Since: 72 * time.Hour}, {From: t0.Add(-time.Hour), To: t0.Add(time.Hour)}} {
		rep := tl.reconcile(t, cfg)
		if rep.Corrected+rep.Inserted != 0 {
			t.Errorf("config %+v: got %s, want no corrections", cfg, reportLine(rep))
		}
	}
	if got := windowsText(t, tl); got != before {
		t.Errorf("got window_results\n%s\nwant unchanged\n%s", got, before)
	}
	// The cron run after a run reads no late rows again.
	rep := tl.reconcile(t, reconcile.Config{})
	if rep.Checked != 0 || rep.RawFrom != rep.RawTo {
		t.Errorf("got %s raw %d..%d, want nothing checked and no new raw versions", reportLine(rep), rep.RawFrom, rep.RawTo)
	}
}

func TestDryRunWritesNothing(t *testing.T) {
	tl := lateLake(t)
	before := windowsText(t, tl)
	files := listAll(t, tl.st)
	rep := tl.reconcile(t, reconcile.Config{DryRun: true})
	if rep.Corrected != 1 || rep.Inserted != 1 || !rep.DryRun {
		t.Errorf("got %s, want the corrections reported", reportLine(rep))
	}
	if got := windowsText(t, tl); got != before {
		t.Errorf("dry run changed window_results:\n%s", got)
	}
	if got := listAll(t, tl.st); got != files {
		t.Errorf("dry run changed the store:\n%s\nwant\n%s", got, files)
	}
	// A real run afterwards still finds everything.
	if rep := tl.reconcile(t, reconcile.Config{}); rep.Corrected != 1 || rep.Inserted != 1 {
		t.Errorf("run after dry run: got %s, want 1 corrected, 1 inserted", reportLine(rep))
	}
}

func listAll(t *testing.T, st store.Store) string {
	t.Helper()
	infos, err := st.List(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, i := range infos {
		b.WriteString(i.Key + "\n")
	}
	return b.String()
}

func TestLockHeld(t *testing.T) {
	tl := lateLake(t)
	ctx := context.Background()
	now := fixedClock()
	body := `{"owner":"other","run_id":"r1","acquired":"` + now.Format(time.RFC3339) + `","expires":"` + now.Add(time.Hour).Format(time.RFC3339) + `"}`
	if err := tl.st.PutIfAbsent(ctx, "_reconcile/lock", []byte(body)); err != nil {
		t.Fatal(err)
	}
	_, err := reconcile.Run(ctx, reconcile.Config{LakeStore: tl.st, Clock: fixedClock})
	var le *reconcile.LockedError
	if !errors.As(err, &le) || !errors.Is(err, store.ErrLocked) || le.ExitCode() != 3 || le.Owner != "other" {
		t.Fatalf("got %v, want a LockedError from owner other with exit code 3", err)
	}
	// Dry runs take no lock.
	if _, err := reconcile.Run(ctx, reconcile.Config{LakeStore: tl.st, Clock: fixedClock, DryRun: true}); err != nil {
		t.Errorf("dry run under a held lock: %v", err)
	}
	// Two hours later the lock is stale and taken over; the run releases it.
	later := func() time.Time { return now.Add(2 * time.Hour) }
	if _, err := reconcile.Run(ctx, reconcile.Config{LakeStore: tl.st, Clock: later}); err != nil {
		t.Fatalf("run over a stale lock: %v", err)
	}
	if _, err := store.ReadAll(ctx, tl.st, "_reconcile/lock"); !errors.Is(err, store.ErrNotExist) {
		t.Errorf("lock after the run: got %v, want it released", err)
	}
}

func TestConcurrentRunsOneWins(t *testing.T) {
	tl := lateLake(t)
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = reconcile.Run(context.Background(), reconcile.Config{LakeStore: tl.st, Clock: fixedClock})
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil && !errors.Is(err, store.ErrLocked) {
			t.Errorf("run %d: got %v, want success or ErrLocked", i, err)
		}
	}
	want := "[2026-03-01T10:00:00Z, 2026-03-01T10:01:00Z) a batch 5 8.5 -5 10 rev 2\n" +
		"[2026-03-01T10:01:00Z, 2026-03-01T10:02:00Z) b batch 1 7 7 7 rev 1\n"
	if got := windowsText(t, tl); got != want {
		t.Errorf("got window_results\n%s\nwant\n%s", got, want)
	}
}

// failingStore fails the first PutIfAbsent of a run's commit to table
// (window_results when empty): the data files are written, the commit is
// not (a crash before it).
type failingStore struct {
	store.Store
	table  string
	mu     sync.Mutex
	failed bool
}

func (f *failingStore) PutIfAbsent(ctx context.Context, key string, data []byte) error {
	f.mu.Lock()
	fail := !f.failed && strings.HasPrefix(key, cmp.Or(f.table, "window_results")+"/_delta_log/") && bytes.Contains(data, []byte(`"appId":"`+reconcile.AppRun+`"`))
	if fail {
		f.failed = true
	}
	f.mu.Unlock()
	if fail {
		return errors.New("injected crash before commit")
	}
	return f.Store.PutIfAbsent(ctx, key, data)
}

func TestCrashBeforeCommitThenNextRunCompletes(t *testing.T) {
	tl := lateLake(t)
	before := windowsText(t, tl)
	fs := &failingStore{Store: tl.st}
	_, err := reconcile.Run(context.Background(), reconcile.Config{LakeStore: fs, Clock: fixedClock})
	if err == nil || !strings.Contains(err.Error(), "injected crash") {
		t.Fatalf("got %v, want the injected failure", err)
	}
	if got := windowsText(t, tl); got != before {
		t.Errorf("window_results changed by the failed run:\n%s", got)
	}
	// The failed run released its lock; the next run completes.
	rep := tl.reconcile(t, reconcile.Config{})
	if rep.Corrected != 1 || rep.Inserted != 1 {
		t.Errorf("next run: got %s, want 1 corrected, 1 inserted", reportLine(rep))
	}
	if rep := tl.reconcile(t, reconcile.Config{}); rep.Corrected+rep.Inserted != 0 {
		t.Errorf("third run: got %s, want nothing", reportLine(rep))
	}
}

// TestOrphanFileIgnored: a data file left in window_results by a crashed
// writer (no commit) is not read and does not disturb the run.
func TestOrphanFileIgnored(t *testing.T) {
	tl := lateLake(t)
	dir := tl.st.String()
	part := filepath.Join(dir, "window_results", "window_date=2026-03-01")
	if err := os.MkdirAll(part, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(part, "part-orphan.zstd.parquet"), []byte("not parquet"), 0o644); err != nil {
		t.Fatal(err)
	}
	if rep := tl.reconcile(t, reconcile.Config{}); rep.Corrected != 1 || rep.Inserted != 1 {
		t.Errorf("got %s, want 1 corrected, 1 inserted", reportLine(rep))
	}
}

// TestRacingStreamCommit runs reconcile while a stream-like writer commits
// new windows to the same window_results partition: both survive, each
// window key once.
func TestRacingStreamCommit(t *testing.T) {
	ctx := context.Background()
	for round := range 5 {
		tl := lateLake(t)
		other, err := lake.Open(ctx, tl.st, lake.Config{})
		if err != nil {
			t.Fatal(err)
		}
		base := t0.UnixMicro()
		var wg sync.WaitGroup
		var streamErr error
		wg.Add(1)
		go func() {
			defer wg.Done()
			for b := int64(2); b < 8 && streamErr == nil; b++ {
				start := base + (4+b)*60*second // same window_date partition
				r := rec(int(b)*10, start+second, "c", float64(b))
				res := []tidemark.Result{{Window: tidemark.Window{Start: start, End: start + 60*second}, Key: r.Key, Agg: aggOf(float64(b)), Final: true}}
				streamErr = other.AppendBatch(ctx, lake.Batch{AppID: "stream", BatchID: b, Records: []tidemark.Record{r}, Closed: streamRows(res, start+60*second, true)})
			}
		}()
		rep := tl.reconcile(t, reconcile.Config{})
		wg.Wait()
		if streamErr != nil {
			t.Fatal(streamErr)
		}
		got := windowsText(t, tl)
		for _, want := range []string{
			"[2026-03-01T10:00:00Z, 2026-03-01T10:01:00Z) a batch 5 8.5 -5 10 rev 2\n",
			"[2026-03-01T10:01:00Z, 2026-03-01T10:02:00Z) b batch 1 7 7 7 rev 1\n",
			"[2026-03-01T10:11:00Z, 2026-03-01T10:12:00Z) c stream 1 7 7 7 rev 1\n",
		} {
			if !strings.Contains(got, want) {
				t.Errorf("round %d (report %s): window_results lacks %q:\n%s", round, reportLine(rep), want, got)
			}
		}
		if n := strings.Count(got, "\n"); n != 8 {
			t.Errorf("round %d: got %d rows, want 8:\n%s", round, n, got)
		}
	}
}

// TestConfigErrors: Run refuses a bad config before it opens anything,
// with a *tidemark.ConfigError naming the config's fields (cmd/tidemark
// phrases it with its flags, see TestReconcileConfigErrorsNameFlags).
func TestConfigErrors(t *testing.T) {
	tl := lateLake(t)
	for _, tc := range []struct {
		cfg  reconcile.Config
		want string
	}{
		{reconcile.Config{Since: time.Hour, From: t0, To: t0.Add(time.Hour)}, "reconcile config: give Since or From/To, not both"},
		{reconcile.Config{From: t0}, "reconcile config: From and To go together"},
		{reconcile.Config{From: t0, To: t0}, "reconcile config: To 2026-03-01T10:00:00Z is not after From 2026-03-01T10:00:00Z"},
		{reconcile.Config{Since: -time.Hour}, "reconcile config: Since must not be negative, got -1h0m0s"},
	} {
		cfg := tc.cfg
		cfg.LakeStore = tl.st
		_, err := reconcile.Run(context.Background(), cfg)
		var ce *tidemark.ConfigError
		if !errors.As(err, &ce) || err.Error() != tc.want {
			t.Errorf("config %+v: got %v, want a ConfigError %q", cfg, err, tc.want)
		}
		if verr := tc.cfg.Validate(); verr == nil || verr.Error() != tc.want {
			t.Errorf("Validate(%+v): got %v, want %q", tc.cfg, verr, tc.want)
		}
	}
	if _, err := reconcile.Run(context.Background(), reconcile.Config{}); err == nil {
		t.Errorf("no lake: got nil error, want one")
	}
}
