package store

import (
	"strconv"
	"strings"
)

// LockInspector is an optional power of a Locker: who holds the lock on a
// key, as far as this host can see, without taking it (the directory store
// on Linux reads /proc/locks). A Locker without it cannot tell.
type LockInspector interface {
	LockHolder(key string) LocalHolder
}

// LocalHolder is who holds a Locker's lock on a key.
type LocalHolder struct {
	Known bool // false: cannot tell (no /proc/locks, say)
	Held  bool
	PID   int // the holding process, when Held
}

// procLock is one line of /proc/locks:
//
//	1: FLOCK  ADVISORY  WRITE 24410 fe:00:9988077 0 EOF
//
// (a waiter's line has "->" after the number; it holds nothing).
type procLock struct {
	flock        bool
	pid          int
	major, minor uint32
	inode        uint64
}

func parseProcLock(line string) (procLock, bool) {
	f := strings.Fields(line)
	if len(f) < 6 || f[1] == "->" {
		return procLock{}, false
	}
	var l procLock
	l.flock = f[1] == "FLOCK"
	pid, err := strconv.Atoi(f[4])
	if err != nil {
		return procLock{}, false
	}
	l.pid = pid
	id := strings.Split(f[5], ":")
	if len(id) != 3 {
		return procLock{}, false
	}
	major, err1 := strconv.ParseUint(id[0], 16, 32)
	minor, err2 := strconv.ParseUint(id[1], 16, 32)
	ino, err3 := strconv.ParseUint(id[2], 10, 64)
	if err1 != nil || err2 != nil || err3 != nil {
		return procLock{}, false
	}
	l.major, l.minor, l.inode = uint32(major), uint32(minor), ino
	return l, true
}
