package store

import (
	"errors"
	"io/fs"
	"syscall"

	"golang.org/x/sys/unix"
)

// errNoRenameat2 means the filesystem or kernel cannot rename without
// replacing; the caller falls back to link(2).
var errNoRenameat2 = errors.New("store: renameat2 RENAME_NOREPLACE unsupported")

// errNotDir is what the OS says when a key's parent is a file.
var errNotDir = syscall.ENOTDIR

// renameNoReplace renames oldpath to newpath, failing with fs.ErrExist if
// newpath exists.
func renameNoReplace(oldpath, newpath string) error {
	err := unix.Renameat2(unix.AT_FDCWD, oldpath, unix.AT_FDCWD, newpath, unix.RENAME_NOREPLACE)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, unix.EINVAL), errors.Is(err, unix.ENOSYS), errors.Is(err, unix.EOPNOTSUPP):
		return errNoRenameat2
	case errors.Is(err, unix.EEXIST):
		return fs.ErrExist
	}
	return &fs.PathError{Op: "renameat2", Path: newpath, Err: err}
}
