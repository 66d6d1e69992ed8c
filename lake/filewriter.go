package lake

import (
	"context"
	"fmt"
	"io"
	"os"
	"sync"
	"unsafe"

	"github.com/google/uuid"

	"tidemark"
	"tidemark/lake/colfile"
	"tidemark/lake/store"
)

// Row-group and page bounds. A row group is flushed to the temp file when it
// reaches either limit, so a writer holds at most one row group in memory.
const (
	rowGroupRows  = 32 << 10
	rowGroupBytes = 64 << 20
	chunkRows     = 16 << 10 // rows buffered per column before handing them to a column worker
)

// colBuf buffers one column's values of a chunk, typed, until they are
// handed to the column's colfile.Chunk in bulk. Only the slice for the column's kind is
// used; null is kept for OPTIONAL columns only.
type colBuf struct {
	ints   []int64
	floats []float64
	bools  []bool
	bytes  [][]byte
	null   []bool
	n      int  // values set in this chunk
	opt    bool // the column is OPTIONAL
}

// newColBuf returns an empty chunk buffer for column i of t with room for
// rows values (a chunk's worth at most). (Reusing them across files
// through a pool cut allocation but kept ~15 MB more live between batches:
// BenchmarkLongRunMemory got worse, so they are not.)
func newColBuf(t *table, i, rows int) *colBuf {
	c := t.cols[i]
	b := &colBuf{opt: c.optional}
	switch c.kind {
	case kindTimestamp, kindLong:
		b.ints = make([]int64, 0, rows)
	case kindDouble:
		b.floats = make([]float64, 0, rows)
	case kindBool:
		b.bools = make([]bool, 0, rows)
	default:
		b.bytes = make([][]byte, 0, rows)
	}
	if c.optional {
		b.null = make([]bool, 0, rows)
	}
	return b
}

// Chunks a column may have queued or in its worker's hands at once, on top
// of the one being filled. The free lists hold every buffer of a column, so
// a worker never blocks returning one.
const chunksInFlight = 2

// colJob is work for a column's worker: a chunk to write, or (buf nil) a
// barrier to acknowledge, after flushing the column's last page if flush.
type colJob struct {
	buf   *colBuf
	flush bool
}

// rowFill appends rows lo..hi (of the caller's rows, 0-based in the file)
// to the chunk buffers cols (by table column index), in order, setting
// each buffer's n, and returns the bytes they gave the byte-valued
// columns (what bytes and str count); see fillRows.
type rowFill func(cols []*colBuf, lo, hi int) int64

// colAck answers a barrier with the column's first error, if any.
type colAck struct {
	col int
	err error
}

// Row groups a file may have being written at once: each has its own
// column writers and workers, so the heaviest column (payload) is
// compressed on several cores; they are committed to the file in order.
const rowGroupsInFlight = 2

// rgWriter is one row group being written: a column chunk encoder and a
// worker goroutine per column (the chunks' stats are merged into the
// file's Delta stats when it is committed).
type rgWriter struct {
	chunks  []*colfile.Chunk // by table column index
	rows    int64            // set when the row group is closed
	jobs    []chan colJob    // by column
	acks    chan colAck
	workers sync.WaitGroup
	closed  bool // the final barrier was sent
	stopped bool
}

