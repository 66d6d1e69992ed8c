package ingest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/fsnotify/fsnotify"

	"tidemark"
)

// DirSource is a local directory source: every regular file under the root
// (subdirectories too; names starting with "." are skipped), optionally
// filtered by a glob, each file front to back, the files event-time
// aligned (align.go: the file whose event time lags is read first, ties in
// lexical path order, so one file, or files in time order, read as they
// always did). .gz and .zst files are decompressed and treated as immutable.
//
// With SourceConfig.Once it reads what was there at Open and stops. Without
// it, it tails: files grow and only complete lines are read; files are
// identified by their content (identity.go: a hash of their first bytes,
// decompressed; device+inode only as a hint), so a renamed (rotated) file
// continues where it was, a compressed or copied rotation or a restored
// copy continues from where the file it copies was read to, a truncated one
// restarts at 0, a reused inode is a new file, and deleted files leave the
// Position (for Position.Gone). Changes are found by fsnotify plus a periodic
// full rescan (the backstop for lost events), or by the rescan alone with
// PollOnly.
//
// A DirSource is used by one goroutine at a time (Read, Wait and Position are not
// synchronised). A file deleted while it still had unread lines is dropped
// with them.
type DirSource struct {
	name    string
	root    string
	pattern string // glob on the relative path ("/" in it) or on the base name
	cfg     SourceConfig

	files map[string]*fileState // by relative path
	order []string              // relative paths, sorted
	json  []Decoder             // NDJSON: one per decoding worker
	// scratch holds the lines cut from the file being read (lineRead.scratch).
	scratch []cutLine
	queue   alignQueue // files a Read may take records from
	keys    []alignKey
	// until, during the replay of a logged batch (Limit), bounds each
	// file by identity (untilKey): records at or past the offset are not
	// returned, and a file not in it gives none. nil otherwise.
	until map[string]int64
	// gone holds files read that are no longer there, by ID, and
	// goneOrder their IDs, oldest first (identity.go); byID indexes the
	// tracked files by ID.
	gone      map[string]FilePosition
	goneOrder []string
	byID      map[string][]*fileState
	opening   bool     // Open is matching the resumed files: gone is not cut yet
	pool      readPool // the files' read buffers, reused once Recycle allows

	watcher    *fsnotify.Watcher
	watched    map[string]bool   // absolute directory paths
	linked     map[string]string // real path of a directory reached through a link -> its relative path
	single     bool              // the spec names one file: a link there is followed wherever it leads
	warned     map[string]bool   // links outside the root already logged
	lastRescan time.Time
	needRescan bool
	closed     bool

	skip *skipped // paths it cannot read now (unreadable.go)
	// opened holds the files with an open reader, at most maxOpen
	// (openfiles.go); tick orders their use.
	opened  []*fileState
	maxOpen int
	tick    uint64
	peekBuf []tidemark.Record
	// walked holds the relative paths of the directories the last listing
	// reached: true if it could list them.
	walked map[string]bool
}

var (
	_ Source   = (*DirSource)(nil)
	_ Waiter   = (*DirSource)(nil)
	_ Recycler = (*DirSource)(nil)
)

// fileState is one tracked file.
type fileState struct {
	lineInput        // position, line reader, Limit bound
	size       int64 // raw size at the last stat
	limit      int64 // Once: raw bytes present at Open; -1 = no limit
	compressed bool
	closers    []io.Closer
	// failedSize is the raw size of a compressed file when it last ended
	// early (still being written); it is retried only once it changes.
	failedSize int64
	// unreadable: the last open failed. It is retried, but its bytes do
	// not count as unread data meanwhile (it holds the watermark only as a
	// live file read to its end would, until --idle-timeout): a file that
	// cannot be read must not stop every window from closing. Under Once
	// it is given up for the run.
	unreadable bool
	// borrowed: the position was taken from another file of the same
	// identity (a copy, a rotation found by content), not reached by
	// reading this one, so the file being shorter than it is no
	// truncation.
	borrowed bool
	used     uint64 // DirSource.tick when last read (openfiles.go)
	peeked   bool   // its next event time was looked for (peek)
}

