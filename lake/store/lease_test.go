package store_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"tidemark/lake/store"
)

// objectsOnly hides the directory store's Locker, so the lease takes the
// object path it takes on S3.
type objectsOnly struct{ store.Store }

func openDir(t *testing.T, dir string) *store.Dir {
	t.Helper()
	st, err := store.OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func keys(t *testing.T, st store.Store, prefix string) string {
	t.Helper()
	infos, err := st.List(context.Background(), prefix)
	if err != nil {
		t.Fatal(err)
	}
	var ks []string
	for _, i := range infos {
		ks = append(ks, i.Key)
	}
	return strings.Join(ks, " ")
}

func putHolder(t *testing.T, st store.Store, key string, h store.LeaseHolder) {
	t.Helper()
	b, err := json.Marshal(h)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.PutIfAbsent(context.Background(), key, b); err != nil {
		t.Fatal(err)
	}
}

// A holder that outlives the TTL keeps its lease (the heartbeat renews it);
// once it is released the next taker gets it at once.
func TestLeaseHeartbeat(t *testing.T) {
	dir := t.TempDir()
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		st := objectsOnly{openDir(t, dir)}
		cfg := store.LeaseConfig{Key: "lease", Owner: "a", TTL: time.Minute}
		first, err := store.AcquireLease(ctx, st, cfg)
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(5 * time.Minute) // the bubble's clock: five TTLs
		synctest.Wait()
		cfg.Owner = "b"
		if _, err := store.AcquireLease(ctx, st, cfg); !errors.Is(err, store.ErrLocked) {
			t.Fatalf("after 5 TTLs of heartbeat: got %v, want ErrLocked", err)
		}
		if err := first.Release(ctx); err != nil {
			t.Fatal(err)
		}
		if err := first.Release(ctx); err != nil {
			t.Fatalf("second release: %v", err)
		}
		second, err := store.AcquireLease(ctx, st, cfg)
		if err != nil {
			t.Fatalf("after release: %v", err)
		}
		if err := second.Release(ctx); err != nil {
			t.Fatal(err)
		}
		if got := keys(t, st, "lease"); got != "" {
			t.Errorf("objects after release: got %q, want none", got)
		}
	})
}

// A lease nobody renews is honoured until its TTL, then taken over; the
// error before names the holder's host, pid and age, and the steal marker
// is gone after the takeover.
func TestLeaseStaleAfterTTL(t *testing.T) {
	dir := t.TempDir()
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		st := objectsOnly{openDir(t, dir)}
		now := time.Now()
		putHolder(t, st, "lease", store.LeaseHolder{Owner: "crashed", ID: "r1", Host: "elsewhere", PID: 4242, Acquired: now, Expires: now.Add(time.Minute)})
		time.Sleep(30 * time.Second)
		cfg := store.LeaseConfig{Key: "lease", Owner: "b", TTL: time.Minute}
		_, err := store.AcquireLease(ctx, st, cfg)
		var held *store.HeldError
		if !errors.As(err, &held) || !errors.Is(err, store.ErrLocked) {
			t.Fatalf("live lease: got %v, want a HeldError", err)
		}
		for _, want := range []string{"owner crashed", "run r1", "host elsewhere", "pid 4242", "for 30s"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("error %q does not say %q", err, want)
			}
		}
		if held.Age != 30*time.Second {
			t.Errorf("age: got %s, want 30s", held.Age)
		}
		time.Sleep(30 * time.Second) // now expired
		l, err := store.AcquireLease(ctx, st, cfg)
		if err != nil {
			t.Fatalf("expired lease: got %v, want it taken over", err)
		}
		if got := keys(t, st, "lease"); got != "lease" {
			t.Errorf("objects after takeover: got %q, want only the lease (marker cleaned up)", got)
		}
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
	})
}

