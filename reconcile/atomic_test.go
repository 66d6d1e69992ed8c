package reconcile_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"testing"
	"time"

	"tidemark/lake"
	"tidemark/lake/store"
	"tidemark/reconcile"
)

// fullStore is a store whose disk fills up: from the nth write on (Put or
// PutIfAbsent, counted from 1), every write fails.
type fullStore struct {
	store.Store
	mu     sync.Mutex
	n, at  int
	failed bool
}

var errDiskFull = errors.New("injected: no space left on device")

func (f *fullStore) write() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.n++
	if f.n >= f.at {
		f.failed = true
		return errDiskFull
	}
	return nil
}

func (f *fullStore) Put(ctx context.Context, key string, r io.Reader, size int64) error {
	if err := f.write(); err != nil {
		return err
	}
	return f.Store.Put(ctx, key, r, size)
}

func (f *fullStore) PutIfAbsent(ctx context.Context, key string, data []byte) error {
	if err := f.write(); err != nil {
		return err
	}
	return f.Store.PutIfAbsent(ctx, key, data)
}

// logAgreement lists how window_results and reconcile_log disagree: every
// row reconcile wrote (origin batch) must have its log row with the same
// new value, and every log row its window, each once.
func logAgreement(t *testing.T, lk *lake.Lake) []string {
	t.Helper()
	ctx := context.Background()
	rows, err := lk.Windows(ctx, lake.AllFrom, lake.AllTo, 0)
	if err != nil {
		t.Fatal(err)
	}
	logRows, err := lk.ReconcileLog(ctx)
	if err != nil {
		t.Fatal(err)
	}
	logged := map[string]int{}
	for _, r := range logRows {
		logged[fmt.Sprintf("%s %s %d %v", r.Window, r.Key, r.New.Count, r.New.Total())]++
	}
	var bad []string
	for _, r := range rows {
		if r.Origin != lake.OriginBatch {
			continue
		}
		k := fmt.Sprintf("%s %s %d %v", r.Window, r.Key, r.Agg.Count, r.Agg.Total())
		if logged[k] != 1 {
			bad = append(bad, fmt.Sprintf("window %s has %d log rows, want 1", k, logged[k]))
		}
		delete(logged, k)
	}
	for k, n := range logged {
		bad = append(bad, fmt.Sprintf("log row %s (x%d) without its window", k, n))
	}
	slices.Sort(bad)
	return bad
}

// TestDiskFullDuringReconcile fills the disk at every write of a reconcile
// run in turn, then reruns on a healthy disk: window_results and
// reconcile_log agree after the rerun, whichever write failed, and the
// result is the one of an undisturbed run. At least one failure must hit
// between the corrections' commit and the log's (the case a rerun must
// complete), or the test proves nothing.
func TestDiskFullDuringReconcile(t *testing.T) {
	ctx := context.Background()
	ref := lateLake(t)
	ref.reconcile(t, reconcile.Config{})
	want := windowsText(t, ref)
	between := 0
	for at := 1; ; at++ {
		tl := lateLake(t)
		fs := &fullStore{Store: tl.st, at: at}
		_, err := reconcile.Run(ctx, reconcile.Config{LakeStore: fs, Clock: fixedClock})
		if err == nil {
			if fs.failed {
				t.Fatalf("write %d: failed but the run reported success", at)
			}
			if at == 1 {
				t.Fatal("a reconcile run wrote nothing")
			}
			break // every write of the run has failed once
		}
		if !errors.Is(err, errDiskFull) {
			t.Fatalf("write %d: got %v, want the injected failure", at, err)
		}
		wtx, err := tl.lk.Txns(ctx, lake.TableWindowResults)
		if err != nil {
			t.Fatal(err)
		}
		ltx, err := tl.lk.Txns(ctx, lake.TableReconcileLog)
		if err != nil {
			t.Fatal(err)
		}
		if wtx[reconcile.AppRun] > ltx[reconcile.AppRun] {
			between++
		}
		rep := tl.reconcile(t, reconcile.Config{})
		if bad := logAgreement(t, tl.lk); len(bad) > 0 {
			t.Errorf("write %d failed, then rerun (%s): window_results and reconcile_log disagree:\n%v", at, reportLine(rep), bad)
		}
		if got := windowsText(t, tl); got != want {
			t.Errorf("write %d failed, then rerun: got window_results\n%s\nwant\n%s", at, got, want)
		}
		logRows, err := tl.lk.ReconcileLog(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(logRows) != 2 {
			t.Errorf("write %d failed, then rerun: got %d log rows, want 2", at, len(logRows))
		}
		if rep := tl.reconcile(t, reconcile.Config{}); rep.Corrected+rep.Inserted != 0 {
			t.Errorf("write %d: third run got %s, want nothing", at, reportLine(rep))
		}
	}
	if between == 0 {
		t.Error("no failure fell between the window_results and reconcile_log commits")
	}
}

// TestPendingLogSurvivesVacuum: the log rows a killed run left pending are
// kept by vacuum (even forced to retain nothing) until the next run
// commits them.
func TestPendingLogSurvivesVacuum(t *testing.T) {
	ctx := context.Background()
	tl := lateLake(t)
	fs := &failingStore{Store: tl.st, table: lake.TableReconcileLog}
	if _, err := reconcile.Run(ctx, reconcile.Config{LakeStore: fs, Clock: fixedClock}); err == nil {
		t.Fatal("got success, want the injected failure of the reconcile_log commit")
	}
	far := func() time.Time { return time.Now().Add(30 * 24 * time.Hour) } // past every file's age
	lk, err := lake.Open(ctx, tl.st, lake.Config{Clock: far})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := lk.Vacuum(ctx, lake.VacuumOptions{Force: true}); err != nil {
		t.Fatal(err)
	}
	tl.reconcile(t, reconcile.Config{})
	if bad := logAgreement(t, tl.lk); len(bad) > 0 {
		t.Errorf("after vacuum and rerun: %v", bad)
	}
	if logRows, err := tl.lk.ReconcileLog(ctx); err != nil || len(logRows) != 2 {
		t.Errorf("got %d log rows (err %v), want 2", len(logRows), err)
	}
}
