package lake

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"sync"
	"unsafe"

	"github.com/google/uuid"
	"github.com/parquet-go/parquet-go"

	"tidemark/lake/store"
)

// Row-group and page bounds. A row group is flushed to the temp file when it
// reaches either limit, so a writer holds at most one row group in memory.
const (
	rowGroupRows  = 128 << 10
	rowGroupBytes = 64 << 20
	chunkRows     = 16 << 10 // rows buffered per column before handing them to parquet-go
	dictMaxBytes  = 1 << 20
)

// writerOptions are the settings SPEC §4.2 requires, each set explicitly.
func writerOptions(t *table, s *parquet.Schema) []parquet.WriterOption {
	return []parquet.WriterOption{
		s,
		parquet.Compression(t.codec),
		parquet.DataPageVersion(1),
		parquet.DictionaryMaxBytes(dictMaxBytes),
		parquet.PageBufferSize(1 << 20),
		parquet.WriteBufferSize(1 << 20),
		parquet.CreatedBy("tidemark", "0", ""),
	}
}

// colBuf buffers one column's values of a chunk, typed, until they are
// handed to parquet-go in bulk. Only the slice for the column's kind is
// used; null is kept for OPTIONAL columns only.
type colBuf struct {
	ints   []int64
	floats []float64
	bools  []bool
	bytes  [][]byte
	null   []bool
	n      int // values set in this chunk
}

