package store_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"tidemark/lake/store"
	"tidemark/lake/store/storetest"
)

// overwrite puts h as the lease object at key, as a taker that found the
// lease stale would.
func overwrite(t *testing.T, st store.Store, key string, h store.LeaseHolder) {
	t.Helper()
	b, err := json.Marshal(h)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Put(context.Background(), key, strings.NewReader(string(b)), int64(len(b))); err != nil {
		t.Fatal(err)
	}
}

// holderID returns the run id of the lease object at key.
func holderID(t *testing.T, st store.Store, key string) string {
	t.Helper()
	raw, err := store.ReadAll(context.Background(), st, key)
	if err != nil {
		t.Fatal(err)
	}
	var h store.LeaseHolder
	if err := json.Unmarshal(raw, &h); err != nil {
		t.Fatal(err)
	}
	return h.ID
}

// A holder whose lease was taken over (it outlived its TTL) learns it at
// the next heartbeat, before renewing: Lost is closed, Err names the new
// holder, and neither the heartbeat nor Release touches the new lease.
func TestLeaseLostToTakeover(t *testing.T) {
	dir := t.TempDir()
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		st := objectsOnly{openDir(t, dir)}
		a, err := store.AcquireLease(ctx, st, store.LeaseConfig{Key: "lease", Owner: "a", ID: "run-a", TTL: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		now := time.Now()
		overwrite(t, st, "lease", store.LeaseHolder{Owner: "b", ID: "run-b", Host: "elsewhere", Acquired: now, Expires: now.Add(time.Minute)})
		if a.Err() != nil {
			t.Fatalf("before the heartbeat: Err %v, want nil", a.Err())
		}
		time.Sleep(20*time.Second + time.Millisecond) // one heartbeat (TTL/3)
		synctest.Wait()
		select {
		case <-a.Lost():
		default:
			t.Fatal("after a heartbeat on a taken-over lease: Lost is not closed")
		}
		if err := a.Err(); !errors.Is(err, store.ErrLeaseLost) || !strings.Contains(err.Error(), "owner b") {
			t.Fatalf("Err: got %v, want ErrLeaseLost naming owner b", err)
		}
		time.Sleep(time.Minute) // a stopped heartbeat writes nothing more
		synctest.Wait()
		if got := holderID(t, st, "lease"); got != "run-b" {
			t.Fatalf("after the heartbeat: lease held by %q, want run-b", got)
		}
		if err := a.Release(ctx); !errors.Is(err, store.ErrLeaseLost) {
			t.Fatalf("Release of a lost lease: got %v, want ErrLeaseLost", err)
		}
		if got := holderID(t, st, "lease"); got != "run-b" {
			t.Fatalf("after Release: lease held by %q, want run-b", got)
		}
	})
}

// failingPuts fails every Put after it is armed: a store the holder cannot
// reach any more.
type failingPuts struct {
	store.Store
	armed atomic.Bool
}

func (f *failingPuts) Put(ctx context.Context, key string, r io.Reader, size int64) error {
	if f.armed.Load() {
		return errors.New("injected: store unreachable")
	}
	return f.Store.Put(ctx, key, r, size)
}

// A holder that cannot renew gives the lease up at the last heartbeat
// before it expires, rather than write on past a takeover.
func TestLeaseLostUnrenewed(t *testing.T) {
	dir := t.TempDir()
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		st := &failingPuts{Store: openDir(t, dir)}
		l, err := store.AcquireLease(ctx, objectsOnly{st}, store.LeaseConfig{Key: "lease", Owner: "a", TTL: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		st.armed.Store(true)
		time.Sleep(20*time.Second + time.Millisecond) // one failed renewal: expiry still two ticks away
		synctest.Wait()
		if err := l.Err(); err != nil {
			t.Fatalf("after one failed renewal: Err %v, want nil", err)
		}
		time.Sleep(20 * time.Second) // the second: the next tick would be at the expiry
		synctest.Wait()
		if err := l.Err(); !errors.Is(err, store.ErrLeaseLost) || !strings.Contains(err.Error(), "could not be renewed") || !strings.Contains(err.Error(), "injected") {
			t.Fatalf("after two failed renewals: Err %v, want ErrLeaseLost saying why", err)
		}
		if err := l.Release(ctx); !errors.Is(err, store.ErrLeaseLost) {
			t.Fatalf("Release: got %v, want ErrLeaseLost", err)
		}
	})
}

// takeoverAfterRead is the S3 store with a takeover landing right after
// each ReadVersion of the lease: the moment between a releasing holder's
// check and its delete.
type takeoverAfterRead struct {
	*store.S3
	t     *testing.T
	armed atomic.Bool
}

func (s *takeoverAfterRead) ReadVersion(ctx context.Context, key string) ([]byte, string, error) {
	data, tag, err := s.S3.ReadVersion(ctx, key)
	if err == nil && key == "lease" && s.armed.CompareAndSwap(true, false) {
		now := time.Now()
		overwrite(s.t, s.S3, key, store.LeaseHolder{Owner: "b", ID: "run-b", Host: "elsewhere", Acquired: now, Expires: now.Add(time.Minute)})
	}
	return data, tag, err
}

// On S3 a release racing a takeover deletes only its own version (If-Match
// on DELETE): the new holder's lease stays. And the heartbeat finds a
// takeover on the real server.
func TestLeaseS3ReleaseRacesTakeover(t *testing.T) {
	srv := storetest.StartVersity(t)
	s3, err := store.OpenS3(t.Context(), srv.Bucket(t), "lake", s3Config(srv))
	if err != nil {
		t.Fatal(err)
	}
	st := &takeoverAfterRead{S3: s3, t: t}
	ctx := t.Context()
	a, err := store.AcquireLease(ctx, st, store.LeaseConfig{Key: "lease", Owner: "a", ID: "run-a", TTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	st.armed.Store(true)
	err = a.Release(ctx)
	if err == nil || !strings.Contains(err.Error(), "outlived its lease") {
		t.Fatalf("release racing a takeover: got %v, want the outlived-lease error", err)
	}
	if got := holderID(t, s3, "lease"); got != "run-b" {
		t.Fatalf("after the racing release: lease held by %q, want run-b (not deleted)", got)
	}
	if err := s3.Delete(ctx, "lease"); err != nil {
		t.Fatal(err)
	}

	// The heartbeat, on the real server: a short renew period, a takeover,
	// then Lost (waited for, with a bound).
	c, err := store.AcquireLease(ctx, s3, store.LeaseConfig{Key: "lease", Owner: "c", ID: "run-c", TTL: time.Hour, Renew: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	overwrite(t, s3, "lease", store.LeaseHolder{Owner: "b", ID: "run-b", Host: "elsewhere", Acquired: now, Expires: now.Add(time.Minute)})
	select {
	case <-c.Lost():
	case <-time.After(30 * time.Second):
		t.Fatal("heartbeat did not find the takeover in 30s")
	}
	if err := c.Err(); !errors.Is(err, store.ErrLeaseLost) || !strings.Contains(err.Error(), "owner b") {
		t.Fatalf("Err: got %v, want ErrLeaseLost naming owner b", err)
	}
	if err := c.Release(ctx); !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("Release: got %v, want ErrLeaseLost", err)
	}
	if got := holderID(t, s3, "lease"); got != "run-b" {
		t.Fatalf("after the heartbeat and Release: lease held by %q, want run-b", got)
	}
}