func openDir(ctx context.Context, spec string, cfg SourceConfig, resume Position) (*DirSource, error) {
	root, pattern, err := splitSpec(spec)
	if err != nil {
		return nil, err
	}
	if real, err := filepath.EvalSymlinks(root); err == nil {
		root = real // the root the user named is followed; links under it obey symlink.go
	}
	d := &DirSource{name: spec, root: root, pattern: pattern, cfg: cfg, files: map[string]*fileState{}, watched: map[string]bool{},
		linked: map[string]string{}, warned: map[string]bool{}, gone: map[string]FilePosition{}, skip: newSkipped(spec, cfg.Logger), maxOpen: maxOpenFiles()}
	d.single = pattern != "" && !strings.ContainsAny(spec, "*?[")
	if cfg.Format != FormatCSV {
		if d.json, err = ndjsonDecoders(cfg.DecoderConfig); err != nil {
			return nil, err
		}
	}
	if !cfg.Once && !cfg.PollOnly {
		if d.watcher, err = fsnotify.NewWatcher(); err != nil {
			return nil, fmt.Errorf("open source %s: watch: %w", spec, err)
		}
	}
	listed, err := d.list()
	if err != nil {
		d.Close()
		return nil, fmt.Errorf("open source %s: %w", spec, err)
	}
	// A resumed file is found by its inode first (cheap), then by its
	// content (a copy, a restore, a rotation while the stream was down).
	byIno := map[[2]uint64]int{}
	for i, p := range resume.Files {
		if p.Inode != 0 {
			byIno[[2]uint64{p.Dev, p.Inode}] = i
		}
	}
	claimed := make([]bool, len(resume.Files))
	var fresh []*fileState
	for _, rel := range slices.Sorted(maps.Keys(listed)) {
		fi := listed[rel]
		st := d.newState(rel, fi)
		dev, ino := fileID(fi)
		i, ok := byIno[[2]uint64{dev, ino}]
		if ok && !claimed[i] {
			p := resume.Files[i]
			st.pos, st.pos.Path, st.pos.Dev, st.pos.Inode = p, rel, dev, ino
			if d.sameContent(st) && st.pos.ID != "" {
				claimed[i] = true
				if p.Path != rel {
					st.pos.Rotated = true // renamed while we were down: continue it under its new name
				}
				st.pos.Header = slices.Clone(p.Header)
			} else {
				st = d.newState(rel, fi)
				ok = false
			}
		}
		if !ok {
			fresh = append(fresh, st)
		}
		if cfg.Once {
			st.limit = fi.Size()
		}
		d.files[rel] = st
	}
	d.opening = true
	for _, p := range resume.Gone {
		d.retirePos(p)
	}
	for i, p := range resume.Files {
		if !claimed[i] && p.ID != "" {
			d.retirePos(p)
		}
	}
	d.reorder()
	d.identifyAll(fresh)
	d.opening = false
	d.trimGone()
	d.lastRescan = cfg.Clock()
	return d, nil
}

// splitSpec turns a --source value into a root directory and a glob.
func splitSpec(spec string) (root, pattern string, err error) {
	if strings.ContainsAny(spec, "*?[") {
		root = spec
		for strings.ContainsAny(root, "*?[") {
			root = filepath.Dir(root)
		}
		rel, err := filepath.Rel(root, spec)
		if err != nil {
			return "", "", fmt.Errorf("open source %s: %w", spec, err)
		}
		pattern = filepath.ToSlash(rel)
		if _, err := path.Match(pattern, ""); err != nil {
			return "", "", fmt.Errorf("open source %s: bad glob: %w", spec, err)
		}
	} else {
		root = spec
	}
	fi, err := os.Stat(root)
	if err != nil {
		return "", "", fmt.Errorf("open source %s: %w", spec, err)
	}
	if !fi.IsDir() {
		if pattern != "" {
			return "", "", fmt.Errorf("open source %s: %s is not a directory", spec, root)
		}
		return filepath.Dir(root), filepath.Base(root), nil
	}
	return root, pattern, nil
}