// fileWriter writes one Parquet data file of a table, columnar underneath
// and without reflection: callers set each column of a row with the typed
// methods (in any order), then call endRow. Values are buffered per column
// in typed slices, a chunk at a time; each full chunk goes to its column's
// worker goroutine, which encodes it into pages and compresses them
// (colfile.Chunk) while the caller fills the next chunk, and up to
// rowGroupsInFlight row groups are written at once.
// A column chunk's bytes depend only on its values, in order, and row
// groups are committed in order, so the file is the same whatever the
// scheduling. It keeps the Delta stats as it goes. The file is written to
// a temp file and stored by finish: staged in the store and published
// there (a rename: written once) when the store is a store.Stager and the
// writer was made by newFileWriterIn, otherwise outside the lake and
// stored with store.Put.
type fileWriter struct {
	t      *table
	tmp    *os.File
	stager store.Stager // tmp was staged here; nil: tmp is an OS temp file
	pf     *colfile.Writer
	fcols  []colfile.Column // the file's columns, in file order
	leaf   []int            // by table column: its index in the file
	def    []int            // max definition level: 1 for OPTIONAL columns
	cols   []*colBuf
	stats  []colStats // of the committed row groups
	rows   int64
	chunk  int // rows in the current chunk
	rgRows int
	rgSize int64

	cur     *rgWriter
	pending []*rgWriter        // closed row groups, oldest first, not yet committed
	free    []chan *colBuf     // by column: emptied chunks
	nbuf    []int              // by column: buffers allocated
	spare   [][]*colfile.Chunk // the encoders of committed row groups, for the next
	hint    int                // rows the caller expects (newFileWriterIn)
	failed  bool
}

// Buffers a column may have: the one being filled and those queued in or
// held by the workers of every row group in flight. The free lists hold
// them all, so a worker never blocks returning one.
const maxColBufs = 1 + chunksInFlight*rowGroupsInFlight

// newFileWriter starts a data file of t in an OS temp file, which finish
// copies into the store.
func newFileWriter(t *table) (*fileWriter, error) { return newFileWriterIn(t, nil, chunkRows) }

// newFileWriterIn starts a data file of t that finish will store in st:
// written where it is published when st is a store.Stager (the directory
// store), so its bytes are written once; as newFileWriter otherwise. rows
// is how many rows the caller expects to write: the first chunk buffers
// are sized for that many (a batch's file of one event hour is often far
// smaller than a chunk), and grow if more come.
func newFileWriterIn(t *table, st store.Store, rows int) (*fileWriter, error) {
	stager, _ := st.(store.Stager)
	var tmp *os.File
	var err error
	if stager != nil {
		tmp, err = stager.Stage()
	} else {
		tmp, err = os.CreateTemp("", "tidemark-*.part.tmp")
	}
	if err != nil {
		return nil, fmt.Errorf("create temp data file: %w", err)
	}
	fcols, order := t.fileColumns()
	w := &fileWriter{t: t, tmp: tmp, stager: stager, hint: max(rows, 1), fcols: fcols}
	var out io.Writer = tmp
	if stager != nil {
		out = newWriteback(tmp) // published in place: its fsync comes
	}
	w.pf, err = colfile.NewWriter(out, fcols, tidemark.CreatedBy())
	if err != nil {
		w.abort()
		return nil, err
	}
	n := len(t.cols)
	w.leaf = make([]int, n)
	w.def = make([]int, n)
	w.cols = make([]*colBuf, n)
	w.stats = make([]colStats, n)
	w.free = make([]chan *colBuf, n)
	w.nbuf = make([]int, n)
	for leaf, i := range order {
		w.leaf[i] = leaf
	}
	for i, c := range t.cols {
		if c.optional {
			w.def[i] = 1
		}
		w.stats[i].kind = c.kind
		w.cols[i] = newColBuf(t, i, min(max(rows, 1), chunkRows))
		w.free[i] = make(chan *colBuf, maxColBufs)
		w.nbuf[i] = 1
	}
	w.cur = w.newRowGroup()
	return w, nil
}

// newRowGroup starts a row group and its column workers, with the column
// encoders of a committed row group when there is one.
func (w *fileWriter) newRowGroup() *rgWriter {
	n := len(w.t.cols)
	g := &rgWriter{jobs: make([]chan colJob, n), acks: make(chan colAck, n)}
	if k := len(w.spare); k > 0 {
		g.chunks, w.spare = w.spare[k-1], w.spare[:k-1]
	} else {
		g.chunks = make([]*colfile.Chunk, n)
		for i := range w.t.cols {
			g.chunks[i] = colfile.NewChunk(w.fcols[w.leaf[i]], min(w.hint, rowGroupRows))
		}
	}
	expect := min(w.left(), rowGroupRows) // the rows this group will get
	for i := range w.t.cols {
		g.chunks[i].Expect(expect)
		g.jobs[i] = make(chan colJob, chunksInFlight)
		g.workers.Go(func() { w.work(g, i) })
	}
	return g
}

