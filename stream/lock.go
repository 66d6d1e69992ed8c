package stream

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"tidemark/lake/store"
)

// ErrLocked is returned when another `tidemark stream` holds the checkpoint.
var ErrLocked = errors.New("stream: checkpoint is locked by another running stream")

// lock makes one writer per checkpoint. On a local checkpoint it is flock(2)
// on a file, released by the kernel when the process dies (kill -9
// included). On S3 it is a lease object renewed by a heartbeat; a lease not
// renewed for leaseTTL is taken over.
type lock struct {
	file *os.File // local

	st     store.Store // S3
	stop   chan struct{}
	wg     sync.WaitGroup
	owner  string
	closed bool
}

const (
	leaseKey   = "lock.json"
	leaseTTL   = 30 * time.Second
	leaseRenew = 10 * time.Second
)

type lease struct {
	Owner   string `json:"owner"`
	Host    string `json:"host,omitempty"`
	PID     int    `json:"pid,omitempty"`
	Expires int64  `json:"expires_unix_ms"`
}

// deadOnThisHost reports whether the lease was taken by a process of this
// host that no longer exists: a stream killed with kill -9 and restarted
// here need not wait for its own lease to expire.
func (l lease) deadOnThisHost() bool {
	host, err := os.Hostname()
	if err != nil || l.Host == "" || l.Host != host || l.PID <= 0 || l.PID == os.Getpid() {
		return false
	}
	return errors.Is(unix.Kill(l.PID, 0), unix.ESRCH)
}

// acquireLock takes the checkpoint's lock or fails with ErrLocked.
func acquireLock(ctx context.Context, st store.Store, owner string) (*lock, error) {
	if d, ok := st.(*store.Dir); ok {
		path := filepath.Join(d.String(), "lock")
		f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o666) // the umask decides, as for the lake (store.Dir)
		if err != nil {
			return nil, fmt.Errorf("open checkpoint lock: %w", err)
		}
		if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
			f.Close()
			if errors.Is(err, unix.EWOULDBLOCK) {
				return nil, fmt.Errorf("%w (%s)", ErrLocked, path)
			}
			return nil, fmt.Errorf("lock checkpoint %s: %w", path, err)
		}
		return &lock{file: f}, nil
	}
	l := &lock{st: st, owner: owner, stop: make(chan struct{})}
	if err := l.takeLease(ctx); err != nil {
		return nil, err
	}
	l.wg.Add(1)
	go l.heartbeat()
	return l, nil
}

func (l *lock) leaseBytes() []byte {
	host, _ := os.Hostname()
	b, _ := json.Marshal(lease{Owner: l.owner, Host: host, PID: os.Getpid(), Expires: time.Now().Add(leaseTTL).UnixMilli()})
	return b
}

func (l *lock) takeLease(ctx context.Context) error {
	for attempt := 0; attempt < 2; attempt++ {
		err := l.st.PutIfAbsent(ctx, leaseKey, l.leaseBytes())
		if err == nil {
			return nil
		}
		if !errors.Is(err, store.ErrExists) {
			return fmt.Errorf("lock checkpoint: %w", err)
		}
		data, err := store.ReadAll(ctx, l.st, leaseKey)
		if err != nil {
			continue // released meanwhile
		}
		var cur lease
		if json.Unmarshal(data, &cur) == nil && time.Now().UnixMilli() < cur.Expires && !cur.deadOnThisHost() {
			return fmt.Errorf("%w (held by %s until %s)", ErrLocked, cur.Owner, time.UnixMilli(cur.Expires).UTC().Format(time.RFC3339))
		}
		// Expired, or its holder died on this host: remove it and race for
		// it once more.
		if err := l.st.Delete(ctx, leaseKey); err != nil {
			return fmt.Errorf("lock checkpoint: %w", err)
		}
	}
	return fmt.Errorf("%w (lost the race for an expired lease)", ErrLocked)
}

func (l *lock) heartbeat() {
	defer l.wg.Done()
	t := time.NewTicker(leaseRenew)
	defer t.Stop()
	for {
		select {
		case <-l.stop:
			return
		case <-t.C:
			b := l.leaseBytes()
			ctx, cancel := context.WithTimeout(context.Background(), leaseRenew)
			_ = l.st.Put(ctx, leaseKey, bytes.NewReader(b), int64(len(b))) // a failed renewal is retried next tick
			cancel()
		}
	}
}

// release gives the lock up.
func (l *lock) release() error {
	if l == nil || l.closed {
		return nil
	}
	l.closed = true
	if l.file != nil {
		return l.file.Close() // closing the descriptor drops the flock
	}
	close(l.stop)
	l.wg.Wait()
	return l.st.Delete(context.Background(), leaseKey)
}
