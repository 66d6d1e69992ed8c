package ingest

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/fsnotify/fsnotify"
)

// drainEvents consumes pending fsnotify events without blocking and
// reports whether any may mean new data.
func (d *DirSource) drainEvents() bool {
	if d.watcher == nil {
		return false
	}
	any := false
	for {
		select {
		case ev, ok := <-d.watcher.Events:
			if !ok {
				return any
			}
			any = d.handleEvent(ev) || any
		case err, ok := <-d.watcher.Errors:
			if !ok {
				return any
			}
			// Typically a queue overflow: events were lost, so look at everything.
			d.cfg.Logger.Warn("file watch error; rescanning", "source", d.name, "error", err)
			d.needRescan = true
			any = true
		default:
			return any
		}
	}
}

// handleEvent notes one fsnotify event and reports whether it may mean new
// data. A write to a known file just refreshes its size; anything that may
// change the tree schedules a rescan. Hidden names and writes to files the
// glob excludes are ignored.
func (d *DirSource) handleEvent(ev fsnotify.Event) bool {
	if ev.Op == fsnotify.Chmod {
		return false
	}
	rel, err := d.relOf(ev.Name)
	if err != nil {
		d.needRescan = true
		return true
	}
	if strings.HasPrefix(path.Base(rel), ".") {
		return false
	}
	if ev.Op == fsnotify.Write || ev.Op == fsnotify.Write|fsnotify.Chmod {
		if st, ok := d.files[rel]; ok {
			d.refresh(st)
			return true
		}
		if !d.match(rel) {
			return false
		}
	}
	d.needRescan = true
	return true
}

// refresh re-stats one file; a change of identity or a shrink schedules
// a rescan, which handles it.
func (d *DirSource) refresh(st *fileState) {
	fi, err := statFile(d.abs(st.pos.Path))
	if err != nil {
		d.needRescan = true
		return
	}
	if dev, ino := fileID(fi); dev != st.pos.Dev || ino != st.pos.Inode || fi.Size() < st.pos.Offset {
		d.needRescan = true
		return
	}
	st.size = fi.Size()
}

// Rescan lists the whole tree and reconciles it with the tracked files:
// new files start at 0, renamed files (same device+inode and first bytes)
// keep their position under the new path, truncated files and reused
// inodes restart at 0, deleted files are dropped. Read calls it when
// fsnotify reports a change and at least every SourceConfig.Rescan; tests
// and poll loops may call it directly.
func (d *DirSource) Rescan(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if !d.skip.due(".", d.cfg.Clock()) {
		// The root is gone or unreadable: tried again after its backoff.
		d.needRescan, d.lastRescan = false, d.cfg.Clock()
		return nil
	}
	listed, err := d.list()
	d.needRescan = false
	d.lastRescan = d.cfg.Clock()
	if re := (*rootError)(nil); errors.As(err, &re) {
		// Gone (deleted, a volume unmounted) or unreadable: keep every
		// file as it is and wait for the root to come back.
		d.skip.failed(".", true, re.err, d.cfg.Clock())
		return nil
	}
	if err != nil {
		return fmt.Errorf("rescan source %s: %w", d.name, err)
	}
	d.skip.ok(".")
	byIno := make(map[[2]uint64]string, len(listed))
	for rel, fi := range listed {
		dev, ino := fileID(fi)
		byIno[[2]uint64{dev, ino}] = rel
	}
	next := make(map[string]*fileState, len(listed))
	var fresh []*fileState
	for _, rel := range slices.Sorted(maps.Keys(d.files)) {
		st := d.files[rel]
		id := [2]uint64{st.pos.Dev, st.pos.Inode}
		nrel, ok := byIno[id]
		if ok && next[nrel] != nil {
			ok = false // two states of one inode (a rename onto a tracked name): keep the first
		}
		if !ok && d.skip.under(rel) {
			next[rel] = st // in a directory it cannot list now: unseen, not gone
			continue
		}
		if !ok {
			d.cfg.Logger.Info("file gone; dropping it", "source", d.name, "file", rel, "offset", st.pos.Offset)
			d.retire(st)
			st.close()
			continue
		}
		fi := listed[nrel]
		if nrel != rel {
			d.cfg.Logger.Info("file renamed; continuing it", "source", d.name, "from", rel, "to", nrel)
			st.pos.Path = nrel
			st.pos.Rotated = true // rotated away: it stops holding the watermark once read to its end
		}
		if st.compressed && st.pos.ID != "" && fi.Size() == st.size {
			// immutable and unchanged: no need to decompress its start again
		} else if !st.compressed && !st.borrowed && fi.Size() < st.r0() {
			d.cfg.Logger.Warn("file truncated; reading it again from the start", "source", d.name, "file", nrel, "size", fi.Size(), "offset", st.pos.Offset)
			st.reset(d, nrel, fi)
		} else if !d.sameContent(st) {
			d.cfg.Logger.Info("file replaced by a new one (truncated, or inode reused); reading it from the start", "source", d.name, "file", nrel)
			st.reset(d, nrel, fi)
		}
		st.size = fi.Size()
		next[nrel] = st
		if st.pos.ID == "" {
			fresh = append(fresh, st)
		}
	}
	for rel, fi := range listed {
		if _, ok := next[rel]; ok {
			continue
		}
		st := d.newState(rel, fi)
		next[rel] = st
		fresh = append(fresh, st)
	}
	d.files = next
	d.reorder()
	d.identifyAll(fresh)
	d.skip.keep(func(rel string) bool { return d.files[rel] != nil })
	return nil
}