// work is column i's worker in row group g: it encodes the chunks in
// order and answers barriers. After an error it only recycles chunks, and
// reports the error at the next barrier.
func (w *fileWriter) work(g *rgWriter, i int) {
	var err error
	for j := range g.jobs[i] {
		if j.buf != nil {
			if err == nil {
				err = g.chunks[i].Add(j.buf.values())
			}
			j.buf.reset()
			w.free[i] <- j.buf
			continue
		}
		if j.flush && err == nil {
			err = g.chunks[i].Finish()
		}
		g.acks <- colAck{i, err}
	}
}

// typedLen is how many values the slice of kind k holds.
func (b *colBuf) typedLen(k kind) int {
	switch k {
	case kindTimestamp, kindLong:
		return len(b.ints)
	case kindDouble:
		return len(b.floats)
	case kindBool:
		return len(b.bools)
	}
	return len(b.bytes)
}

// values are the buffered values, as a chunk encoder takes them.
func (b *colBuf) values() colfile.Values {
	return colfile.Values{Ints: b.ints, Floats: b.floats, Bools: b.bools, Bytes: b.bytes, Null: b.null}
}

func (b *colBuf) reset() {
	clear(b.bytes) // drop references to the callers' bytes
	b.ints, b.floats, b.bools, b.bytes, b.null, b.n = b.ints[:0], b.floats[:0], b.bools[:0], b.bytes[:0], b.null[:0], 0
}

func (w *fileWriter) set(c int, null bool) {
	b := w.cols[c]
	b.n++
	if w.def[c] > 0 {
		b.null = append(b.null, null)
	} else if null {
		b.null = append(b.null, true) // reported by dispatch: REQUIRED column
	}
}

func (w *fileWriter) long(c int, v int64) {
	w.cols[c].ints = append(w.cols[c].ints, v)
	w.set(c, false)
}

func (w *fileWriter) double(c int, v float64) {
	w.cols[c].floats = append(w.cols[c].floats, v)
	w.set(c, false)
}

func (w *fileWriter) boolean(c int, v bool) {
	w.cols[c].bools = append(w.cols[c].bools, v)
	w.set(c, false)
}

// bytes stores b without copying it until its chunk has been encoded
// (which copies), so b must stay unchanged until flushChunk or finish
// returns.
func (w *fileWriter) bytes(c int, b []byte) {
	w.cols[c].bytes = append(w.cols[c].bytes, b)
	w.set(c, false)
	w.rgSize += int64(len(b))
}

// str is bytes for a string, without copying it.
func (w *fileWriter) str(c int, s string) { w.bytes(c, strBytes(s)) }

// strBytes is s's bytes, not copied: what the chunk buffers hold for a
// string value, which must stay unchanged until the file is written.
func strBytes(s string) []byte { return unsafe.Slice(unsafe.StringData(s), len(s)) }

func (w *fileWriter) null(c int) {
	w.cols[c].appendZero(w.t.cols[c].kind)
	w.set(c, true)
}

// key sets the key columns cols (in key order) from k; parts k lacks are null.
func (w *fileWriter) key(cols []int, k tidemark.Key) {
	forEachKeyPart(k, len(cols), func(i int, v string, null bool) {
		if null {
			w.null(cols[i])
		} else {
			w.setKeyText(cols[i], v)
		}
	})
}

// optDouble sets c to v, or to null when !ok.
func (w *fileWriter) optDouble(c int, v float64, ok bool) {
	if ok {
		w.double(c, v)
	} else {
		w.null(c)
	}
}

// endRow completes a row; every column must have been set exactly once.
func (w *fileWriter) endRow() error {
	w.rows++
	w.rgRows++
	w.chunk++
	if w.chunk >= chunkRows {
		return w.dispatch(false, false)
	}
	return nil
}

