package ingest

import (
	"bytes"
	"errors"
	"slices"
	"strconv"
	"strings"
)

// This file decides which file a file is (docs/file-identity.md): the
// content identity of fingerprint.go applied to a directory's files. Files
// that share an identity (a file and its copy, a rotated file and its
// compressed version) share one read position: a line read from one is not
// read again from another.

// maxGone bounds DirSource.gone, the files read that are no longer there
// (they are in every Position, so in every batch's checkpoint record). At
// Open, all the resumed ones are matched first (a restored or moved
// directory), then the list is cut to maxGone.
const maxGone = 256

// errHeld says a file cannot be read yet: it is not identified (no complete
// first line, or a short file that may be a copy still being made), or it
// is a compressed file still being written. It is retried once its size
// changes.
var errHeld = errors.New("ingest: file not ready")

// errCovered says a compressed file ends before the offset its identity was
// read to: it holds nothing new.
var errCovered = errors.New("ingest: file read already")

// held reports whether st could not be identified at its current size.
func (st *fileState) held() bool { return st.pos.ID == "" && st.size == st.failedSize }

// known is an identity a new file may continue: a tracked file's (st set)
// or one of a file gone (st nil).
type known struct {
	p  *FilePosition
	st *fileState
}

// knownIndex lists the known identities by Head.
type knownIndex map[string][]known

func (d *DirSource) index() knownIndex {
	idx := knownIndex{}
	for _, st := range d.files {
		if st.pos.ID != "" {
			idx[st.pos.Head] = append(idx[st.pos.Head], known{&st.pos, st})
		}
	}
	for _, id := range d.goneOrder {
		if g, ok := d.gone[id]; ok {
			idx[g.Head] = append(idx[g.Head], known{&g, nil})
		}
	}
	return idx
}

// identifyAll identifies files not identified yet, in path order (so a
// file and its copy, both new, resolve the same way every time).
func (d *DirSource) identifyAll(sts []*fileState) {
	if len(sts) == 0 {
		return
	}
	slices.SortFunc(sts, func(a, b *fileState) int { return strings.Compare(a.pos.Path, b.pos.Path) })
	idx := d.index()
	for _, st := range sts {
		if err := d.identify(st, idx); errors.Is(err, errHeld) {
			st.failedSize = st.size
		}
	}
}

// identify gives st its identity: that of a known file whose content it
// continues (a rename, a rotation, a copy: it then takes that file's
// position), or its own. It returns errHeld while it cannot tell yet, and
// the error of a file it cannot read.
func (d *DirSource) identify(st *fileState, idx knownIndex) error {
	pr, err := readPrint(d.abs(st.pos.Path), st.compressed)
	if err != nil {
		return err
	}
	final := d.cfg.Once || st.compressed && !pr.partial
	head, ok := headOf(pr.b, d.cfg.Format == FormatCSV, final)
	if !ok {
		if !d.cfg.Once {
			if final && st.compressed {
				st.pos.Done = true // an empty compressed file
			}
			return errHeld
		}
		head = hashOf(pr.b) // --once: what there is identifies it
	}
	k, hold := d.lookup(idx, pr, head, final, st)
	if hold && !d.cfg.Once {
		return errHeld
	}
	if k != nil {
		d.adopt(st, k.FilePosition, k.gone)
	} else {
		st.pos.ID = hashOf(pr.b)
	}
	st.pos.Hash, st.pos.HashLen, st.pos.Head = hashOf(pr.b), len(pr.b), head
	if idx != nil {
		idx[head] = append(idx[head], known{&st.pos, st})
	}
	if d.byID != nil {
		d.byID[st.pos.ID] = append(d.byID[st.pos.ID], st)
	}
	if d.until != nil {
		st.until = d.untilOf(&st.pos)
	}
	return nil
}

