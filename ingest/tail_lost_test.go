package ingest

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/fsnotify/fsnotify"
)

// fsnotify events can be lost (queue overflow, network filesystems): a
// change whose events were dropped is still found by the periodic rescan.
func TestTailLostEventRecoveredByRescan(t *testing.T) {
	dir := t.TempDir()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	d := openTest(t, dir, SourceConfig{Clock: clock, Rescan: 10 * time.Second}, Position{}).(*DirSource)
	if d.watcher == nil {
		t.Fatal("the source does not watch with fsnotify; this test needs it")
	}
	writeFile(t, filepath.Join(dir, "a.log"), "hello\n")
	// Lose every event fsnotify has for us. inotify delivers one watch's
	// events in order, so once the removal of a fence file made after the
	// write arrives, every event of the write has been taken. The fence is
	// gone by then, so the rescan does not find it.
	fence := filepath.Join(dir, ".fence")
	writeFile(t, fence, "")
	if err := os.Remove(fence); err != nil {
		t.Fatal(err)
	}
	for done := false; !done; {
		select {
		case ev := <-d.watcher.Events:
			done = filepath.Base(ev.Name) == ".fence" && ev.Has(fsnotify.Remove)
		case <-time.After(10 * time.Second): // a failure guard, not a wait
			t.Fatal("fsnotify never reported the fence's removal")
		}
	}
	if got := summary(readAll(t, d, 10)); got != "" {
		t.Fatalf("read %q before any rescan; the event was supposed to be lost", got)
	}
	now = now.Add(10 * time.Second) // the rescan is due
	if got, want := summary(readAll(t, d, 10)), "a.log@0:hello[malformed]\n"; got != want {
		t.Errorf("after the rescan: got %q, want %q", got, want)
	}
}