func (d *DirSource) abs(rel string) string { return filepath.Join(d.root, filepath.FromSlash(rel)) }

func (d *DirSource) match(rel string) bool {
	if d.pattern == "" {
		return true
	}
	name := rel
	if !strings.Contains(d.pattern, "/") {
		name = path.Base(rel)
	}
	ok, _ := path.Match(d.pattern, name)
	return ok
}

// list walks the tree and returns its matching regular files. In tailing
// mode it also watches every directory it sees. Symbolic links follow the
// rules of followLink (symlink.go).
//
// A subdirectory it cannot list is skipped (unreadable.go), its files kept
// as they were tracked; the root itself not being a readable directory is
// a *rootError.
func (d *DirSource) list() (map[string]fs.FileInfo, error) {
	w := &walk{out: map[string]fs.FileInfo{}, seen: map[string]bool{}, dirs: map[[2]uint64]bool{}}
	clear(d.linked)
	d.walked = map[string]bool{}
	if !d.cfg.FollowSymlinks {
		r, err := os.OpenRoot(d.root)
		if err != nil {
			return nil, &rootError{err}
		}
		defer r.Close()
		w.root = r
	}
	err := d.walkDir(w, d.root, "")
	for p := range d.watched {
		if !w.seen[p] {
			delete(d.watched, p) // fsnotify drops watches of removed directories itself
		}
	}
	if err != nil {
		return nil, err
	}
	for _, u := range d.skip.snapshot() {
		if !u.Dir || u.Path == "." {
			continue
		}
		switch ok, reached := d.walked[u.Path]; {
		case !reached:
			d.skip.forget(u.Path) // gone: nothing to retry
		case ok:
			d.skip.ok(u.Path) // listed this time
		}
	}
	return dedupe(w.out), nil
}

// rootError is list's error when the source's root cannot be listed (gone,
// replaced by a file, no permission): Rescan then waits for it.
type rootError struct{ err error }

func (e *rootError) Error() string { return "list root: " + e.err.Error() }
func (e *rootError) Unwrap() error { return e.err }

// walkDir walks the real directory dir, whose files are named prefix/... in
// the source (prefix is "" for the root, or the path of a followed link).
func (d *DirSource) walkDir(w *walk, dir, prefix string) error {
	now := d.cfg.Clock()
	return filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			if p != dir && errors.Is(err, fs.ErrNotExist) {
				return nil // vanished while walking
			}
			if p == dir && prefix == "" {
				return &rootError{err}
			}
			rel, rerr := filepath.Rel(dir, p)
			if rerr != nil {
				return nil
			}
			rel = path.Join(prefix, filepath.ToSlash(rel))
			if e != nil && e.IsDir() {
				d.walked[rel] = false
				d.skip.failed(rel, true, err, now)
				return filepath.SkipDir // its files are kept as tracked (Rescan)
			}
			return nil
		}
		if p != dir && strings.HasPrefix(e.Name(), ".") {
			if e.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		rel = path.Join(prefix, filepath.ToSlash(rel))
		if e.IsDir() {
			if !w.enter(e) {
				return filepath.SkipDir // reached before, through a link: no loops, no double reads
			}
			if p != dir || prefix != "" {
				d.walked[rel] = true // until its listing fails (the call with err)
				if !d.skip.due(rel, now) {
					d.walked[rel] = false
					return filepath.SkipDir // unreadable: tried again after its backoff
				}
			}
			w.seen[p] = true
			if prefix != "" {
				d.linked[p] = rel
			}
			if d.watcher != nil && !d.watched[p] {
				if err := d.watcher.Add(p); err == nil {
					d.watched[p] = true
				} else if !d.warned["watch:"+p] {
					d.warned["watch:"+p] = true // once: an unreadable directory is tried again and again
					d.cfg.Logger.Warn("cannot watch directory; the rescan will cover it", "dir", p, "error", err)
				}
			}
			return nil
		}
		if e.Type()&fs.ModeSymlink != 0 {
			return d.followLink(w, p, rel)
		}
		if !d.match(rel) {
			return nil
		}
		fi, err := e.Info()
		if err != nil || !fi.Mode().IsRegular() {
			return nil
		}
		w.out[rel] = fi
		return nil
	})
}

