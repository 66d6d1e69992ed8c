package ingest

import (
	"path/filepath"
	"testing"
	"time"
)

// fsnotify events can be lost (queue overflow, network filesystems): a
// change whose events were dropped is still found by the periodic rescan.
func TestTailLostEventRecoveredByRescan(t *testing.T) {
	dir := t.TempDir()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	d := openTest(t, dir, SourceConfig{Clock: clock, Rescan: 10 * time.Second}, Position{}).(*Dir)
	if d.watcher == nil {
		t.Fatal("the source does not watch with fsnotify; this test needs it")
	}
	writeFile(t, filepath.Join(dir, "a.log"), "hello\n")
	// Lose every event fsnotify has for us (bounded: the write above makes
	// a few; stop once the queue stays empty).
	for quiet := 0; quiet < 3; {
		select {
		case <-d.watcher.Events:
			quiet = 0
		case <-time.After(50 * time.Millisecond):
			quiet++
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
