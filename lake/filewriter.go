package lake

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
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
	chunkRows     = 4096 // rows buffered per column before handing them to parquet-go
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

// fileWriter writes one Parquet data file of a table, columnar underneath
// and without reflection: callers set each column of a row with the typed
// methods (in any order), then call endRow. It keeps the Delta stats as it
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
	vals   [][]parquet.Value
	stats  []colStats
	rows   int64
	rgRows int
	rgSize int64
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
	w.vals = make([][]parquet.Value, n)
	w.stats = make([]colStats, n)
	for i, c := range t.cols {
		lc, ok := sch.Lookup(c.name)
		if !ok {
			w.abort()
			return nil, fmt.Errorf("lake: column %s missing from schema", c.name)
		}
		w.leaf[i] = lc.ColumnIndex
		w.def[i] = lc.MaxDefinitionLevel
		w.cw[i] = all[lc.ColumnIndex]
		w.vals[i] = make([]parquet.Value, 0, chunkRows)
		w.stats[i].kind = c.kind
	}
	return w, nil
}

func (w *fileWriter) long(c int, v int64) {
	w.vals[c] = append(w.vals[c], parquet.Int64Value(v).Level(0, w.def[c], w.leaf[c]))
	w.stats[c].addInt(v)
}

func (w *fileWriter) double(c int, v float64) {
	w.vals[c] = append(w.vals[c], parquet.DoubleValue(v).Level(0, w.def[c], w.leaf[c]))
	w.stats[c].addFloat(v)
}

func (w *fileWriter) boolean(c int, v bool) {
	w.vals[c] = append(w.vals[c], parquet.BooleanValue(v).Level(0, w.def[c], w.leaf[c]))
	w.stats[c].addBool(v)
}

// bytes stores b without copying it until the chunk is handed to parquet-go
// (which copies), so b must stay unchanged until flushChunk or finish.
func (w *fileWriter) bytes(c int, b []byte) {
	w.vals[c] = append(w.vals[c], parquet.ByteArrayValue(b).Level(0, w.def[c], w.leaf[c]))
	w.stats[c].addBytes(b)
	w.rgSize += int64(len(b))
}

// str is bytes for a string, without copying it.
func (w *fileWriter) str(c int, s string) {
	w.bytes(c, unsafe.Slice(unsafe.StringData(s), len(s)))
}

func (w *fileWriter) null(c int) {
	w.vals[c] = append(w.vals[c], parquet.NullValue().Level(0, 0, w.leaf[c]))
	w.stats[c].nulls++
}

// endRow completes a row; every column must have been set exactly once.
func (w *fileWriter) endRow() error {
	w.rows++
	w.rgRows++
	if len(w.vals[0]) >= chunkRows {
		return w.flushChunk()
	}
	return nil
}

func (w *fileWriter) flushChunk() error {
	for i, v := range w.vals {
		if len(v) != len(w.vals[0]) {
			return fmt.Errorf("lake: %s column %s has %d values for %d rows", w.t.name, w.t.cols[i].name, len(v), len(w.vals[0]))
		}
	}
	for i, v := range w.vals {
		if len(v) == 0 {
			continue
		}
		if _, err := w.cw[i].WriteRowValues(v); err != nil {
			return fmt.Errorf("write column %s: %w", w.t.cols[i].name, err)
		}
		w.vals[i] = v[:0]
	}
	if w.rgRows >= rowGroupRows || w.rgSize+int64(w.rgRows)*8*int64(len(w.t.cols)) >= rowGroupBytes {
		if err := w.pw.Flush(); err != nil {
			return fmt.Errorf("flush row group: %w", err)
		}
		w.rgRows, w.rgSize = 0, 0
	}
	return nil
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
	if err := w.flushChunk(); err != nil {
		return dataFile{}, err
	}
	err := w.pw.Close()
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

// abort drops the temp file; safe to call more than once.
func (w *fileWriter) abort() {
	if w.tmp == nil {
		return
	}
	// Errors are moot here: the file is being thrown away, and a stray
	// temp file outside the lake is harmless.
	_ = w.tmp.Close()
	_ = os.Remove(w.tmp.Name())
	w.tmp = nil
}