func isCompressed(rel string) bool {
	ext := strings.ToLower(path.Ext(rel))
	return ext == ".gz" || ext == ".zst"
}

// newState is a new file at rel, not identified yet (identify).
func (d *DirSource) newState(rel string, fi fs.FileInfo) *fileState {
	dev, ino := fileID(fi)
	st := &fileState{size: fi.Size(), limit: -1, compressed: isCompressed(rel), failedSize: -1}
	st.until = -1
	st.pos = FilePosition{Path: rel, Dev: dev, Inode: ino}
	if d.until != nil {
		st.until = 0 // nothing until identified as a file the batch knew
	}
	return st
}

func (d *DirSource) reorder() {
	d.order = slices.AppendSeq(d.order[:0], maps.Keys(d.files))
	slices.Sort(d.order)
	d.rebuildByID()
}

// Name implements Source.
func (d *DirSource) Name() string { return d.name }

// Position implements Source. Files are listed in path order, each with
// whether it holds the source's watermark back now (FilePosition.Hold).
func (d *DirSource) Position() Position {
	now := d.cfg.Clock().UnixMicro()
	p := positionOf(d.order, func(rel string) FilePosition {
		st := d.files[rel]
		p := st.pos
		p.Hold = holds(&p, d.finished(st), d.unread(st), !d.cfg.Once && !st.compressed, now, d.cfg.IdleTimeout)
		return p
	})
	p.Gone = d.goneList()
	p.Unreadable = d.skip.snapshot()
	return p
}

// Unreadable implements Skipper: the paths skipped now, in path order.
func (d *DirSource) Unreadable() []Unreadable { return d.skip.snapshot() }

// Exhausted implements Source: with Once, every file present at Open has
// been read up to its size then. A tailing source is never exhausted.
func (d *DirSource) Exhausted() bool {
	if !d.cfg.Once {
		return false
	}
	for _, st := range d.files {
		if !d.finished(st) {
			return false
		}
	}
	return true
}

// finished reports whether a file can give no more records: an immutable
// one read to its end, one read to its size at Open (Once), or one at its
// Limit.
func (d *DirSource) finished(st *fileState) bool {
	return st.pos.Done || st.limit >= 0 && st.pos.Offset >= st.limit && !st.compressed ||
		st.until >= 0 && st.pos.Offset >= st.until || d.cfg.Once && st.unreadable
}

// end is the raw size the file is read to: its size at Open under Once,
// else at the last stat.
func (st *fileState) end() int64 {
	if st.limit >= 0 {
		return st.limit
	}
	return st.size
}

// unread reports whether a file is known to hold bytes not read yet (a
// partial last line still being written does not count: it is read to its
// end, waiting).
func (d *DirSource) unread(st *fileState) bool {
	switch {
	case d.finished(st) || st.unreadable || st.held():
		return false
	case d.cfg.Once || st.compressed:
		return true
	}
	return st.size > st.r0()
}

