//go:build unix

package store

import (
	"os"

	"golang.org/x/sys/unix"
)

// holdTemp marks f, a temp file just created, as a live writer's: a shared
// flock(2) that closing f (or the process dying) drops.
func holdTemp(f *os.File) error { return unix.Flock(int(f.Fd()), unix.LOCK_SH|unix.LOCK_NB) }

// tryLockTemp takes an exclusive flock on f, and reports false when a
// writer holds the file, or when the filesystem cannot lock it (then no
// writer could have held it either, and the file is kept: sweeping must
// never guess).
func tryLockTemp(f *os.File) bool {
	return unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB) == nil
}
