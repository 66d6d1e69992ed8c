package store

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
)

// Stager is a Store that hands out temp files in its own temp area for the
// caller to write and then publish under a key, so a large object is
// written once: Put copies it from the caller's reader into a temp file of
// its own first. The directory store is one (publishing is a rename); S3
// is not (an upload is the copy).
type Stager interface {
	// Stage creates an empty temp file where Put writes its own: never in
	// a table directory, never named *.parquet.
	Stage() (*os.File, error)
	// Publish makes f, a file Stage returned that the caller wrote, the
	// object at key, exactly as Put does with its temp file: fsync, close,
	// rename into place (readers see no part of it before), fsync the
	// directory. When Publish returns, f is closed and its temp name is
	// gone, published or removed.
	Publish(ctx context.Context, key string, f *os.File) error
}

var _ Stager = (*Dir)(nil)

// errNotStaged is Publish's error for a file Stage did not return.
var errNotStaged = errors.New("file not staged by this store")

// Stage implements Stager.
func (d *Dir) Stage() (*os.File, error) {
	f, err := createTemp(filepath.Join(d.root, tmpDir), "put-", ".tmp")
	if err != nil {
		return nil, &fs.PathError{Op: "stage", Path: tmpDir, Err: err}
	}
	return f, nil
}

// Publish implements Stager.
func (d *Dir) Publish(ctx context.Context, key string, f *os.File) error {
	if err := d.publish(ctx, key, f); err != nil {
		return &fs.PathError{Op: "publish", Path: key, Err: err}
	}
	return nil
}

func (d *Dir) publish(ctx context.Context, key string, f *os.File) error {
	tmp := f.Name()
	err := f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	switch {
	case filepath.Dir(tmp) != filepath.Join(d.root, tmpDir):
		// Not ours: leave it where it is, and rename nothing across
		// filesystems.
		return errNotStaged
	case err == nil && !validKey(key):
		err = fs.ErrInvalid
	case err == nil:
		err = ctx.Err()
	}
	p := d.path(key)
	if err == nil {
		err = d.mkdirAll(filepath.Dir(p))
	}
	if err == nil {
		err = os.Rename(tmp, p)
	}
	if err != nil {
		os.Remove(tmp)
		return err
	}
	return syncDir(filepath.Dir(p))
}
