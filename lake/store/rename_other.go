//go:build !linux

package store

import (
	"errors"
	"syscall"
)

var errNoRenameat2 = errors.New("store: renameat2 RENAME_NOREPLACE unsupported")

var errNotDir = syscall.ENOTDIR

// renameNoReplace is unavailable off Linux: PutIfAbsent uses link(2).
func renameNoReplace(oldpath, newpath string) error { return errNoRenameat2 }
