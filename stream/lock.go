package stream

import (
	"context"
	"errors"
	"fmt"
	"time"

	"tidemark/lake/store"
)

// lock makes one writer per checkpoint: a store.Lease. Where the store can
// lock a local file (the directory store: flock(2)) that lock alone is the
// lease, released by the kernel when the process dies (kill -9 included).
// On S3 it is a lease object renewed by a heartbeat every leaseRenew; one
// not renewed for leaseTTL is taken over, at once if its holder was a
// process of this host that no longer exists.
type lock struct {
	lease *store.Lease
}

const (
	localKey   = "lock"
	leaseKey   = "lock.json"
	leaseTTL   = 30 * time.Second
	leaseRenew = 10 * time.Second
)

// acquireLock takes the checkpoint's lock or fails with an error matching
// store.ErrLocked that says another stream holds it.
func acquireLock(ctx context.Context, st store.Store, owner string) (*lock, error) {
	l, err := store.AcquireLease(ctx, st, store.LeaseConfig{
		Key:      leaseKey,
		LocalKey: localKey,
		Local:    true,
		Owner:    owner,
		TTL:      leaseTTL,
		Renew:    leaseRenew,
	})
	if errors.Is(err, store.ErrLocked) {
		return nil, fmt.Errorf("stream: checkpoint is locked by another running stream: %w", err)
	}
	if err != nil {
		return nil, fmt.Errorf("lock checkpoint %s: %w", st, err)
	}
	return &lock{lease: l}, nil
}

// lost returns, once the lease is lost (on S3: taken over by another stream
// after this one could not renew it for leaseTTL, a paused VM or a network
// partition), the error the stream stops with; nil while it holds.
func (l *lock) lost() error {
	if l == nil {
		return nil
	}
	if err := l.lease.Err(); err != nil {
		return fmt.Errorf("stream stopped: it no longer holds the checkpoint's lock, so it writes nothing more (start it again once the other stream is gone): %w", err)
	}
	return nil
}

// done is closed when the lease is lost.
func (l *lock) done() <-chan struct{} {
	if l == nil {
		return nil
	}
	return l.lease.Lost()
}

// release gives the lock up. A lost lock is the stream's error already
// (lost), not a failure to release.
func (l *lock) release() error {
	if l == nil {
		return nil
	}
	err := l.lease.Release(context.Background())
	if errors.Is(err, store.ErrLeaseLost) {
		return nil
	}
	return err
}