// Limit bounds the source at end, the logged end of a batch being
// replayed: no record at or past a file's offset in end is returned, and
// files not in end give none. With the same bounds the aligned reading
// takes the batch's records in the order of the first time.
func (d *DirSource) Limit(end Position) {
	d.until = make(map[string]int64, 2*len(end.Files))
	for _, p := range end.Files {
		for _, k := range untilKeys(&p) {
			d.until[k] = max(d.until[k], p.Offset)
		}
	}
	for _, st := range d.files {
		st.until = d.untilOf(&st.pos)
	}
}

// Close implements Source.
func (d *DirSource) Close() error {
	if d.closed {
		return nil
	}
	d.closed = true
	var errs []error
	for _, st := range d.files {
		errs = append(errs, st.close())
	}
	if d.watcher != nil {
		errs = append(errs, d.watcher.Close())
	}
	return errors.Join(errs...)
}

func (st *fileState) close() error {
	var errs []error
	for i := len(st.closers) - 1; i >= 0; i-- {
		errs = append(errs, st.closers[i].Close())
	}
	st.closers = nil
	st.drop() // the decoder is rebuilt from pos.Header
	return errors.Join(errs...)
}

// Read implements Source.
func (d *DirSource) Read(ctx context.Context, dst []tidemark.Record, maxRecords int) ([]tidemark.Record, error) {
	if err := ctx.Err(); err != nil {
		return dst, err
	}
	if d.closed {
		return dst, errors.New("ingest: read from a closed source")
	}
	if !d.cfg.Once {
		d.drainEvents()
		if d.needRescan || d.cfg.Clock().Sub(d.lastRescan) >= d.cfg.Rescan || d.skip.has(".") && d.skip.due(".", d.cfg.Clock()) {
			if err := d.Rescan(ctx); err != nil {
				return dst, err
			}
		}
	}
	d.pool.read()
	d.catchUpAll()
	defer d.catchUpAll() // so the Position after this Read is the same for every copy
	arrival := d.cfg.Clock().UnixMicro()
	dst = slices.Grow(dst, d.expect(maxRecords))
	d.keys = d.keys[:0]
	for i, rel := range d.order {
		st := d.files[rel]
		if d.finished(st) {
			continue
		}
		if !st.pos.HasMax && !st.pos.HasNext && !st.peeked {
			d.peek(st, i, arrival)
			if d.finished(st) {
				continue // under Once, found unreadable
			}
		}
		d.keys = append(d.keys, keyOf(&st.pos, i))
	}
	d.queue.reset(d.keys)
	n := 0
	for n < maxRecords {
		k, bound, ok := d.queue.take()
		if !ok {
			break
		}
		st := d.files[d.order[k.i]]
		var got int
		var more bool
		var err error
		dst, got, more, err = d.readFile(st, dst, maxRecords-n, arrival, k.i, bound)
		n += got
		if err != nil {
			return dst, err
		}
		switch {
		case d.finished(st):
			if st.r != nil {
				st.close() // read to its end: free the descriptor and the read buffer
			}
		case more:
			d.queue.put(keyOf(&st.pos, k.i))
		} // else: nothing more now; a later Read looks again
	}
	if d.cfg.Once && d.Exhausted() {
		d.pool.drop() // no buffer will be read into again
	}
	return dst, nil
}

// Mark implements Recycler.
func (d *DirSource) Mark() uint64 { return d.pool.mark() }

// Recycle implements Recycler: the read buffers only records before mark
// point into are read into again.
func (d *DirSource) Recycle(mark uint64) { d.pool.recycle(mark) }

// expect estimates how many records a Read of up to maxRecords returns,
// from the unread bytes of the files at their last stat, so the batch is
// allocated once instead of growing by copies (a Record is ~150 bytes). A
// compressed file counts as maxRecords.
func (d *DirSource) expect(maxRecords int) int {
	const minLine = 64 // bytes; shorter lines only cost a regrowth
	var unread int64
	for _, rel := range d.order {
		st := d.files[rel]
		if d.finished(st) {
			continue
		}
		if st.compressed {
			return maxRecords
		}
		unread += max(0, st.end()-st.pos.Offset)
		if unread/minLine >= int64(maxRecords) {
			return maxRecords
		}
	}
	return int(unread / minLine)
}

