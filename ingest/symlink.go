package ingest

import (
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
)

// Symbolic links in a local source.
//
// By default a link is followed only when it resolves inside the source's
// root: such a link names data the source could read anyway (Kubernetes'
// /var/log/containers/*.log -> ../pods/... with the source at /var/log), while
// a link out of the root would let anyone who can create a file in a log
// directory copy any file tidemark's user can read (/etc/passwd, a key) into
// the lake. (With a glob the root is the part before the first wildcard, so
// for /var/log/containers/*.log the pods are outside: --follow-symlinks, as
// Filebeat's symlinks: true.) Links to directories inside the root are not descended: their
// target is walked under its own name. A link out of the root is skipped and
// logged once. The check resolves the link through an os.Root, so a link
// swapped between the check and the open cannot escape either: openReader
// opens only the device+inode the check saw.
//
// SourceConfig.FollowSymlinks (--follow-symlinks) follows every link, to
// files and to directories (which are then walked and watched too); a
// directory reached twice (a loop, or two links to one place) is walked once.
// A --source naming one file follows a link there wherever it leads: the user
// named that file.

// walk is the state of one listing.
type walk struct {
	out  map[string]fs.FileInfo // matching regular files by relative path
	seen map[string]bool        // real paths of the directories walked
	dirs map[[2]uint64]bool     // device+inode of the directories walked
	root *os.Root               // links resolve beneath it; nil when followed anywhere
}

// enter records a directory and reports whether it is new to this walk.
func (w *walk) enter(e fs.DirEntry) bool {
	fi, err := e.Info()
	if err != nil {
		return true
	}
	id := [2]uint64{}
	id[0], id[1] = fileID(fi)
	if id == [2]uint64{} {
		return true // no identity on this platform: followLink does not descend links to directories
	}
	if w.dirs[id] {
		return false
	}
	w.dirs[id] = true
	return true
}

// followLink lists what the link at p (named rel in the source) leads to.
func (d *DirSource) followLink(w *walk, p, rel string) error {
	if w.root == nil || d.single && rel == d.pattern {
		fi, err := os.Stat(p)
		if err != nil {
			return nil // dangling
		}
		if fi.IsDir() {
			if _, ino := fileID(fi); !d.cfg.FollowSymlinks || ino == 0 {
				return nil // without an identity, loops could not be told apart
			}
			real, err := filepath.EvalSymlinks(p)
			if err != nil {
				return nil
			}
			return d.walkDir(w, real, rel)
		}
		if fi.Mode().IsRegular() && d.match(rel) {
			w.out[rel] = fi
		}
		return nil
	}
	if !d.match(rel) {
		return nil // the glob decides before anything is resolved
	}
	fi, err := w.root.Stat(filepath.FromSlash(rel))
	if err != nil {
		if _, serr := os.Stat(p); serr == nil && !d.warned[rel] {
			d.warned[rel] = true
			d.cfg.Logger.Warn("symbolic link leads outside the source; not followed (--follow-symlinks follows it)",
				"source", d.name, "file", rel)
		}
		return nil
	}
	if fi.Mode().IsRegular() {
		w.out[rel] = fi
	}
	return nil
}

// dedupe keeps one path per file (device+inode): a file reached through a
// link and under its own name, or two hard links, is read once, under its
// lexically first name.
func dedupe(files map[string]fs.FileInfo) map[string]fs.FileInfo {
	names := make([]string, 0, len(files))
	for rel := range files {
		names = append(names, rel)
	}
	slices.Sort(names)
	byID := make(map[[2]uint64]bool, len(files))
	for _, rel := range names {
		dev, ino := fileID(files[rel])
		if ino == 0 {
			continue
		}
		id := [2]uint64{dev, ino}
		if byID[id] {
			delete(files, rel)
		}
		byID[id] = true
	}
	return files
}

// relOf names an fsnotify event's path in the source: relative to the root,
// or under the link through which its directory was reached.
func (d *DirSource) relOf(name string) (string, error) {
	if rel, ok := d.linked[filepath.Dir(name)]; ok {
		return path.Join(rel, filepath.Base(name)), nil
	}
	rel, err := filepath.Rel(d.root, name)
	return filepath.ToSlash(rel), err
}
