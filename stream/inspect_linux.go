package stream

import (
	"errors"
	"io/fs"
	"os"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// flockHolder finds the process holding a flock(2) on path in procLocks
// (Linux's /proc/locks).
func flockHolder(path, procLocks string) Holder {
	fi, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return Holder{Known: true} // never locked
	}
	sys, ok := fi.Sys().(*syscall.Stat_t)
	if err != nil || !ok {
		return Holder{}
	}
	data, err := os.ReadFile(procLocks)
	if err != nil {
		return Holder{}
	}
	dev := uint64(sys.Dev)
	for line := range strings.Lines(string(data)) {
		l, ok := parseProcLock(line)
		if ok && l.flock && l.inode == sys.Ino && l.major == unix.Major(dev) && l.minor == unix.Minor(dev) {
			return Holder{Known: true, Held: true, PID: l.pid}
		}
	}
	return Holder{Known: true}
}
