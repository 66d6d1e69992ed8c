package reconcile

import (
	"context"
	"errors"
	"fmt"
	"time"

	"tidemark/lake/store"
)

// lockKey is the lock object in the lake's store: a store.Lease, renewed
// every third of the TTL while a run lasts, taken over when stale (through
// a steal marker, so two runs that both found it stale cannot both hold
// it), at once when its holder was a process of this host that is gone.
const lockKey = "_reconcile/lock"

// LockedError is returned when another reconcile run holds the lock. It
// carries exit code 3 for cron wrappers.
type LockedError struct {
	Owner   string
	RunID   string
	Host    string // "" when the lock does not say
	PID     int    // 0 when the lock does not say
	Age     time.Duration
	Expires time.Time
}

// Error names the holder, how long it has held the lock and when the lock
// expires, so whoever reads a cron mail knows whether to wait or to look
// for a stuck run.
func (e *LockedError) Error() string {
	h := store.LeaseHolder{Owner: e.Owner, ID: e.RunID, Host: e.Host, PID: e.PID}
	age := "unknown time"
	if e.Age > 0 {
		age = e.Age.Round(time.Second).String()
	}
	return fmt.Sprintf("reconcile: another run holds the lock (%s, for %s, until %s)", h, age, e.Expires.UTC().Format(time.RFC3339))
}

// ExitCode is the process status for a held lock.
func (e *LockedError) ExitCode() int { return 3 }

// Is makes errors.Is(err, store.ErrLocked) true, as for every held lease.
func (e *LockedError) Is(target error) bool { return target == store.ErrLocked }

// lock is a held lock.
type lock struct {
	lease *store.Lease
}

// acquireLock takes the lock or returns a *LockedError.
func acquireLock(ctx context.Context, st store.Store, owner, runID string, clock func() time.Time, ttl time.Duration) (*lock, error) {
	l, err := store.AcquireLease(ctx, st, store.LeaseConfig{Key: lockKey, Owner: owner, ID: runID, TTL: ttl, Clock: clock})
	var held *store.HeldError
	if errors.As(err, &held) {
		h := held.Holder
		return nil, &LockedError{Owner: h.Owner, RunID: h.ID, Host: h.Host, PID: h.PID, Age: held.Age, Expires: h.Expires}
	}
	if err != nil {
		return nil, fmt.Errorf("take lock %s: %w", lockKey, err)
	}
	return &lock{lease: l}, nil
}

// release stops the heartbeat and deletes the lock if it is still ours.
func (l *lock) release(ctx context.Context) error {
	if err := l.lease.Release(ctx); err != nil {
		return fmt.Errorf("release lock: %w", err)
	}
	return nil
}
