package store

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"time"
)

// TempSweeper is a Store with a temp area of its own (the directory store's
// .tidemark-tmp): a writer that crashed between creating a temp file and
// publishing it leaves the file there, and SweepTemps removes such files.
type TempSweeper interface {
	// SweepTemps removes (or, with dryRun, only lists) the temp files last
	// modified before `before` that no live writer holds, and returns them
	// with keys under the temp area (".tidemark-tmp/<name>"). A temp file
	// is held from its creation until it is closed (published or
	// discarded): on unix by a shared flock(2) on it, which a process's
	// death releases, and a file on a filesystem that cannot lock is never
	// swept; on Windows the age is the only test.
	SweepTemps(ctx context.Context, before time.Time, dryRun bool) ([]Info, error)
}

var _ TempSweeper = (*Dir)(nil)

// SweepTemps implements TempSweeper.
func (d *Dir) SweepTemps(ctx context.Context, before time.Time, dryRun bool) ([]Info, error) {
	dir := filepath.Join(d.root, tmpDir)
	entries, err := os.ReadDir(dir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, nil
		}
		return nil, &fs.PathError{Op: "sweep", Path: tmpDir, Err: err}
	}
	var out []Info
	for _, e := range entries {
		if err := ctx.Err(); err != nil {
			return out, err
		}
		if !e.Type().IsRegular() {
			continue
		}
		info, err := e.Info()
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				continue // published or removed meanwhile
			}
			return out, &fs.PathError{Op: "sweep", Path: tmpDir, Err: err}
		}
		if !info.ModTime().Before(before) {
			continue
		}
		swept, err := sweepTemp(filepath.Join(dir, e.Name()), dryRun)
		if err != nil {
			return out, &fs.PathError{Op: "sweep", Path: path.Join(tmpDir, e.Name()), Err: err}
		}
		if swept {
			out = append(out, Info{Key: path.Join(tmpDir, e.Name()), Size: info.Size(), ModTime: info.ModTime()})
		}
	}
	return out, nil
}

// sweepTemp removes the temp file p (unless dryRun) if no writer holds
// it, and reports whether it was (or would be) removed.
func sweepTemp(p string, dryRun bool) (bool, error) {
	f, err := os.Open(p)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return false, nil
		}
		return false, err
	}
	defer f.Close()
	if !tryLockTemp(f) {
		return false, nil // a live writer's
	}
	if dryRun {
		return true, nil
	}
	// Removed while the lock is held: a writer cannot be holding it now,
	// and no writer opens an existing temp file (O_EXCL on a fresh name).
	if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return false, err
	}
	return true, nil
}
