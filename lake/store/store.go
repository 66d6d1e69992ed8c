// Package store is tidemark's storage interface: the few operations the lake
// needs from a local directory or an S3 bucket, with the same semantics on
// both. Missing objects match errors.Is(err, fs.ErrNotExist) on every backend;
// an object that already exists matches ErrExists for PutIfAbsent.
package store

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"time"
)

// ErrExists is returned by PutIfAbsent when the key is already taken. It
// matches fs.ErrExist as well.
var ErrExists = &existsError{}

type existsError struct{}

func (*existsError) Error() string        { return "store: object exists" }
func (*existsError) Is(target error) bool { return target == fs.ErrExist }

// ErrNotExist is the sentinel for missing objects (it is fs.ErrNotExist).
var ErrNotExist = fs.ErrNotExist

// ErrChanged is returned by a Reader whose object was overwritten or
// deleted after Open: a backend that cannot pin the opened version (S3)
// fails the read rather than mix bytes of two versions.
var ErrChanged = errors.New("store: object changed since open")

// Info describes one stored object.
type Info struct {
	Key     string // slash-separated, relative to the store root
	Size    int64
	ModTime time.Time
}

// Reader reads one object at random offsets.
type Reader interface {
	io.ReaderAt
	io.Closer
	Size() int64
}

// Store is a flat namespace of immutable-once-written objects with
// slash-separated keys, relative to the store's root.
type Store interface {
	// Put stores the object atomically: readers see the old object or the
	// whole new one, never a part. size may be -1 when unknown.
	Put(ctx context.Context, key string, r io.Reader, size int64) error
	// PutIfAbsent stores data only if key does not exist yet; otherwise it
	// returns an error matching ErrExists. Exactly one of several racing
	// callers succeeds. Used for Delta commits and locks.
	PutIfAbsent(ctx context.Context, key string, data []byte) error
	// Open opens the object for reading.
	Open(ctx context.Context, key string) (Reader, error)
	// List returns every object whose key starts with prefix, sorted by key.
	List(ctx context.Context, prefix string) ([]Info, error)
	// Delete removes the object; a missing object is not an error.
	Delete(ctx context.Context, key string) error
	// String names the store's root for messages (a path or s3:// URL).
	String() string
}

// ReadAll reads a whole object into memory.
func ReadAll(ctx context.Context, s Store, key string) ([]byte, error) {
	r, err := s.Open(ctx, key)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	buf := make([]byte, r.Size())
	n, err := r.ReadAt(buf, 0)
	if err != nil && !(errors.Is(err, io.EOF) && int64(n) == r.Size()) {
		return nil, err
	}
	return buf[:n], nil
}