// lookup finds the known file a new file with start pr continues. hold
// reports that it cannot tell yet: the new file is shorter than the
// fingerprint of a file with the same first line that is no longer there
// to compare with, and it may still grow (a copy being made).
func (d *DirSource) lookup(idx knownIndex, pr print, head string, final bool, self *fileState) (_ *lookedUp, hold bool) {
	for _, c := range idx[head] {
		if c.st == self {
			continue
		}
		if c.st != nil {
			// The file is there: compare with what it holds now, unless it
			// has changed since (truncated, replaced).
			if cur, err := readPrint(d.abs(c.st.pos.Path), c.st.compressed); err == nil && c.p.matches(cur.b) {
				m := min(len(pr.b), len(cur.b))
				if bytes.Equal(pr.b[:m], cur.b[:m]) && (len(pr.b) <= len(cur.b) || len(cur.b) == fingerprintBytes) {
					return &lookedUp{c.p, false}, false
				}
				continue // holds more than the file it starts like, or differs: another file
			}
		}
		switch {
		case c.p.matches(pr.b):
			return &lookedUp{c.p, c.st == nil}, false
		case len(pr.b) < c.p.HashLen && !final:
			hold = true
		}
	}
	return nil, hold
}

// lookedUp is a known file found by lookup; gone: it is not there any more.
type lookedUp struct {
	*FilePosition
	gone bool
}

// adopt makes st continue k: a file with the same start, read up to
// k.Offset under another name or inode.
func (d *DirSource) adopt(st *fileState, k *FilePosition, gone bool) {
	p := *k
	p.Path, p.Dev, p.Inode = st.pos.Path, st.pos.Dev, st.pos.Inode
	p.Rotated = k.Rotated || k.Path != st.pos.Path
	p.Done = k.Done && st.compressed
	p.Hold = false
	p.Header = slices.Clone(k.Header)
	st.pos = p
	st.borrowed = true
	if gone {
		delete(d.gone, p.ID) // st carries it now
	}
	d.cfg.Logger.Info("file continues one already read", "source", d.name, "file", p.Path, "as", k.Path, "offset", p.Offset)
}

// retire remembers a file that is gone (or was truncated or replaced) with
// what was read of it, unless a tracked file of the same identity has read
// as far: a compressed or copied version that appears later continues it.
func (d *DirSource) retire(st *fileState) {
	for _, o := range d.byID[st.pos.ID] {
		if o != st && d.files[o.pos.Path] == o && o.pos.Offset >= st.pos.Offset {
			return
		}
	}
	d.retirePos(st.pos)
}

// retirePos remembers p as a file gone.
func (d *DirSource) retirePos(p FilePosition) {
	if p.ID == "" || p.Offset == 0 {
		return
	}
	if g, ok := d.gone[p.ID]; ok && g.Offset >= p.Offset {
		return
	}
	p.Hold = false
	p.Header = slices.Clone(p.Header)
	if _, ok := d.gone[p.ID]; !ok {
		d.goneOrder = append(d.goneOrder, p.ID)
	}
	d.gone[p.ID] = p
	if !d.opening {
		d.trimGone()
	}
}

// trimGone forgets the oldest gone files past maxGone.
func (d *DirSource) trimGone() {
	for len(d.gone) > maxGone {
		delete(d.gone, d.goneOrder[0])
		d.goneOrder = d.goneOrder[1:]
	}
	if len(d.goneOrder) > 2*maxGone {
		d.goneOrder = slices.DeleteFunc(d.goneOrder, func(id string) bool { _, ok := d.gone[id]; return !ok })
	}
}

// goneList is Position.Gone: the gone files, the most recent last.
func (d *DirSource) goneList() []FilePosition {
	var out []FilePosition
	seen := map[string]bool{}
	for _, id := range d.goneOrder {
		if g, ok := d.gone[id]; ok && !seen[id] {
			seen[id] = true
			g.Header = slices.Clone(g.Header)
			out = append(out, g)
		}
	}
	return out
}

