package store

import (
	"os"
	"path/filepath"
	"testing"
)

// flockHolder sees a flock(2) taken by this process (Dir.Lock), and none
// once it is dropped; without /proc/locks it cannot tell.
func TestFlockHolder(t *testing.T) {
	if _, err := os.Stat("/proc/locks"); err != nil {
		t.Skip("no /proc/locks")
	}
	d, err := OpenDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if h := d.LockHolder("lock"); !h.Known || h.Held {
		t.Errorf("no lock file: %+v", h)
	}
	unlock, err := d.Lock("lock", nil)
	if err != nil {
		t.Fatal(err)
	}
	if h := d.LockHolder("lock"); !h.Held || h.PID != os.Getpid() {
		t.Errorf("locked: %+v, want held by %d", h, os.Getpid())
	}
	if err := unlock(); err != nil {
		t.Fatal(err)
	}
	if h := d.LockHolder("lock"); !h.Known || h.Held {
		t.Errorf("released: %+v", h)
	}
	if h := flockHolder(d.path("lock"), filepath.Join(t.TempDir(), "none")); h.Known {
		t.Errorf("without /proc/locks: %+v, want unknown", h)
	}
}
