package stream

// Opening the local Pebble database: its directory, ownership and damage.

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/bloom"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// quietLogger keeps Pebble's informational lines (compactions, WAL
// recycling) off the stream's stderr; errors still show.
type quietLogger struct{}

func (quietLogger) Infof(string, ...any) {}
func (quietLogger) Errorf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "pebble: "+format+"\n", args...)
}
func (quietLogger) Fatalf(format string, args ...any) {
	panic(fmt.Sprintf("pebble: "+format, args...))
}

// defaultStateDir is where a stream's Pebble state lives without --state-dir.
func defaultStateDir(streamID string) (string, error) {
	base, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("stream: no --state-dir and no user cache directory: %w", err)
	}
	return filepath.Join(base, "tidemark", "state", streamID), nil
}

// openPebble opens (creating) the database in dir. A directory holding
// something else is refused; a database of ours that Pebble cannot open
// (damaged files) is removed and created anew: it is only a working copy.
func openPebble(dir string) (*pebble.DB, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("stream: create --state-dir %s: %w", dir, err)
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("stream: read --state-dir %s: %w", dir, err)
	}
	_, statErr := os.Stat(filepath.Join(dir, ownerFile))
	ours := statErr == nil
	if len(ents) > 0 && !ours {
		return nil, fmt.Errorf("stream: --state-dir %s is not empty and was not made by tidemark; give an empty or new directory", dir)
	}
	if !ours {
		if err := os.WriteFile(filepath.Join(dir, ownerFile), []byte("tidemark stream state (Pebble): a local copy of the checkpoint's state, safe to delete while the stream is stopped\n"), 0o644); err != nil {
			return nil, fmt.Errorf("stream: --state-dir %s: %w", dir, err)
		}
	}
	opts := func() *pebble.Options {
		o := &pebble.Options{
			CacheSize:    pebbleCacheBytes,
			MemTableSize: pebbleMemTableBytes,
			Logger:       quietLogger{},
			// The plain filesystem: Pebble's default wraps it with disk-health
			// checks whose goroutine a failed Open never stops.
			FS: vfs.Default,
		}
		// Bloom filters: most lookups of a batch are for pairs that do not
		// exist yet (a user's first event in a window), answered without
		// reading a data block.
		for i := range o.Levels {
			o.Levels[i].FilterPolicy = bloom.FilterPolicy(10)
		}
		return o
	}
	db, err := pebble.Open(filepath.Join(dir, "db"), opts())
	if err == nil {
		return db, nil
	}
	if errors.Is(err, fs.ErrPermission) || isLockError(err) {
		return nil, fmt.Errorf("stream: open local state %s: %w", dir, err)
	}
	// Damaged: drop it, the checkpoint rebuilds it.
	if rmErr := os.RemoveAll(filepath.Join(dir, "db")); rmErr != nil {
		return nil, fmt.Errorf("stream: local state %s is damaged (%v) and cannot be removed: %w", dir, err, rmErr)
	}
	db, err2 := pebble.Open(filepath.Join(dir, "db"), opts())
	if err2 != nil {
		return nil, fmt.Errorf("stream: open local state %s: %w", dir, err2)
	}
	return db, nil
}

// isLockError reports whether Pebble failed because another process holds
// the database: never a reason to delete it.
func isLockError(err error) bool {
	return bytes.Contains([]byte(err.Error()), []byte("lock"))
}

// openPebbleStore opens the Pebble state of stream streamID (opts.Dir, or
// the default directory).
func openPebbleStore(opts StateOptions, streamID string) (*pebbleStore, error) {
	dir := opts.Dir
	if dir == "" {
		var err error
		if dir, err = defaultStateDir(streamID); err != nil {
			return nil, err
		}
	}
	db, err := openPebble(dir)
	if err != nil {
		return nil, err
	}
	return &pebbleStore{db: db, dir: dir}, nil
}