// flushChunk hands the buffered values to the column workers and waits
// until they are encoded (copied), so the bytes passed to the writer may
// change afterwards.
func (w *fileWriter) flushChunk() error { return w.dispatch(true, false) }

// dispatch sends the current chunk of every column to the workers of the
// current row group. When the row group is full, or last is set, it closes
// it (its workers flush their last pages) and starts the next; row groups
// are committed to the file in order once written, at the latest when more
// than rowGroupsInFlight would be open. With wait (or last) it returns
// only when everything dispatched has been written.
func (w *fileWriter) dispatch(wait, last bool) error {
	if w.failed {
		return fmt.Errorf("lake: %s writer used after an error", w.t.name)
	}
	for i, b := range w.cols {
		if err := w.check(i, b, w.chunk); err != nil {
			return err
		}
	}
	endGroup := last || w.rgRows >= rowGroupRows || w.rgSize+int64(w.rgRows)*8*int64(len(w.t.cols)) >= rowGroupBytes
	if w.chunk > 0 {
		for i, b := range w.cols {
			w.cur.jobs[i] <- colJob{buf: b}
			if last {
				// No chunk follows, so no buffer is taken for one (a
				// fresh one per column and file: ~3 MB per M events).
				w.cols[i] = nil
				continue
			}
			select {
			case w.cols[i] = <-w.free[i]:
			default:
				if w.nbuf[i] < maxColBufs {
					// Room for the rows the file has still to get, when
					// fewer than a chunk's.
					rows := chunkRows
					if left := w.left(); left > 0 {
						rows = min(rows, left)
					}
					w.cols[i] = newColBuf(w.t, i, rows)
					w.nbuf[i]++
				} else {
					w.cols[i] = <-w.free[i]
				}
			}
		}
		w.chunk = 0
	}
	if endGroup && w.rgRows > 0 {
		for i := range w.cur.jobs {
			w.cur.jobs[i] <- colJob{flush: true}
		}
		w.cur.closed = true
		w.cur.rows = int64(w.rgRows)
		w.pending = append(w.pending, w.cur)
		w.cur = nil
		w.rgRows, w.rgSize = 0, 0
	}
	for len(w.pending) > 0 && (wait || last || len(w.pending) >= rowGroupsInFlight) {
		if err := w.commitOldest(); err != nil {
			w.failed = true
			return err
		}
	}
	if w.cur == nil && !last {
		w.cur = w.newRowGroup()
	}
	if wait && w.cur != nil && !last {
		// The chunks of the open row group must be written too.
		for i := range w.cur.jobs {
			w.cur.jobs[i] <- colJob{}
		}
		if err := w.cur.collect(); err != nil {
			w.failed = true
			return err
		}
	}
	return nil
}

// left is how many more rows the file expects (its row hint less the rows
// it has), 0 once it has them all.
func (w *fileWriter) left() int { return max(w.hint-int(w.rows), 0) }

// check reports a chunk buffer of column i that does not hold rows values
// or holds a null in a REQUIRED column.
func (w *fileWriter) check(i int, b *colBuf, rows int) error {
	if b.n != rows || b.typedLen(w.t.cols[i].kind) != rows {
		return fmt.Errorf("lake: %s column %s has %d values for %d rows (%d buffered)", w.t.name, w.t.cols[i].name, b.n, rows, b.typedLen(w.t.cols[i].kind))
	}
	if w.def[i] == 0 && len(b.null) > 0 {
		return fmt.Errorf("lake: %s column %s is required but got a null", w.t.name, w.t.cols[i].name)
	}
	return nil
}

// fillRows adds n rows a chunk at a time with fill, which sets every
// column of the chunk's rows in one pass over them instead of one setter
// call per value; the chunks are cut, checked and handed to the workers as
// endRow does, so the file is the same as the one the setters would write.
// What fill stores must stay unchanged until flushChunk or finish returns.
// It must start on a chunk boundary (no rows set with the setters pending).
func (w *fileWriter) fillRows(n int, fill rowFill) error {
	if w.chunk != 0 {
		return fmt.Errorf("lake: %s writer filled in bulk in the middle of a chunk", w.t.name)
	}
	for lo := 0; lo < n; {
		hi := min(n, lo+chunkRows)
		w.rgSize += fill(w.cols, lo, hi)
		w.rows += int64(hi - lo)
		w.rgRows += hi - lo
		w.chunk = hi - lo
		if w.chunk < chunkRows {
			return nil // sent by the next flushChunk or finish, as endRow leaves it
		}
		if err := w.dispatch(false, false); err != nil {
			return err
		}
		lo = hi
	}
	return nil
}

