package store

import (
	"io/fs"
	"strings"
)

// Reserved key prefixes: the directory store's temp area and the S3 store's
// probe objects. Keys under them are rejected on every backend so that the
// same keys work everywhere.
const (
	tmpDir      = ".tidemark-tmp"
	probePrefix = "_tidemark/probe-"
)

// validKey reports whether key is a usable object key: slash-separated,
// relative, with no empty, "." or ".." elements (fs.ValidPath), no
// backslash or NUL, and not under a reserved prefix.
func validKey(key string) bool {
	if key == "." || !fs.ValidPath(key) || strings.ContainsAny(key, "\\\x00") {
		return false
	}
	return !reserved(key)
}

func reserved(key string) bool {
	return key == tmpDir || strings.HasPrefix(key, tmpDir+"/") || strings.HasPrefix(key, probePrefix)
}

// validPrefix reports whether prefix is usable for List: empty, or a string
// whose complete directory elements (everything up to the last slash) form
// a valid key. The last element may be partial ("event_date=2026-").
func validPrefix(prefix string) bool {
	if strings.ContainsAny(prefix, "\\\x00") || strings.HasPrefix(prefix, "/") {
		return false
	}
	i := strings.LastIndex(prefix, "/")
	if i < 0 {
		return prefix != "." && prefix != ".."
	}
	dir := prefix[:i]
	return dir != "." && fs.ValidPath(dir)
}

// invalidKey is the error for a rejected key: a *fs.PathError matching
// fs.ErrInvalid, as io/fs implementations report bad names.
func invalidKey(op, key string) error {
	return &fs.PathError{Op: op, Path: key, Err: fs.ErrInvalid}
}

// notExist is the error for a missing object, the same on every backend.
func notExist(op, key string) error {
	return &fs.PathError{Op: op, Path: key, Err: fs.ErrNotExist}
}
