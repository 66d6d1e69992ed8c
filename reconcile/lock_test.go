package reconcile

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"tidemark/lake/store"
)

// A run that outlasts its lock's TTL keeps the lock: the heartbeat pushes
// the expiry forward, so a second run is still locked out. Once released,
// the lock can be taken at once.
func TestLockHeartbeatOutlivesTTL(t *testing.T) {
	dir := t.TempDir()
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		st, err := store.OpenDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		first, err := acquireLock(ctx, st, "host-a", "run-1", time.Now, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(5 * time.Minute) // the bubble's clock: five TTLs pass
		synctest.Wait()
		_, err = acquireLock(ctx, st, "host-b", "run-2", time.Now, time.Minute)
		if !errors.Is(err, store.ErrLocked) {
			t.Fatalf("second run after 5 TTLs: %v, want the lock held", err)
		}
		if err := first.release(ctx); err != nil {
			t.Fatal(err)
		}
		second, err := acquireLock(ctx, st, "host-b", "run-2", time.Now, time.Minute)
		if err != nil {
			t.Fatalf("after release: %v", err)
		}
		if err := second.release(ctx); err != nil {
			t.Fatal(err)
		}
	})
}