// readFile appends up to max records of one file, the one at index idx of
// the path order, stopping early once its event time passes bound (another
// file lags now). more reports that it stopped for max or bound, not for
// lack of data. Payloads point into the line reader's buffers, which are
// not overwritten (stable) before Recycle says their records are done
// with, so they are not copied.
func (d *DirSource) readFile(st *fileState, dst []tidemark.Record, maxRecords int, arrival int64, idx int, bound alignKey) (_ []tidemark.Record, n int, more bool, _ error) {
	if d.finished(st) {
		if st.r != nil {
			st.close() // read to its end: free the descriptor and the read buffer
		}
		return dst, 0, false, nil
	}
	d.catchUp(st)
	d.use(st)
	if st.r == nil {
		if !d.cfg.Once && (!st.compressed && st.size <= st.pos.Offset || st.compressed && st.size == st.failedSize || st.held()) {
			return dst, 0, false, nil // nothing new since the last stat
		}
		if d.blocked(st) || !d.openForRead(st) {
			return dst, 0, false, nil
		}
	}
	c := lineRead{source: d.name, cfg: &d.cfg.DecoderConfig, decoders: d.json,
		arrival: arrival, idx: idx, bound: bound, scratch: &d.scratch}
	dst, n, stop, err := st.read(&c, dst, maxRecords)
	if n > 0 {
		st.borrowed = false // read from this file: its offset is its own
	}
	switch {
	case stop == stopErr:
		d.readError(st, err)
	case err != nil:
		return dst, n, false, err
	case stop == stopNoLine && st.r.done:
		if st.compressed {
			st.pos.Done = true
		}
		st.close()
	case stop == stopNoLine && !st.r.pending() && !d.cfg.Once:
		st.size = max(st.size, st.r.readOffset())
		st.close() // caught up: free the descriptor until the file grows
	}
	return dst, n, stop == stopMore, nil
}

// blocked reports whether st is not to be opened now: it failed and its
// retry is not due, or it lies under a directory (or root) that cannot be
// read.
func (d *DirSource) blocked(st *fileState) bool {
	return !d.skip.due(st.pos.Path, d.cfg.Clock()) || d.skip.under(st.pos.Path)
}

// openForRead opens st's reader at its position, within the open-file cap
// (openfiles.go). A file that cannot be opened is marked unreadable and
// retried with backoff (unreadable.go); one gone makes a rescan due.
func (d *DirSource) openForRead(st *fileState) bool {
	d.use(st)
	d.room(st, false)
	err := d.openReader(st)
	if err != nil && tooManyOpen(err) {
		d.room(st, true) // out of descriptors: free every other one, then try once more
		err = d.openReader(st)
	}
	switch {
	case err == nil:
		st.unreadable = false
		d.skip.ok(st.pos.Path)
		d.track(st)
		return true
	case errors.Is(err, errHeld):
		st.failedSize = st.size // another file of its identity is read that far, or it is still being written
		return false
	case errors.Is(err, errCovered):
		st.pos.Done = true // a compressed copy of what was read already
		return false
	case errors.Is(err, fs.ErrNotExist):
		d.needRescan = true
	default:
		d.skip.failed(st.pos.Path, false, err, d.cfg.Clock())
	}
	st.unreadable = true
	return false
}

func (d *DirSource) newCSV(header []byte) (Decoder, error) {
	return NewCSVDecoder(d.cfg.DecoderConfig, header)
}

