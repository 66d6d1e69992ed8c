package reconcile

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"tidemark/lake/store"
)

// lockKey is the lock object in the lake's store. Stale locks are taken
// over through a marker per stale run (lockKey + ".steal." + run id): only
// the run that creates the marker may delete the stale lock, so two runs
// that both found it stale cannot both end up holding the lock.
const lockKey = "_reconcile/lock"

// LockedError is returned when another reconcile run holds the lock. It
// carries exit code 3 for cron wrappers.
type LockedError struct {
	Owner   string
	RunID   string
	Expires time.Time
}

// Error names the holder and when its lock expires, so whoever reads a
// cron mail knows whether to wait or to look for a stuck run.
func (e *LockedError) Error() string {
	return fmt.Sprintf("reconcile: another run holds the lock (owner %s, run %s, until %s)", e.Owner, e.RunID, e.Expires.UTC().Format(time.RFC3339))
}

// ExitCode is the process status for a held lock.
func (e *LockedError) ExitCode() int { return 3 }

// ErrLocked matches every *LockedError with errors.Is.
var ErrLocked = errors.New("reconcile: lock held")

// Is makes errors.Is(err, ErrLocked) true.
func (e *LockedError) Is(target error) bool { return target == ErrLocked }

type lockBody struct {
	Owner    string    `json:"owner"`
	RunID    string    `json:"run_id"`
	Acquired time.Time `json:"acquired"`
	Expires  time.Time `json:"expires"`
}

// lock is a held lock. While held, a heartbeat pushes its expiry forward
// every third of the TTL, so a run longer than the TTL keeps it and only a
// run that died leaves a lock to take over.
type lock struct {
	st   store.Store
	body lockBody
	ttl  time.Duration
	now  func() time.Time
	stop chan struct{}
	done chan struct{}
}

// heartbeat renews the lock until release.
func (l *lock) heartbeat() {
	defer close(l.done)
	t := time.NewTicker(max(l.ttl/3, time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-l.stop:
			return
		case <-t.C:
			body := l.body
			body.Expires = l.now().Add(l.ttl).UTC()
			data, err := json.Marshal(body)
			if err != nil {
				continue
			}
			ctx, cancel := context.WithTimeout(context.Background(), l.ttl/3+time.Second)
			// A failed renewal is retried at the next tick; the lock
			// still holds until its last expiry.
			_ = l.st.Put(ctx, lockKey, bytes.NewReader(data), int64(len(data)))
			cancel()
		}
	}
}

// acquireLock takes the lock or returns a *LockedError.
func acquireLock(ctx context.Context, st store.Store, owner, runID string, clock func() time.Time, ttl time.Duration) (*lock, error) {
	now := clock()
	body := lockBody{Owner: owner, RunID: runID, Acquired: now.UTC(), Expires: now.Add(ttl).UTC()}
	data, err := json.Marshal(body)
	if err != nil {
		return nil, err
	}
	for attempt := 0; attempt < 2; attempt++ {
		err := st.PutIfAbsent(ctx, lockKey, data)
		if err == nil {
			l := &lock{st: st, body: body, ttl: ttl, now: clock, stop: make(chan struct{}), done: make(chan struct{})}
			go l.heartbeat()
			return l, nil
		}
		if !errors.Is(err, store.ErrExists) {
			return nil, fmt.Errorf("take lock %s: %w", lockKey, err)
		}
		raw, err := store.ReadAll(ctx, st, lockKey)
		if errors.Is(err, store.ErrNotExist) {
			continue // released meanwhile
		}
		if err != nil {
			return nil, fmt.Errorf("read lock %s: %w", lockKey, err)
		}
		var held lockBody
		if err := json.Unmarshal(raw, &held); err != nil {
			// A damaged lock is treated as stale under its content's name.
			held = lockBody{Owner: "unknown", RunID: fmt.Sprintf("damaged-%x", raw[:min(len(raw), 8)])}
		}
		if now.Before(held.Expires) {
			return nil, &LockedError{Owner: held.Owner, RunID: held.RunID, Expires: held.Expires}
		}
		if err := st.PutIfAbsent(ctx, lockKey+".steal."+held.RunID, data); err != nil {
			if errors.Is(err, store.ErrExists) {
				return nil, &LockedError{Owner: held.Owner, RunID: held.RunID, Expires: held.Expires}
			}
			return nil, fmt.Errorf("take over stale lock: %w", err)
		}
		if err := st.Delete(ctx, lockKey); err != nil {
			return nil, fmt.Errorf("delete stale lock: %w", err)
		}
	}
	return nil, fmt.Errorf("take lock %s: lost the race twice", lockKey)
}

// release stops the heartbeat and deletes the lock if it is still ours.
func (l *lock) release(ctx context.Context) error {
	close(l.stop)
	<-l.done
	raw, err := store.ReadAll(ctx, l.st, lockKey)
	if errors.Is(err, store.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("release lock: %w", err)
	}
	var held lockBody
	if json.Unmarshal(raw, &held) == nil && held.RunID != l.body.RunID {
		return fmt.Errorf("release lock: held by run %s now, not %s (this run outlived its lock)", held.RunID, l.body.RunID)
	}
	if err := l.st.Delete(ctx, lockKey); err != nil {
		return fmt.Errorf("release lock: %w", err)
	}
	return nil
}
