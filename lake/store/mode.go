package store

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
)

// Modes of what a directory store creates, before the process umask: the
// kernel applies the umask at creation, so a lake on a shared disk is
// readable by whoever the umask lets read it (0644/0755 under umask 022,
// 0600/0700 under 077), exactly as files cp, Spark or DuckDB write there.
// Nothing chmods afterwards: that would need the umask, and reading it with
// umask(2) (set, then restore) races with every other thread creating files.
const (
	fileMode fs.FileMode = 0o666
	dirMode  fs.FileMode = 0o777
)

// createTemp is os.CreateTemp with fileMode instead of 0600: O_EXCL on a
// random name, so it never opens a file someone else made. The file is
// held (holdTemp) until it is closed, so SweepTemps leaves it alone.
func createTemp(dir, prefix, suffix string) (*os.File, error) {
	var b [12]byte
	for range 100 {
		rand.Read(b[:])
		name := filepath.Join(dir, prefix+hex.EncodeToString(b[:])+suffix)
		f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_EXCL, fileMode)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		if err == nil {
			// A filesystem without locks (some network mounts) gets no
			// hold: writing must not fail for it, and a file whose lock
			// cannot be taken is never swept (tryLockTemp).
			_ = holdTemp(f)
		}
		return f, err
	}
	return nil, &fs.PathError{Op: "createtemp", Path: filepath.Join(dir, prefix+"*"+suffix), Err: fs.ErrExist}
}