// readError handles a failed read. A compressed file still being written
// ends early: in tailing mode it is retried from the position later. Any
// other error is logged and the file is left as read so far.
func (d *DirSource) readError(st *fileState, err error) {
	if st.compressed && errors.Is(err, io.ErrUnexpectedEOF) && !d.cfg.Once {
		st.failedSize = st.size
		st.close()
		return
	}
	d.cfg.Logger.Error("read failed; skipping the rest of the file", "source", d.name, "file", st.pos.Path, "offset", st.pos.Offset, "error", err)
	if st.compressed {
		st.pos.Done = true
	} else if d.cfg.Once {
		st.limit = st.pos.Offset
	}
	st.close()
}

// openReader opens a file at its position, checking it is still the file
// the state describes.
func (d *DirSource) openReader(st *fileState) error {
	if st.pos.ID == "" {
		if err := d.identify(st, d.index()); err != nil {
			return err
		}
		d.catchUp(st)
		if d.finished(st) || !d.cfg.Once && !st.compressed && st.size <= st.pos.Offset {
			return errHeld // took the position of a file read that far
		}
	}
	f, err := os.Open(d.abs(st.pos.Path))
	if err != nil {
		return err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return err
	}
	if dev, ino := fileID(fi); dev != st.pos.Dev || ino != st.pos.Inode {
		f.Close()
		d.needRescan = true
		return fmt.Errorf("open %s: %w", st.pos.Path, fs.ErrNotExist) // replaced: the rescan sorts it out
	}
	st.closers = []io.Closer{f}
	var src io.Reader = f
	if st.compressed {
		dec, err := decompressor(st.pos.Path, f)
		if err != nil {
			st.close()
			return err
		}
		st.closers = append(st.closers, dec)
		src = dec
		if _, err := io.CopyN(io.Discard, src, st.pos.Offset); err != nil {
			st.close()
			switch {
			case errors.Is(err, io.EOF):
				return errCovered // shorter than what was read of its identity
			case errors.Is(err, io.ErrUnexpectedEOF) && !d.cfg.Once:
				return errHeld // still being written
			}
			return fmt.Errorf("skip to offset %d of %s: %w", st.pos.Offset, st.pos.Path, err)
		}
	} else {
		if _, err := f.Seek(st.pos.Offset, io.SeekStart); err != nil {
			st.close()
			return err
		}
		if st.limit >= 0 {
			src = io.LimitReader(f, st.limit-st.pos.Offset)
		}
	}
	final := st.compressed || d.cfg.Once
	st.r = newLineReader(src, st.pos.Offset, final, d.cfg.Format, d.cfg.MaxLineBytes)
	st.r.stable = true
	st.r.pool = &d.pool
	st.r.size = tailBuffer // tailing: files are reopened as they grow
	if d.cfg.Once {
		st.r.size = onceBuffer
	}
	if n := len(d.files); n > 8 {
		// Aligned reading keeps every file with data open at once: share
		// 8 MiB of read buffers among them.
		st.r.size = max(16<<10, min(st.r.size, (8<<20)/n))
	}
	if left := st.end() - st.pos.Offset; !st.compressed && left >= 0 && left < int64(st.r.size) {
		// A small file (a backlog of thousands of them) gets a buffer its
		// size: buffers stay live until their batch is committed, and it
		// grows if the file does.
		st.r.size = max(1<<10, int(left)+1)
	}
	if d.cfg.Format == FormatCSV && st.pos.Header != nil {
		return st.csvFrom(&d.cfg.DecoderConfig)
	}
	return nil
}

// The read buffer sizes of a file (variables so a test can use small ones).
var (
	onceBuffer = 1 << 20
	tailBuffer = 256 << 10
)

// arena hands out payload copies from chunks that are never reused, so a
// batch's payloads stay valid for as long as the batch holds them.
type arena struct {
	buf   []byte
	chunk int
}

func (a *arena) copy(b []byte) []byte {
	if cap(a.buf)-len(a.buf) < len(b) {
		a.buf = make([]byte, 0, max(len(b), a.chunk))
	}
	start := len(a.buf)
	a.buf = append(a.buf, b...)
	return a.buf[start:len(a.buf):len(a.buf)]
}