// r0 is the raw offset up to which the file is known to extend: the read
// position, including buffered bytes.
func (st *fileState) r0() int64 {
	if st.r != nil {
		return st.r.readOffset()
	}
	return st.pos.Offset
}

// reset makes st describe a new file at rel, read from the start; what
// was read of the file it described is remembered (retire).
func (st *fileState) reset(d *DirSource, rel string, fi fs.FileInfo) {
	d.retire(st)
	st.close()
	*st = *d.newState(rel, fi)
}

// Wait implements Waiter: it returns as soon as a file may hold unread
// data, a watch event arrives, a rescan is due, timeout passes or ctx ends.
func (d *DirSource) Wait(ctx context.Context, timeout time.Duration) error {
	if d.cfg.Once || d.hasData() {
		return ctx.Err()
	}
	rescanIn := d.cfg.Rescan - d.cfg.Clock().Sub(d.lastRescan)
	if rescanIn <= 0 || d.needRescan {
		return ctx.Err()
	}
	if at, ok := d.skip.nextRetry(d.cfg.Clock()); ok {
		timeout = min(timeout, at.Sub(d.cfg.Clock())) // an unreadable path's retry
	}
	timer := time.NewTimer(min(timeout, rescanIn))
	defer timer.Stop()
	var events <-chan fsnotify.Event
	var errs <-chan error
	if d.watcher != nil {
		events, errs = d.watcher.Events, d.watcher.Errors
	}
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-timer.C:
			return nil
		case ev := <-events:
			if d.handleEvent(ev) {
				return nil
			}
		case err := <-errs:
			d.cfg.Logger.Warn("file watch error; rescanning", "source", d.name, "error", err)
			d.needRescan = true
			return nil
		}
	}
}

// hasData reports whether some file is known to extend past what was read.
func (d *DirSource) hasData() bool {
	for _, st := range d.files {
		if st.pos.Done || st.unreadable {
			continue // an unreadable file is tried when its retry is due (Wait's timer)
		}
		if st.held() {
			continue
		}
		if st.compressed && st.r == nil && st.size != st.failedSize || !st.compressed && st.size > st.r0() {
			return true
		}
	}
	return false
}
