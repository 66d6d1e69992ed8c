package store

import "testing"

func TestParseProcLock(t *testing.T) {
	for _, c := range []struct {
		line string
		want procLock
		ok   bool
	}{
		{"1: FLOCK  ADVISORY  WRITE 24410 fe:00:9988077 0 EOF\n", procLock{flock: true, pid: 24410, major: 0xfe, minor: 0, inode: 9988077}, true},
		{"2: POSIX  ADVISORY  WRITE 7 08:11:12 0 EOF", procLock{pid: 7, major: 8, minor: 0x11, inode: 12}, true},
		{"3: -> FLOCK  ADVISORY  WRITE 99 fe:00:9988077 0 EOF", procLock{}, false}, // a waiter
		{"4: FLOCK ADVISORY WRITE x fe:00:1 0 EOF", procLock{}, false},
		{"5: FLOCK ADVISORY WRITE 1 fe:00 0 EOF", procLock{}, false},
		{"", procLock{}, false},
	} {
		got, ok := parseProcLock(c.line)
		if ok != c.ok || got != c.want {
			t.Errorf("%q: got %+v %v, want %+v %v", c.line, got, ok, c.want, c.ok)
		}
	}
}

func FuzzParseProcLock(f *testing.F) {
	f.Add("1: FLOCK  ADVISORY  WRITE 24410 fe:00:9988077 0 EOF")
	f.Add("3: -> FLOCK  ADVISORY  WRITE 99 fe:00:9988077 0 EOF")
	f.Fuzz(func(t *testing.T, line string) {
		l, ok := parseProcLock(line)
		if !ok && l != (procLock{}) {
			t.Errorf("%q: not ok but %+v", line, l)
		}
	})
}
