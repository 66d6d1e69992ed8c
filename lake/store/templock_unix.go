//go:build unix

package store

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"
)

// holdTemp marks f, a temp file just created, as a live writer's: a shared
// flock(2) that closing f (or the process dying) drops.
func holdTemp(f *os.File) error { return unix.Flock(int(f.Fd()), unix.LOCK_SH|unix.LOCK_NB) }

// tryLockTemp takes an exclusive flock on f, and reports false when a
// writer holds the file.
func tryLockTemp(f *os.File) (bool, error) {
	err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, unix.EWOULDBLOCK):
		return false, nil
	}
	return false, err
}