func newColBuf(c column) *colBuf {
	b := &colBuf{}
	switch c.kind {
	case kindTimestamp, kindLong:
		b.ints = make([]int64, 0, chunkRows)
	case kindDouble:
		b.floats = make([]float64, 0, chunkRows)
	case kindBool:
		b.bools = make([]bool, 0, chunkRows)
	default:
		b.bytes = make([][]byte, 0, chunkRows)
	}
	if c.optional {
		b.null = make([]bool, 0, chunkRows)
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

// colAck answers a barrier with the column's first error, if any.
type colAck struct {
	col int
	err error
}

// fileWriter writes one Parquet data file of a table, columnar underneath
// and without reflection: callers set each column of a row with the typed
// methods (in any order), then call endRow. Values are buffered per column
// in typed slices, a chunk at a time; each full chunk goes to its column's
// worker goroutine, which turns it into parquet values and writes it (that
// is where pages are encoded and compressed) while the caller fills the
// next chunk. A column's bytes depend only on its values, in order, so the
// file is the same whatever the scheduling. It keeps the Delta stats as it
// goes. The file is written to a temp file outside the lake and stored with
// store.Put by finish.
type fileWriter struct {
	t      *table
	tmp    *os.File
	buf    *bufio.Writer
	pw     *parquet.Writer
	cw     []*parquet.ColumnWriter // by table column index
	leaf   []int
	def    []int // max definition level: 1 for OPTIONAL columns
	cols   []*colBuf
	stats  []colStats // written by the column's worker
	rows   int64
	chunk  int // rows in the current chunk
	rgRows int
	rgSize int64

	jobs    []chan colJob  // by column
	free    []chan *colBuf // by column: emptied chunks
	nbuf    []int          // by column: buffers allocated
	acks    chan colAck
	workers sync.WaitGroup
	stopped bool
}

func newFileWriter(t *table) (*fileWriter, error) {
	tmp, err := os.CreateTemp("", "tidemark-*.part.tmp")
	if err != nil {
		return nil, fmt.Errorf("create temp data file: %w", err)
	}
	sch := t.parquetSchema()
	w := &fileWriter{t: t, tmp: tmp, buf: bufio.NewWriterSize(tmp, 1<<20)}
	w.pw = parquet.NewWriter(w.buf, writerOptions(t, sch)...)
	all := w.pw.ColumnWriters()
	n := len(t.cols)
	w.cw = make([]*parquet.ColumnWriter, n)
	w.leaf = make([]int, n)
	w.def = make([]int, n)
	w.cols = make([]*colBuf, n)
	w.stats = make([]colStats, n)
	for i, c := range t.cols {
		lc, ok := sch.Lookup(c.name)
		if !ok {
			w.stopped = true
			w.abort()
			return nil, fmt.Errorf("lake: column %s missing from schema", c.name)
		}
		w.leaf[i] = lc.ColumnIndex
		w.def[i] = lc.MaxDefinitionLevel
		w.cw[i] = all[lc.ColumnIndex]
		w.stats[i].kind = c.kind
		w.cols[i] = newColBuf(c)
	}
	w.jobs = make([]chan colJob, n)
	w.free = make([]chan *colBuf, n)
	w.nbuf = make([]int, n)
	w.acks = make(chan colAck, n)
	for i := range n {
		w.jobs[i] = make(chan colJob, chunksInFlight)
		w.free[i] = make(chan *colBuf, chunksInFlight+1)
		w.nbuf[i] = 1
		w.workers.Go(func() { w.work(i) })
	}
	return w, nil
}

// work is column i's worker: it writes the chunks in order and answers
// barriers. After an error it only recycles chunks, and reports the error
// at the next barrier.
func (w *fileWriter) work(i int) {
	var err error
	var vals []parquet.Value
	for j := range w.jobs[i] {
		if j.buf != nil {
			if err == nil {
				vals, err = w.writeColumn(i, j.buf, vals)
			}
			j.buf.reset()
			w.free[i] <- j.buf
			continue
		}
		if j.flush && err == nil {
			err = w.cw[i].Flush()
		}
		w.acks <- colAck{i, err}
	}
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

// bytes stores b without copying it until its chunk has been handed to
// parquet-go (which copies), so b must stay unchanged until flushChunk or
// finish returns.
func (w *fileWriter) bytes(c int, b []byte) {
	w.cols[c].bytes = append(w.cols[c].bytes, b)
	w.set(c, false)
	w.rgSize += int64(len(b))
}

// str is bytes for a string, without copying it.
func (w *fileWriter) str(c int, s string) {
	w.bytes(c, unsafe.Slice(unsafe.StringData(s), len(s)))
}

func (w *fileWriter) null(c int) {
	b := w.cols[c]
	switch w.t.cols[c].kind {
	case kindTimestamp, kindLong:
		b.ints = append(b.ints, 0)
	case kindDouble:
		b.floats = append(b.floats, 0)
	case kindBool:
		b.bools = append(b.bools, false)
	default:
		b.bytes = append(b.bytes, nil)
	}
	w.set(c, true)
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

// flushChunk hands the buffered values to parquet-go (which copies them)
// and waits until it has them, so the bytes passed to the writer may
// change afterwards.
func (w *fileWriter) flushChunk() error { return w.dispatch(true, false) }

// dispatch sends the current chunk of every column to the workers. When
// the row group is full, or last is set, it also waits for them to write
// everything and flush their last pages, then ends the row group; with
// wait it waits for the chunk to be written either way.
func (w *fileWriter) dispatch(wait, last bool) error {
	if w.stopped {
		return fmt.Errorf("lake: %s writer used after an error", w.t.name)
	}
	for i, b := range w.cols {
		if b.n != w.chunk {
			return fmt.Errorf("lake: %s column %s has %d values for %d rows", w.t.name, w.t.cols[i].name, b.n, w.chunk)
		}
		if w.def[i] == 0 && len(b.null) > 0 {
			return fmt.Errorf("lake: %s column %s is required but got a null", w.t.name, w.t.cols[i].name)
		}
	}
	endGroup := last || w.rgRows >= rowGroupRows || w.rgSize+int64(w.rgRows)*8*int64(len(w.t.cols)) >= rowGroupBytes
	if w.chunk > 0 {
		for i, b := range w.cols {
			w.jobs[i] <- colJob{buf: b}
			select {
			case w.cols[i] = <-w.free[i]:
			default:
				if w.nbuf[i] <= chunksInFlight {
					w.cols[i] = newColBuf(w.t.cols[i])
					w.nbuf[i]++
				} else {
					w.cols[i] = <-w.free[i]
				}
			}
		}
		w.chunk = 0
	}
	if !wait && !endGroup {
		return nil
	}
	if err := w.barrier(endGroup); err != nil {
		return err
	}
	if endGroup {
		if err := w.pw.Flush(); err != nil {
			return fmt.Errorf("flush row group: %w", err)
		}
		w.rgRows, w.rgSize = 0, 0
	}
	return nil
}

// barrier waits until every worker has written its queued chunks (and
// flushed its last page, with flush) and returns the first error by column.
func (w *fileWriter) barrier(flush bool) error {
	for i := range w.jobs {
		w.jobs[i] <- colJob{flush: flush}
	}
	errs := make([]error, len(w.jobs))
	for range w.jobs {
		a := <-w.acks
		errs[a.col] = a.err
	}
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// stop ends the workers; safe to call more than once.
func (w *fileWriter) stop() {
	if w.stopped {
		return
	}
	w.stopped = true
	for _, j := range w.jobs {
		close(j)
	}
	w.workers.Wait()
}

// writeColumn turns a chunk of column i into parquet values (in vals, a
// reused scratch it returns), keeps the column's stats and writes it to the
// column writer. Values are built in place with the inlinable setters:
// Value.Level copies the value twice and was the writer's largest cost.
func (w *fileWriter) writeColumn(i int, b *colBuf, vals []parquet.Value) ([]parquet.Value, error) {
	st := &w.stats[i]
	def, leaf := w.def[i], w.leaf[i]
	opt := def > 0
	if cap(vals) < b.n {
		vals = make([]parquet.Value, b.n, max(b.n, chunkRows))
	}
	vals = vals[:b.n]
	nullValue := parquet.NullValue().Level(0, 0, leaf)
	switch w.t.cols[i].kind {
	case kindTimestamp, kindLong:
		for j, v := range b.ints {
			if opt && b.null[j] {
				vals[j] = nullValue
				st.nulls++
				continue
			}
			vals[j] = parquet.Int64Value(v)
			vals[j].SetDefinitionLevel(def)
			vals[j].SetColumnIndex(leaf)
			st.addInt(v)
		}
	case kindDouble:
		for j, v := range b.floats {
			if opt && b.null[j] {
				vals[j] = nullValue
				st.nulls++
				continue
			}
			vals[j] = parquet.DoubleValue(v)
			vals[j].SetDefinitionLevel(def)
			vals[j].SetColumnIndex(leaf)
			st.addFloat(v)
		}
	case kindBool:
		for j, v := range b.bools {
			if opt && b.null[j] {
				vals[j] = nullValue
				st.nulls++
				continue
			}
			vals[j] = parquet.BooleanValue(v)
			vals[j].SetDefinitionLevel(def)
			vals[j].SetColumnIndex(leaf)
		}
	default:
		var prev []byte
		seen := false
		for j, v := range b.bytes {
			if opt && b.null[j] {
				vals[j] = nullValue
				st.nulls++
				continue
			}
			vals[j] = parquet.ByteArrayValue(v)
			vals[j].SetDefinitionLevel(def)
			vals[j].SetColumnIndex(leaf)
			// Repeated strings (source, file, status) share their bytes:
			// skip the stats comparison for the same value again.
			if !seen || len(v) != len(prev) || unsafe.SliceData(v) != unsafe.SliceData(prev) {
				st.addBytes(v)
				prev, seen = v, true
			}
		}
	}
	_, err := w.cw[i].WriteRowValues(vals)
	clear(vals)
	if err != nil {
		return vals[:0], fmt.Errorf("write column %s: %w", w.t.cols[i].name, err)
	}
	return vals[:0], nil
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
	defer w.abort()
	err := w.dispatch(true, true)
	w.stop()
	if err != nil {
		return dataFile{}, err
	}
	err = w.pw.Close()
	if err == nil {
		err = w.buf.Flush()
	}
	if err != nil {
		return dataFile{}, fmt.Errorf("close parquet file: %w", err)
	}
	size, err := w.tmp.Seek(0, io.SeekCurrent)
	if err != nil {
		return dataFile{}, fmt.Errorf("size temp file: %w", err)
	}
	if _, err := w.tmp.Seek(0, io.SeekStart); err != nil {
		return dataFile{}, fmt.Errorf("rewind temp file: %w", err)
	}
	name := "part-" + uuid.NewString() + ".zstd.parquet"
	rel := name
	if dir != "" {
		rel = dir + "/" + name
	}
	if err := st.Put(ctx, w.t.name+"/"+rel, w.tmp, size); err != nil {
		return dataFile{}, fmt.Errorf("store data file: %w", err)
	}
	return dataFile{Path: rel, Size: size, Rows: w.rows, Stats: w.statsJSON()}, nil
}

// abort stops the workers and drops the temp file; safe to call more
// than once.
func (w *fileWriter) abort() {
	w.stop()
	if w.tmp == nil {
		return
	}
	// Errors are moot here: the file is being thrown away, and a stray
	// temp file outside the lake is harmless.
	_ = w.tmp.Close()
	_ = os.Remove(w.tmp.Name())
	w.tmp = nil
}
