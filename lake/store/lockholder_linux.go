package store

import (
	"errors"
	"io/fs"
	"os"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

var _ LockInspector = (*Dir)(nil)

// LockHolder implements LockInspector: the process holding a flock(2) on
// key (Lock's), from Linux's /proc/locks.
func (d *Dir) LockHolder(key string) LocalHolder {
	if !validKey(key) {
		return LocalHolder{}
	}
	return flockHolder(d.path(key), "/proc/locks")
}

// flockHolder finds the process holding a flock(2) on path in procLocks.
func flockHolder(path, procLocks string) LocalHolder {
	fi, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return LocalHolder{Known: true} // never locked
	}
	if err != nil {
		return LocalHolder{}
	}
	sys, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return LocalHolder{}
	}
	data, err := os.ReadFile(procLocks)
	if err != nil {
		return LocalHolder{}
	}
	dev := uint64(sys.Dev)
	for line := range strings.Lines(string(data)) {
		l, ok := parseProcLock(line)
		if ok && l.flock && l.inode == sys.Ino && l.major == unix.Major(dev) && l.minor == unix.Minor(dev) {
			return LocalHolder{Known: true, Held: true, PID: l.pid}
		}
	}
	return LocalHolder{Known: true}
}
