package main

import (
	"path/filepath"
	"testing"
)

// TestCrashKill9HighCardinalityPebble is the high-cardinality crash test
// (3000 keys, windows open for 30 minutes, kills between snapshots,
// changelogs and cleanups) with the open state in a local Pebble database:
// every line once, windows equal an uninterrupted run.
func TestCrashKill9HighCardinalityPebble(t *testing.T) {
	if testing.Short() {
		t.Skip("crash test: not in -short")
	}
	cache := t.TempDir() // each stream's database under <cache>/tidemark/state/<stream id>
	crashKill9With(t, 12, 3000, t.TempDir(), t.TempDir(), []string{"XDG_CACHE_HOME=" + cache},
		[]string{"--window", "10m", "--lateness", "30m", "--state-store", "pebble"})
	dbs, _ := filepath.Glob(filepath.Join(cache, "tidemark", "state", "*", "db"))
	if len(dbs) != 2 { // the crashed stream's and the reference's
		t.Fatalf("Pebble databases found: %v; want the two streams'", dbs)
	}
}