// catchUp moves st to the furthest any file of its identity has been read
// to: a line read from a file is not read again from its copy.
func (d *DirSource) catchUp(st *fileState) {
	if st.pos.ID == "" {
		return
	}
	best := &st.pos
	for _, o := range d.byID[st.pos.ID] {
		if o.pos.Offset > best.Offset && d.files[o.pos.Path] == o {
			best = &o.pos
		}
	}
	if g, ok := d.gone[st.pos.ID]; ok && g.Offset > best.Offset {
		best = &g
	}
	if best == &st.pos {
		return
	}
	st.close()
	st.pos.Offset, st.pos.Header = best.Offset, slices.Clone(best.Header)
	if best.HasMax && (!st.pos.HasMax || best.Max > st.pos.Max) {
		st.pos.Max, st.pos.HasMax = best.Max, true
	}
	st.pos.LastLine = max(st.pos.LastLine, best.LastLine)
	if best.Done && st.compressed {
		st.pos.Done = true
	}
	st.borrowed = true
}

// catchUpAll catches up every file that shares its identity with another.
func (d *DirSource) catchUpAll() {
	for id, sts := range d.byID {
		_, gone := d.gone[id]
		if len(sts) > 1 || gone {
			for _, st := range sts {
				if d.files[st.pos.Path] == st {
					d.catchUp(st)
				}
			}
		}
	}
}

// rebuildByID indexes the tracked files by identity.
func (d *DirSource) rebuildByID() {
	d.byID = make(map[string][]*fileState, len(d.files))
	for _, st := range d.files {
		if st.pos.ID != "" {
			d.byID[st.pos.ID] = append(d.byID[st.pos.ID], st)
		}
	}
}

// sameContent reports whether the file st tracks still starts as it did
// (it may have grown), extending its fingerprint as it grows. A position
// from a checkpoint without content identity (no ID) is checked with its
// old hash and given its identity. A file that cannot be read now is taken
// as unchanged: reading it will tell.
func (d *DirSource) sameContent(st *fileState) bool {
	name := d.abs(st.pos.Path)
	if st.pos.ID == "" {
		if st.pos.Hash == "" {
			return true // not identified yet: nothing to compare
		}
		if st.pos.HashLen > 0 {
			if h, ok := legacyHash(name, st.pos.HashLen); !ok || h != st.pos.Hash {
				return false
			}
		}
		pr, err := readPrint(name, st.compressed)
		if err != nil {
			return true
		}
		head, ok := headOf(pr.b, d.cfg.Format == FormatCSV, true)
		if !ok {
			head = hashOf(pr.b)
		}
		st.pos.ID, st.pos.Hash, st.pos.HashLen, st.pos.Head = hashOf(pr.b), hashOf(pr.b), len(pr.b), head
		return true
	}
	pr, err := readPrint(name, st.compressed)
	if err != nil {
		return true
	}
	if !st.pos.matches(pr.b) {
		return false
	}
	if len(pr.b) > st.pos.HashLen {
		st.pos.Hash, st.pos.HashLen = hashOf(pr.b), len(pr.b)
	}
	return true
}

// untilKeys are the names of a file in Limit's bounds: its identity, and
// its device and inode, for a batch logged before content identity.
func untilKeys(p *FilePosition) []string {
	ino := "ino:" + strconv.FormatUint(p.Dev, 10) + ":" + strconv.FormatUint(p.Inode, 10)
	if p.ID != "" {
		return []string{p.ID, ino}
	}
	return []string{ino}
}

// untilOf is the Limit bound of a file: by identity, else by inode (a
// batch logged before content identity); 0 for a file the batch did not
// know, or not identified yet.
func (d *DirSource) untilOf(p *FilePosition) int64 {
	if p.ID != "" {
		if v, ok := d.until[p.ID]; ok {
			return v
		}
	} else if p.Hash == "" {
		return 0
	}
	keys := untilKeys(p)
	return d.until[keys[len(keys)-1]]
}
