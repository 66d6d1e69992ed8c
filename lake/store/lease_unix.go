//go:build unix

package store

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

var _ Locker = (*Dir)(nil)

// Lock implements Locker with flock(2) on the file key, created 0666 less
// the umask like every file a user's tools make. The note replaces the
// file's content once the lock is held.
func (d *Dir) Lock(key string, note []byte) (func() error, error) {
	if !validKey(key) {
		return nil, invalidKey("lock", key)
	}
	p := d.path(key)
	if err := d.mkdirAll(filepath.Dir(p)); err != nil {
		return nil, &fs.PathError{Op: "lock", Path: key, Err: err}
	}
	f, err := os.OpenFile(p, os.O_CREATE|os.O_RDWR, 0o666)
	if err != nil {
		return nil, &fs.PathError{Op: "lock", Path: key, Err: err}
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, &fs.PathError{Op: "lock", Path: p, Err: ErrLocked}
		}
		return nil, &fs.PathError{Op: "lock", Path: p, Err: fmt.Errorf("flock: %w", err)}
	}
	// The note only helps an error message: a failure to write it is no
	// reason to give the lock up.
	if f.Truncate(0) == nil {
		_, _ = f.WriteAt(note, 0)
	}
	return f.Close, nil // closing the descriptor drops the flock
}

// processGone reports whether no process pid exists on this host.
func processGone(pid int) bool { return errors.Is(unix.Kill(pid, 0), unix.ESRCH) }