// A lease of a process of this host that no longer exists is taken over at
// once; one of another host waits for its TTL.
func TestLeaseDeadOnThisHost(t *testing.T) {
	ctx := context.Background()
	st := objectsOnly{openDir(t, t.TempDir())}
	host, err := os.Hostname()
	if err != nil || host == "" {
		t.Skip("no hostname")
	}
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Skipf("cannot run true: %v", err)
	}
	now := time.Now()
	putHolder(t, st, "lease", store.LeaseHolder{Owner: "killed", Host: host, PID: dead.Process.Pid, Acquired: now, Expires: now.Add(time.Hour)})
	cfg := store.LeaseConfig{Key: "lease", Owner: "restarted", TTL: time.Hour}
	l, err := store.AcquireLease(ctx, st, cfg)
	if err != nil {
		t.Fatalf("lease of a dead process of this host: %v, want it taken over", err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	// So is a takeover that such a process left half done (killed between
	// its steal marker and its own lease).
	putHolder(t, st, "lease", store.LeaseHolder{Owner: "killed", ID: "r7", Host: host, PID: dead.Process.Pid, Acquired: now, Expires: now.Add(time.Hour)})
	putHolder(t, st, "lease.steal.r7", store.LeaseHolder{Owner: "killed-stealing", ID: "r8", Host: host, PID: dead.Process.Pid, Acquired: now, Expires: now.Add(time.Hour)})
	if l, err = store.AcquireLease(ctx, st, cfg); err != nil {
		t.Fatalf("half-done takeover by a dead process of this host: %v, want it taken over", err)
	}
	if got := keys(t, st, "lease"); got != "lease" {
		t.Errorf("objects: got %q, want only the lease", got)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	// A marker a taker left when killed after its own lease was in place
	// is swept by the next holder.
	putHolder(t, st, "lease.steal.r9", store.LeaseHolder{Owner: "killed-after-taking", ID: "r10", Host: host, PID: dead.Process.Pid, Acquired: now, Expires: now.Add(time.Hour)})
	if l, err = store.AcquireLease(ctx, st, cfg); err != nil {
		t.Fatal(err)
	}
	if got := keys(t, st, "lease"); got != "lease" {
		t.Errorf("objects: got %q, want the leftover marker swept", got)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	putHolder(t, st, "lease", store.LeaseHolder{Owner: "elsewhere", Host: host + "-other", PID: dead.Process.Pid, Acquired: now, Expires: now.Add(time.Hour)})
	if _, err := store.AcquireLease(ctx, st, cfg); !errors.Is(err, store.ErrLocked) {
		t.Fatalf("another host's live lease: %v, want ErrLocked", err)
	}
}

// Many takers racing for one stale lease: exactly one holds it, the others
// are told who, and no steal marker is left behind.
func TestLeaseStealRace(t *testing.T) {
	dir := t.TempDir()
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		st := objectsOnly{openDir(t, dir)}
		old := time.Now().Add(-2 * time.Hour)
		putHolder(t, st, "lease", store.LeaseHolder{Owner: "crashed", ID: "r0", Acquired: old, Expires: old.Add(time.Hour)})
		const n = 8
		leases := make([]*store.Lease, n)
		errs := make([]error, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				leases[i], errs[i] = store.AcquireLease(ctx, st, store.LeaseConfig{Key: "lease", Owner: fmt.Sprint("taker", i), TTL: time.Hour})
			})
		}
		wg.Wait()
		won := 0
		for i, err := range errs {
			switch {
			case err == nil:
				won++
			case !errors.Is(err, store.ErrLocked):
				t.Errorf("taker %d: %v, want success or ErrLocked", i, err)
			}
		}
		if won != 1 {
			t.Fatalf("%d takers hold the lease, want 1", won)
		}
		if got := keys(t, st, "lease"); got != "lease" {
			t.Errorf("objects: got %q, want only the lease", got)
		}
		for _, l := range leases {
			if l != nil {
				if err := l.Release(ctx); err != nil {
					t.Fatal(err)
				}
			}
		}
	})
}

// A steal marker left by a taker that died mid-takeover blocks the stale
// lease only for a TTL.
func TestLeaseLeftoverMarker(t *testing.T) {
	dir := t.TempDir()
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		st := objectsOnly{openDir(t, dir)}
		now := time.Now()
		putHolder(t, st, "lease", store.LeaseHolder{Owner: "crashed", ID: "r0", Acquired: now.Add(-2 * time.Hour), Expires: now.Add(-time.Hour)})
		putHolder(t, st, "lease.steal.r0", store.LeaseHolder{Owner: "died-stealing", ID: "r1", Acquired: now, Expires: now.Add(time.Hour)})
		cfg := store.LeaseConfig{Key: "lease", Owner: "b", TTL: time.Hour}
		if _, err := store.AcquireLease(ctx, st, cfg); !errors.Is(err, store.ErrLocked) {
			t.Fatalf("stale lease under a fresh marker: %v, want ErrLocked", err)
		}
		time.Sleep(time.Hour)
		l, err := store.AcquireLease(ctx, st, cfg)
		if err != nil {
			t.Fatalf("stale lease under a stale marker: %v, want it taken over", err)
		}
		if got := keys(t, st, "lease"); got != "lease" {
			t.Errorf("objects: got %q, want only the lease", got)
		}
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
	})
}

// On the directory store the lease also holds flock(2): a second taker in
// this process (another open file) is locked out and told who holds it, and
// a lease object of this host under a free flock is a dead holder's.
func TestLeaseLocalLock(t *testing.T) {
	dir := openDir(t, t.TempDir())
	if _, ok := store.Store(dir).(store.Locker); !ok {
		t.Skip("no local lock on this platform")
	}
	ctx := context.Background()
	host, _ := os.Hostname()
	for _, local := range []bool{false, true} {
		t.Run(fmt.Sprint("local=", local), func(t *testing.T) {
			cfg := store.LeaseConfig{Key: fmt.Sprint("l", local), Owner: "first", TTL: time.Hour, Local: local}
			first, err := store.AcquireLease(ctx, dir, cfg)
			if err != nil {
				t.Fatal(err)
			}
			cfg.Owner = "second"
			_, err = store.AcquireLease(ctx, dir, cfg)
			if !errors.Is(err, store.ErrLocked) || !strings.Contains(err.Error(), "owner first") || !strings.Contains(err.Error(), fmt.Sprint("pid ", os.Getpid())) {
				t.Fatalf("second taker: got %v, want ErrLocked naming owner first and pid %d", err, os.Getpid())
			}
			if err := first.Release(ctx); err != nil {
				t.Fatal(err)
			}
			if !local {
				// A kill -9 leaves the object but frees the flock.
				now := time.Now()
				putHolder(t, dir, cfg.Key, store.LeaseHolder{Owner: "killed", Host: host, PID: os.Getpid(), Acquired: now, Expires: now.Add(time.Hour)})
			}
			second, err := store.AcquireLease(ctx, dir, cfg)
			if err != nil {
				t.Fatalf("after release: %v", err)
			}
			if err := second.Release(ctx); err != nil {
				t.Fatal(err)
			}
		})
	}
}
