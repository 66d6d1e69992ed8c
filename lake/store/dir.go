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

// Dir is a Store on a local directory. Temporary files live in a hidden
// ".tidemark-tmp" directory at the root, never next to table data, and are
// renamed into place, so readers never see a partial object.
type Dir struct {
	root string
}

var _ Store = (*Dir)(nil)

const tmpDir = ".tidemark-tmp"

// OpenDir opens (creating if needed) a directory store rooted at root.
func OpenDir(root string) (*Dir, error) {
	abs, err := filepath.Abs(root)
	if err != nil {
		return nil, fmt.Errorf("open dir store %s: %w", root, err)
	}
	if err := os.MkdirAll(filepath.Join(abs, tmpDir), 0o755); err != nil {
		return nil, fmt.Errorf("open dir store %s: %w", root, err)
	}
	return &Dir{root: abs}, nil
}

func (d *Dir) String() string { return d.root }

func (d *Dir) path(key string) (string, error) {
	if key == "" || strings.HasPrefix(key, "/") || strings.Contains(key, "\\") {
		return "", fmt.Errorf("store: invalid key %q", key)
	}
	clean := filepath.ToSlash(filepath.Clean(key))
	if clean != key || clean == ".." || strings.HasPrefix(clean, "../") || strings.HasPrefix(clean, tmpDir) {
		return "", fmt.Errorf("store: invalid key %q", key)
	}
	return filepath.Join(d.root, filepath.FromSlash(key)), nil
}

// writeTemp copies r into a new temp file and returns its path.
func (d *Dir) writeTemp(r io.Reader) (string, error) {
	f, err := os.CreateTemp(filepath.Join(d.root, tmpDir), "put-*.tmp")
	if err != nil {
		return "", err
	}
	_, err = io.Copy(f, r)
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

// Put implements Store.
func (d *Dir) Put(ctx context.Context, key string, r io.Reader, size int64) error {
	p, err := d.path(key)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return fmt.Errorf("put %s: %w", key, err)
	}
	tmp, err := d.writeTemp(r)
	if err != nil {
		return fmt.Errorf("put %s: %w", key, err)
	}
	if err := os.Rename(tmp, p); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("put %s: %w", key, err)
	}
	return nil
}

// PutIfAbsent implements Store with link(2), which fails if the target exists.
func (d *Dir) PutIfAbsent(ctx context.Context, key string, data []byte) error {
	p, err := d.path(key)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return fmt.Errorf("put-if-absent %s: %w", key, err)
	}
	tmp, err := d.writeTemp(strings.NewReader(string(data)))
	if err != nil {
		return fmt.Errorf("put-if-absent %s: %w", key, err)
	}
	defer os.Remove(tmp)
	if err := os.Link(tmp, p); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("put-if-absent %s: %w", key, ErrExists)
		}
		return fmt.Errorf("put-if-absent %s: %w", key, err)
	}
	return nil
}

type fileReader struct {
	*os.File
	size int64
}

func (f fileReader) Size() int64 { return f.size }

// Open implements Store.
func (d *Dir) Open(ctx context.Context, key string) (Reader, error) {
	p, err := d.path(key)
	if err != nil {
		return nil, err
	}
	f, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	if st.IsDir() {
		f.Close()
		return nil, &fs.PathError{Op: "open", Path: p, Err: fs.ErrNotExist}
	}
	return fileReader{File: f, size: st.Size()}, nil
}

// List implements Store.
func (d *Dir) List(ctx context.Context, prefix string) ([]Info, error) {
	// Walk only the deepest directory the prefix names.
	base := d.root
	if i := strings.LastIndex(prefix, "/"); i >= 0 {
		base = filepath.Join(d.root, filepath.FromSlash(prefix[:i]))
	}
	var out []Info
	err := filepath.WalkDir(base, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		rel, _ := filepath.Rel(d.root, p)
		rel = filepath.ToSlash(rel)
		if e.IsDir() {
			if rel == tmpDir {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasPrefix(rel, prefix) {
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
		return nil, fmt.Errorf("list %s: %w", prefix, err)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out, nil
}

// Delete implements Store.
func (d *Dir) Delete(ctx context.Context, key string) error {
	p, err := d.path(key)
	if err != nil {
		return err
	}
	if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("delete %s: %w", key, err)
	}
	return nil
}
