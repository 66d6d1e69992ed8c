package stream

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"testing"
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
