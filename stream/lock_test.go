package stream

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"tidemark/lake/store"
)

// leaseStore hides the directory store's type, so acquireLock takes the
// lease path it uses on S3.
type leaseStore struct{ store.Store }

func TestLeaseLock(t *testing.T) {
	ctx := context.Background()
	dir, err := store.OpenDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	st := leaseStore{dir}
	first, err := acquireLock(ctx, st, "first")
	if err != nil {
		t.Fatal(err)
	}
	// A live holder (this very process) locks others out.
	if _, err := acquireLock(ctx, st, "second"); !errors.Is(err, store.ErrLocked) {
		t.Fatalf("second lock while the first is held: %v, want ErrLocked", err)
	}
	if err := first.release(); err != nil {
		t.Fatal(err)
	}

	// A lease left by a process of this host that is gone (kill -9) is
	// taken over at once, without waiting for it to expire.
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Skipf("cannot run true: %v", err)
	}
	host := hostname(t)
	stale, _ := json.Marshal(store.LeaseHolder{Owner: "killed", Host: host, PID: dead.Process.Pid, Expires: time.Now().Add(time.Hour)})
	if err := st.PutIfAbsent(ctx, leaseKey, stale); err != nil {
		t.Fatal(err)
	}
	taken, err := acquireLock(ctx, st, "restarted")
	if err != nil {
		t.Fatalf("lease of a dead process on this host: %v, want it taken over", err)
	}
	if err := taken.release(); err != nil {
		t.Fatal(err)
	}

	// A lease from another host is honoured until it expires.
	other, _ := json.Marshal(store.LeaseHolder{Owner: "elsewhere", Host: host + "-other", PID: dead.Process.Pid, Expires: time.Now().Add(time.Hour)})
	if err := st.PutIfAbsent(ctx, leaseKey, other); err != nil {
		t.Fatal(err)
	}
	if _, err := acquireLock(ctx, st, "restarted"); !errors.Is(err, store.ErrLocked) {
		t.Fatalf("another host's live lease: %v, want ErrLocked", err)
	}
}

func hostname(t *testing.T) string {
	t.Helper()
	host, err := os.Hostname()
	if err != nil || host == "" {
		t.Skip("no hostname")
	}
	return host
}

// A stream whose S3-style lease is taken over (it could not renew it: a
// paused VM) stops at its next heartbeat with an error saying so, commits
// no batch after it, and leaves the new holder's lease in place.
func TestLeaseLostStopsStream(t *testing.T) {
	base := t.TempDir()
	src, lakeDir, ckDir := filepath.Join(base, "src"), filepath.Join(base, "lake"), filepath.Join(base, "ck")
	for _, d := range []string{src, ckDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	synctest.Test(t, func(t *testing.T) {
		ck, err := store.OpenDir(ckDir)
		if err != nil {
			t.Fatal(err)
		}
		cfg := runnerConfig(t, src, lakeDir)
		cfg.Poll = true
		cfg.CheckpointStore = leaseStore{ck}
		appendLine(t, filepath.Join(src, "a.ndjson"), `{"ts":"2026-03-01T10:00:00Z","page":"/a","value":1}`)
		var sum *Summary
		done := make(chan error, 1)
		go func() {
			var err error
			sum, err = Run(context.Background(), cfg)
			done <- err
		}()
		time.Sleep(2 * time.Second) // the first batch is committed
		synctest.Wait()
		now := time.Now()
		other, _ := json.Marshal(store.LeaseHolder{Owner: "taker", ID: "run-b", Host: "elsewhere", Acquired: now, Expires: now.Add(time.Hour)})
		if err := ck.Put(context.Background(), leaseKey, bytes.NewReader(other), int64(len(other))); err != nil {
			t.Fatal(err)
		}
		time.Sleep(leaseRenew) // the next heartbeat finds the takeover
		synctest.Wait()
		select {
		case err = <-done:
		default:
			t.Fatal("the stream runs on after its lease was taken over")
		}
		if !errors.Is(err, store.ErrLeaseLost) || !strings.Contains(err.Error(), "no longer holds the checkpoint's lock") || !strings.Contains(err.Error(), "owner taker") {
			t.Fatalf("Run: got %v, want the lost-lock error naming the taker", err)
		}
		if sum.Batches != 1 {
			t.Errorf("batches committed: got %d, want 1", sum.Batches)
		}
		raw, err := store.ReadAll(context.Background(), ck, leaseKey)
		if err != nil || !bytes.Equal(raw, other) {
			t.Errorf("the taker's lease after the stop: got %q, %v; want it untouched", raw, err)
		}
	})
}