// collect waits for one barrier's acknowledgements and returns the first
// error by column.
func (g *rgWriter) collect() error {
	errs := make([]error, len(g.jobs))
	for range g.jobs {
		a := <-g.acks
		errs[a.col] = a.err
	}
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// commitOldest waits for the oldest closed row group, writes it to the
// file and merges its stats.
func (w *fileWriter) commitOldest() error {
	g := w.pending[0]
	w.pending = w.pending[1:]
	err := g.collect()
	g.stop()
	if err != nil {
		return err
	}
	byLeaf := make([]*colfile.Chunk, len(g.chunks))
	for i, c := range g.chunks {
		byLeaf[w.leaf[i]] = c
	}
	if err := w.pf.WriteRowGroup(byLeaf, g.rows); err != nil {
		return fmt.Errorf("write row group: %w", err)
	}
	for i, c := range g.chunks {
		w.stats[i].addChunk(c.Stats())
		c.Reset()
	}
	w.spare = append(w.spare, g.chunks)
	return nil
}

// stop ends the row group's workers; safe to call more than once.
func (g *rgWriter) stop() {
	if g.stopped {
		return
	}
	g.stopped = true
	for _, j := range g.jobs {
		close(j)
	}
	g.workers.Wait()
}

// stop ends every worker; safe to call more than once.
func (w *fileWriter) stop() {
	if w.cur != nil {
		w.cur.stop()
	}
	for _, g := range w.pending {
		g.stop()
	}
}

// dataFile is a written data file, ready for a Delta add action.
type dataFile struct {
	Path  string // relative to the table root
	Size  int64
	Rows  int64
	Stats string // Delta stats JSON
}

// finish closes the file and stores it under dir (a partition directory
// relative to the table root, "" for none) with a fresh name.
func (w *fileWriter) finish(ctx context.Context, st store.Store, dir string) (dataFile, error) {
	f, err := w.stage(st, dir)
	if err != nil {
		return dataFile{}, err
	}
	return f.dataFile, f.publish(ctx, st)
}

// stagedFile is a data file that stage wrote and closed, still in the
// store's temp area (or in a temp file of the writer's own, for a store
// that is not a Stager), not under its key: publish stores it, drop throws
// it away. The publish's fsync is what waits for the disk, so a writer
// that stages ahead of its commit (PrepareBatch) leaves that wait to the
// commit.
type stagedFile struct {
	dataFile
	key    string
	tmp    *os.File
	stager store.Stager
	// parked is the temp file's name while its descriptor is closed
	// (park): a batch of many hour partitions holds one descriptor each
	// otherwise.
	parked string
}

// maxOpenStaged bounds the staged files of one table and batch that keep
// their descriptor; the rest are parked, reopened by name to publish.
const maxOpenStaged = 16

// park closes the staged file's descriptor, keeping the file: publish and
// drop reopen or remove it by name. Its fsync is still publish's (the
// data's dirty pages belong to the file, not the descriptor).
func (f *stagedFile) park() error {
	if f.tmp == nil || f.parked != "" {
		return nil
	}
	name := f.tmp.Name()
	if err := f.tmp.Close(); err != nil {
		_ = os.Remove(name)
		f.tmp = nil
		return fmt.Errorf("park staged file: %w", err)
	}
	f.tmp, f.parked = nil, name
	return nil
}

// unpark reopens a parked file for publish.
func (f *stagedFile) unpark() error {
	if f.parked == "" {
		return nil
	}
	tmp, err := os.OpenFile(f.parked, os.O_RDWR, 0)
	if err != nil {
		_ = os.Remove(f.parked)
		f.parked = ""
		return fmt.Errorf("reopen staged file: %w", err)
	}
	f.tmp, f.parked = tmp, ""
	return nil
}

// stage closes the file and readies it to be stored under dir with a
// fresh name.
func (w *fileWriter) stage(st store.Store, dir string) (*stagedFile, error) {
	defer w.abort()
	if err := w.dispatch(true, true); err != nil {
		return nil, err
	}
	if err := w.pf.Close(); err != nil {
		return nil, fmt.Errorf("close parquet file: %w", err)
	}
	size, err := w.tmp.Seek(0, io.SeekCurrent)
	if err != nil {
		return nil, fmt.Errorf("size temp file: %w", err)
	}
	if w.stager != nil && any(w.stager) != any(st) {
		return nil, fmt.Errorf("lake: %s file staged in another store than %s", w.t.name, st)
	}
	name := "part-" + uuid.NewString() + "." + string(w.t.payload) + ".parquet"
	rel := name
	if dir != "" {
		rel = dir + "/" + name
	}
	f := &stagedFile{dataFile: dataFile{Path: rel, Size: size, Rows: w.rows, Stats: w.statsJSON()}, key: w.t.name + "/" + rel, tmp: w.tmp, stager: w.stager}
	w.tmp = nil // the staged file's now
	return f, nil
}

// publish stores the staged file under its key; it is gone from the temp
// area either way.
func (f *stagedFile) publish(ctx context.Context, st store.Store) error {
	if err := f.unpark(); err != nil {
		return err
	}
	tmp := f.tmp
	f.tmp = nil
	if tmp == nil {
		return fmt.Errorf("lake: %s published twice", f.key)
	}
	if f.stager != nil {
		// Publish closes the file and publishes or removes it.
		if err := f.stager.Publish(ctx, f.key, tmp); err != nil {
			return fmt.Errorf("store data file: %w", err)
		}
		return nil
	}
	defer func() {
		// Errors are moot: the copy is stored or the write failed.
		_ = tmp.Close()
		_ = os.Remove(tmp.Name())
	}()
	if _, err := tmp.Seek(0, io.SeekStart); err != nil {
		return fmt.Errorf("rewind temp file: %w", err)
	}
	if err := st.Put(ctx, f.key, tmp, f.Size); err != nil {
		return fmt.Errorf("store data file: %w", err)
	}
	return nil
}

// drop throws the staged file away unpublished; safe to call more than
// once, and after publish.
func (f *stagedFile) drop() {
	if f.parked != "" {
		_ = os.Remove(f.parked)
		f.parked = ""
	}
	if f.tmp == nil {
		return
	}
	// A stray temp file is harmless (never in a table directory, never
	// *.parquet).
	_ = f.tmp.Close()
	_ = os.Remove(f.tmp.Name())
	f.tmp = nil
}

// release returns the column encoders of the stopped workers' row groups
// to their pool; safe to call more than once.
func (w *fileWriter) release() {
	if w.cur != nil {
		w.spare = append(w.spare, w.cur.chunks)
		w.cur.chunks = nil
	}
	for _, g := range w.pending {
		w.spare = append(w.spare, g.chunks)
		g.chunks = nil
	}
	for _, cs := range w.spare {
		for _, c := range cs {
			c.Release()
		}
	}
	w.spare = nil
}

// abort stops the workers and drops the temp file (staged or not); safe
// to call more than once.
func (w *fileWriter) abort() {
	w.stop()
	w.release()
	if w.tmp == nil {
		return
	}
	// Errors are moot here: the file is being thrown away, and a stray
	// temp file is harmless (never in a table directory, never *.parquet).
	_ = w.tmp.Close()
	_ = os.Remove(w.tmp.Name())
	w.tmp = nil
}

// notNull records k more values set, not null (the null flags are kept for
// OPTIONAL columns only).
func (b *colBuf) notNull(k int) {
	if b.opt {
		for range k {
			b.null = append(b.null, false)
		}
	}
	b.n += k
}
