package store

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// Dir is a Store on a local directory. Objects are written to a temp file in
// the hidden ".tidemark-tmp" directory at the root (never next to table data,
// never named *.parquet), fsynced, and renamed into place, then the parent
// directory is fsynced: readers never see a partial object and a completed
// Put survives a power loss. Files and directories get the modes the
// process umask leaves of 0666 and 0777, as cp, Spark and DuckDB do (mode.go).
type Dir struct {
	root string
	// linkOnly skips renameat2 and publishes PutIfAbsent with link(2), as
	// on filesystems without RENAME_NOREPLACE (set by tests).
	linkOnly bool
}

var _ Store = (*Dir)(nil)

// OpenDir opens (creating if needed) a directory store rooted at root.
func OpenDir(root string) (*Dir, error) {
	abs, err := filepath.Abs(root)
	if err != nil {
		return nil, fmt.Errorf("open dir store %s: %w", root, err)
	}
	if err := os.MkdirAll(filepath.Join(abs, tmpDir), dirMode); err != nil {
		return nil, fmt.Errorf("open dir store %s: %w", root, err)
	}
	return &Dir{root: abs}, nil
}

// String returns the store's root directory.
func (d *Dir) String() string { return d.root }

func (d *Dir) path(key string) string {
	return filepath.Join(d.root, filepath.FromSlash(key))
}

// Put implements Store: temp file, fsync, rename over the old object, fsync
// the directory.
func (d *Dir) Put(ctx context.Context, key string, r io.Reader, size int64) error {
	if !validKey(key) {
		return invalidKey("put", key)
	}
	if err := d.put(ctx, key, r, size, false); err != nil {
		return &fs.PathError{Op: "put", Path: key, Err: err}
	}
	return nil
}

// PutIfAbsent implements Store with renameat2(RENAME_NOREPLACE), or link(2)
// where the filesystem lacks it; both fail atomically if the key exists.
func (d *Dir) PutIfAbsent(ctx context.Context, key string, data []byte) error {
	if !validKey(key) {
		return invalidKey("put-if-absent", key)
	}
	if err := d.put(ctx, key, strings.NewReader(string(data)), int64(len(data)), true); err != nil {
		return &fs.PathError{Op: "put-if-absent", Path: key, Err: err}
	}
	return nil
}

func (d *Dir) put(ctx context.Context, key string, r io.Reader, size int64, noReplace bool) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	p := d.path(key)
	tmp, err := d.writeTemp(r, size)
	if err != nil {
		return err
	}
	// The temp name is freed by a rename, so it is removed only when it may
	// still be ours: after a failure or after link(2).
	keepTemp := false
	defer func() {
		if !keepTemp {
			os.Remove(tmp)
		}
	}()
	if err := d.mkdirAll(filepath.Dir(p)); err != nil {
		return err
	}
	if noReplace {
		keepTemp, err = d.publishNoReplace(tmp, p)
	} else {
		err = os.Rename(tmp, p)
		keepTemp = err == nil
	}
	if err != nil {
		return err
	}
	return syncDir(filepath.Dir(p))
}

// publishNoReplace moves tmp to p unless p exists (then ErrExists). It
// reports whether tmp was renamed away.
func (d *Dir) publishNoReplace(tmp, p string) (renamed bool, err error) {
	if !d.linkOnly {
		err := renameNoReplace(tmp, p)
		switch {
		case err == nil:
			return true, nil
		case errors.Is(err, fs.ErrExist):
			return false, ErrExists
		case !errors.Is(err, errNoRenameat2):
			return false, err
		}
	}
	if err := os.Link(tmp, p); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return false, ErrExists
		}
		return false, err
	}
	return false, nil
}

// writeTemp copies r into a new fsynced temp file and returns its path.
func (d *Dir) writeTemp(r io.Reader, size int64) (string, error) {
	f, err := createTemp(filepath.Join(d.root, tmpDir), "put-", ".tmp")
	if err != nil {
		return "", err
	}
	n, err := io.Copy(f, r)
	if err == nil && size >= 0 && n != size {
		err = fmt.Errorf("wrote %d bytes, want %d", n, size)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(f.Name())
		return "", err
	}
	return f.Name(), nil
}

// mkdirAll creates dir and its missing parents, fsyncing the parent of each
// directory it creates so the new entries are durable too.
func (d *Dir) mkdirAll(dir string) error {
	if st, err := os.Stat(dir); err == nil && st.IsDir() {
		return nil
	}
	if dir != d.root {
		if err := d.mkdirAll(filepath.Dir(dir)); err != nil {
			return err
		}
	}
	if err := os.Mkdir(dir, dirMode); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return nil // a racing Put made it
		}
		return err
	}
	return syncDir(filepath.Dir(dir))
}

func syncDir(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

type fileReader struct {
	*os.File
	size int64
}

func (f fileReader) Size() int64 { return f.size }

// Open implements Store.
func (d *Dir) Open(ctx context.Context, key string) (Reader, error) {
	if !validKey(key) {
		return nil, invalidKey("open", key)
	}
	f, err := os.Open(d.path(key))
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, errNotDir) {
			return nil, notExist("open", key)
		}
		return nil, &fs.PathError{Op: "open", Path: key, Err: err}
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, &fs.PathError{Op: "open", Path: key, Err: err}
	}
	if st.IsDir() {
		f.Close()
		return nil, notExist("open", key)
	}
	return fileReader{File: f, size: st.Size()}, nil
}

// List implements Store.
func (d *Dir) List(ctx context.Context, prefix string) ([]Info, error) {
	if !validPrefix(prefix) {
		return nil, invalidKey("list", prefix)
	}
	// Walk only the deepest directory the prefix names.
	base := d.root
	if i := strings.LastIndex(prefix, "/"); i >= 0 {
		base = d.path(prefix[:i])
	}
	var out []Info
	err := filepath.WalkDir(base, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) || errors.Is(err, errNotDir) {
				return nil
			}
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		rel, err := filepath.Rel(d.root, p)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if e.IsDir() {
			if rel == tmpDir {
				return filepath.SkipDir
			}
			return nil
		}
		if !e.Type().IsRegular() || !strings.HasPrefix(rel, prefix) || !validKey(rel) {
			return nil
		}
		info, err := e.Info()
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil // deleted while listing
			}
			return err
		}
		out = append(out, Info{Key: rel, Size: info.Size(), ModTime: info.ModTime()})
		return nil
	})
	if err != nil {
		return nil, &fs.PathError{Op: "list", Path: prefix, Err: err}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out, nil
}

// Delete implements Store.
func (d *Dir) Delete(ctx context.Context, key string) error {
	if !validKey(key) {
		return invalidKey("delete", key)
	}
	p := d.path(key)
	if st, err := os.Lstat(p); err == nil && st.IsDir() {
		return nil // a directory is not an object: nothing to delete
	}
	if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, errNotDir) {
		return &fs.PathError{Op: "delete", Path: key, Err: err}
	}
	return nil
}
