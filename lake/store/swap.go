package store

import "context"

// Swapper is an optional power of a Store: writes and deletes that apply
// only while the object is still the version the caller read
// (compare-and-swap), so that a lease holder never overwrites or deletes a
// lease someone else took over meanwhile. S3 implements it with If-Match
// on the object's ETag. The directory store does not need it: its leases
// are changed only under the flock (Locker) that excludes every other
// holder of this host.
type Swapper interface {
	// ReadVersion returns the object's bytes and a tag naming this version
	// of it.
	ReadVersion(ctx context.Context, key string) (data []byte, tag string, err error)
	// PutIfMatch replaces the object only if it is still version tag and
	// returns the new version's tag; otherwise it fails with an error
	// matching ErrChanged (ErrNotExist when the object is gone).
	PutIfMatch(ctx context.Context, key string, data []byte, tag string) (string, error)
	// DeleteIfMatch deletes the object only if it is still version tag;
	// otherwise it fails with an error matching ErrChanged (a missing
	// object is not an error, as for Delete).
	DeleteIfMatch(ctx context.Context, key, tag string) error
}
