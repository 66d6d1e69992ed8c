package lateness

import (
	"bufio"
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
)

// row is what the replay needs of one raw event, in 44 bytes on disk.
// Source and file are ids into the sorter's name table; group into the
// report's groups.
type row struct {
	arrival, event, offset, batch int64
	source, file, group           uint32
}

const rowBytes = 4*8 + 3*4

// sorter puts rows in arrival order (arrival_time, then source, file,
// offset, compared as strings) with bounded memory: an external merge sort
// that keeps the order the rows already have.
//
// Rows are packed into blocks of at most blockRows rows, each row as
// varint deltas from the row before it (arrival; event time from arrival;
// offset; source, file, batch and group only where they change): about 10
// bytes a row (at most 56) where a 48-byte struct was, in memory written
// once and reused. The scan gives rows nearly in arrival order (a lake
// file is one micro-batch, its rows in read order: 35 descents in
// bench.sh's 1M-row lake), so a block is cut into the sorted runs it holds
// rather than sorted; a block of more than maxRuns runs is sorted whole
// instead. At most chunkRows rows are held: then the runs are merged into
// a temporary file (44 bytes a row) and the blocks reused. The end merges
// the spilled runs and those still in memory. Memory is chunkRows packed
// rows, a block of row structs (3 MiB) once a block is sorted whole, and a
// 32 KiB read buffer per spilled file.
//
// Before, rows were 48-byte structs in 64k-row blocks, each sorted: over a
// 1M-row lake the blocks' fresh pages (12,000 page faults, ~15 µs each on
// a virtual machine) and the sorting took half of the report's CPU time.
type sorter struct {
	dir       string
	chunkRows int
	blockRows int      // rows a block holds: blockRows, at most chunkRows
	blocks    []*block // blocks in memory, the last one filling
	spare     []*block // emptied blocks, for reuse
	held      int      // rows in blocks
	scratch   []row    // for sorting a block of many runs
	files     []*os.File
	names     []string // source and file names by id
	ids       map[string]uint32
	last      [2]string      // the last two names looked up, and their ids:
	lastID    [2]uint32      // rows come in runs of one source and file
	lastRow   map[fileID]row // each file's last row in arrival order (frontier.go)
	curFile   fileID         // noteLast's current run of one file
	curRow    row
	hasCur    bool
}

// blockRows is the most rows a sorter block holds; maxRuns the most
// sorted runs a block keeps before it is sorted whole.
const (
	blockRows = 1 << 16
	maxRuns   = 32
)

// block holds rows packed (see sorter) as sorted runs: runs[i] is where
// run i starts in buf. Each run's deltas start from the zero row.
type block struct {
	buf  []byte
	runs []int
	rows int
	prev row // the last row packed
}

func newSorter(dir string, chunkRows int) *sorter {
	return &sorter{dir: dir, chunkRows: chunkRows, blockRows: min(blockRows, max(chunkRows, 1)), ids: map[string]uint32{}}
}

// id interns a source (slot 0) or file (slot 1) name.
func (s *sorter) id(slot int, name string) uint32 {
	if name == s.last[slot] && len(s.names) > 0 {
		return s.lastID[slot]
	}
	id, ok := s.ids[name]
	if !ok {
		id = uint32(len(s.names))
		s.names = append(s.names, name)
		s.ids[name] = id
	}
	s.last[slot], s.lastID[slot] = name, id
	return id
}

func (s *sorter) compare(a, b *row) int {
	if c := cmp.Compare(a.arrival, b.arrival); c != 0 {
		return c
	}
	if a.source != b.source {
		if c := cmp.Compare(s.names[a.source], s.names[b.source]); c != 0 {
			return c
		}
	}
	if a.file != b.file {
		if c := cmp.Compare(s.names[a.file], s.names[b.file]); c != 0 {
			return c
		}
	}
	return cmp.Compare(a.offset, b.offset)
}

func (s *sorter) add(r row) error {
	s.noteLast(r)
	n := len(s.blocks)
	if n == 0 || s.blocks[n-1].rows == s.blockRows {
		if n > 0 {
			s.seal(s.blocks[n-1])
		}
		if s.held >= s.chunkRows {
			if err := s.spill(); err != nil {
				return err
			}
		}
		s.blocks = append(s.blocks, s.newBlock())
		n = len(s.blocks)
	}
	b := s.blocks[n-1]
	if b.rows == 0 || s.compare(&r, &b.prev) < 0 {
		b.runs = append(b.runs, len(b.buf))
		b.prev = row{}
	}
	b.buf = packRow(b.buf, &b.prev, &r)
	b.prev = r
	b.rows++
	s.held++
	return nil
}

// Flags of a packed row: which of the rarely changing fields follow.
const (
	packSource = 1 << iota
	packFile
	packBatch
	packGroup
)

// packRow appends r to buf as deltas from prev.
func packRow(buf []byte, prev, r *row) []byte {
	var flags byte
	if r.source != prev.source {
		flags |= packSource
	}
	if r.file != prev.file {
		flags |= packFile
	}
	if r.batch != prev.batch {
		flags |= packBatch
	}
	if r.group != prev.group {
		flags |= packGroup
	}
	buf = append(buf, flags)
	// Differences wrap around in two's complement and unpack exactly.
	buf = binary.AppendVarint(buf, r.arrival-prev.arrival)
	buf = binary.AppendVarint(buf, r.event-r.arrival)
	buf = binary.AppendVarint(buf, r.offset-prev.offset)
	if flags&packSource != 0 {
		buf = binary.AppendUvarint(buf, uint64(r.source))
	}
	if flags&packFile != 0 {
		buf = binary.AppendUvarint(buf, uint64(r.file))
	}
	if flags&packBatch != 0 {
		buf = binary.AppendVarint(buf, r.batch-prev.batch)
	}
	if flags&packGroup != 0 {
		buf = binary.AppendUvarint(buf, uint64(r.group))
	}
	return buf
}

// unpackRow reads the row after r from buf, into r; it returns the bytes
// read.
func unpackRow(buf []byte, r *row) int {
	flags := buf[0]
	n := 1
	v, k := binary.Varint(buf[n:])
	r.arrival += v
	n += k
	v, k = binary.Varint(buf[n:])
	r.event = r.arrival + v
	n += k
	v, k = binary.Varint(buf[n:])
	r.offset += v
	n += k
	if flags&packSource != 0 {
		u, k := binary.Uvarint(buf[n:])
		r.source = uint32(u)
		n += k
	}
	if flags&packFile != 0 {
		u, k := binary.Uvarint(buf[n:])
		r.file = uint32(u)
		n += k
	}
	if flags&packBatch != 0 {
		v, k := binary.Varint(buf[n:])
		r.batch += v
		n += k
	}
	if flags&packGroup != 0 {
		u, k := binary.Uvarint(buf[n:])
		r.group = uint32(u)
		n += k
	}
	return n
}

// newBlock returns an empty block, a reused one if there is one.
func (s *sorter) newBlock() *block {
	if k := len(s.spare); k > 0 {
		b := s.spare[k-1]
		s.spare = s.spare[:k-1]
		b.buf, b.runs, b.rows, b.prev = b.buf[:0], b.runs[:0], 0, row{}
		return b
	}
	// About 10 bytes a row in arrival order; pages never written are
	// never touched.
	return &block{buf: make([]byte, 0, s.blockRows*12)}
}

// seal sorts a full block of more than maxRuns runs whole.
func (s *sorter) seal(b *block) {
	if len(b.runs) <= maxRuns {
		return
	}
	if s.scratch == nil {
		s.scratch = make([]row, 0, s.blockRows)
	}
	s.scratch = s.scratch[:0]
	for _, rn := range s.blockRuns(b) {
		for r := rn.next(); r != nil; r = rn.next() {
			s.scratch = append(s.scratch, *r)
		}
	}
	slices.SortFunc(s.scratch, func(x, y row) int { return s.compare(&x, &y) })
	b.buf, b.runs, b.prev = b.buf[:0], append(b.runs[:0], 0), row{}
	for i := range s.scratch {
		b.buf = packRow(b.buf, &b.prev, &s.scratch[i])
		b.prev = s.scratch[i]
	}
}

// blockRuns returns a cursor per run of b.
func (s *sorter) blockRuns(b *block) []sortedRun {
	runs := make([]sortedRun, 0, len(b.runs))
	for i, start := range b.runs {
		end := len(b.buf)
		if i+1 < len(b.runs) {
			end = b.runs[i+1]
		}
		runs = append(runs, &packedRun{buf: b.buf[start:end]})
	}
	return runs
}

// memRuns returns a cursor per run in memory.
func (s *sorter) memRuns() []sortedRun {
	var runs []sortedRun
	for _, b := range s.blocks {
		s.seal(b)
		runs = append(runs, s.blockRuns(b)...)
	}
	return runs
}

// spill merges the runs in memory into a temporary file and frees the
// blocks for reuse.
func (s *sorter) spill() error {
	if s.held == 0 {
		return nil
	}
	f, err := os.CreateTemp(s.dir, "tidemark-lateness-*.rows")
	if err != nil {
		return fmt.Errorf("spill sorted rows: %w", err)
	}
	s.files = append(s.files, f)
	w := bufio.NewWriterSize(f, 1<<16)
	var b [rowBytes]byte
	err = s.merge(s.memRuns(), func(r *row) error {
		encodeRow(b[:], r)
		_, err := w.Write(b[:])
		return err
	})
	if err == nil {
		err = w.Flush()
	}
	if err != nil {
		return fmt.Errorf("spill sorted rows: %w", err)
	}
	s.spare = append(s.spare, s.blocks...)
	s.blocks, s.held = s.blocks[:0], 0
	return nil
}

func encodeRow(b []byte, r *row) {
	binary.LittleEndian.PutUint64(b[0:], uint64(r.arrival))
	binary.LittleEndian.PutUint64(b[8:], uint64(r.event))
	binary.LittleEndian.PutUint64(b[16:], uint64(r.offset))
	binary.LittleEndian.PutUint64(b[24:], uint64(r.batch))
	binary.LittleEndian.PutUint32(b[32:], r.source)
	binary.LittleEndian.PutUint32(b[36:], r.file)
	binary.LittleEndian.PutUint32(b[40:], r.group)
}

func decodeRow(b []byte) row {
	return row{
		arrival: int64(binary.LittleEndian.Uint64(b[0:])),
		event:   int64(binary.LittleEndian.Uint64(b[8:])),
		offset:  int64(binary.LittleEndian.Uint64(b[16:])),
		batch:   int64(binary.LittleEndian.Uint64(b[24:])),
		source:  binary.LittleEndian.Uint32(b[32:]),
		file:    binary.LittleEndian.Uint32(b[36:]),
		group:   binary.LittleEndian.Uint32(b[40:]),
	}
}

// each calls fn with every row in order: a merge of the spilled runs and
// the runs still in memory.
func (s *sorter) each(fn func(*row) error) error {
	var runs []sortedRun
	for _, f := range s.files {
		if _, err := f.Seek(0, io.SeekStart); err != nil {
			return fmt.Errorf("merge sorted rows: %w", err)
		}
		runs = append(runs, &fileRun{r: bufio.NewReaderSize(f, 32<<10)})
	}
	runs = append(runs, s.memRuns()...)
	return s.merge(runs, fn)
}

// merge calls fn with the rows of the sorted runs in order. The runs
// mostly follow one another (a lake's files in commit order), so the run
// in front keeps going while its next row is not after the heads of the
// others: two comparisons a row, without moving the heap.
func (s *sorter) merge(runs []sortedRun, fn func(*row) error) error {
	var h []cursor // a min-heap by the current row
	for _, rn := range runs {
		r := rn.next()
		if err := rn.err(); err != nil {
			return err
		}
		if r != nil {
			h = append(h, cursor{run: rn, cur: r})
		}
	}
	less := func(i, j int) bool { return s.compare(h[i].cur, h[j].cur) < 0 }
	down := func(i int) {
		for {
			l := 2*i + 1
			if l >= len(h) {
				return
			}
			j := l
			if r := l + 1; r < len(h) && less(r, l) {
				j = r
			}
			if !less(j, i) {
				return
			}
			h[i], h[j] = h[j], h[i]
			i = j
		}
	}
	for i := len(h)/2 - 1; i >= 0; i-- {
		down(i)
	}
	for len(h) > 0 {
		c := &h[0]
		if err := fn(c.cur); err != nil {
			return err
		}
		r := c.run.next()
		if err := c.run.err(); err != nil {
			return err
		}
		if r == nil {
			h[0] = h[len(h)-1]
			h = h[:len(h)-1]
		} else {
			c.cur = r
		}
		down(0)
	}
	return nil
}

// close removes the spilled files.
func (s *sorter) close() error {
	var errs []error
	for _, f := range s.files {
		errs = append(errs, f.Close(), os.Remove(f.Name()))
	}
	s.files = nil
	return errors.Join(errs...)
}

// sortedRun is one sorted sequence of rows; next returns nil at its end
// or on an error, which err then returns. The row stays valid until the
// next call.
type sortedRun interface {
	next() *row
	err() error
}

// packedRun reads one run of a block.
type packedRun struct {
	buf []byte
	cur row
}

func (p *packedRun) next() *row {
	if len(p.buf) == 0 {
		return nil
	}
	p.buf = p.buf[unpackRow(p.buf, &p.cur):]
	return &p.cur
}

func (p *packedRun) err() error { return nil }

// fileRun reads one spilled run.
type fileRun struct {
	r   *bufio.Reader
	b   [rowBytes]byte
	cur row
	e   error
}

func (c *fileRun) next() *row {
	if _, err := io.ReadFull(c.r, c.b[:]); err != nil {
		if err != io.EOF {
			c.e = fmt.Errorf("merge sorted rows: %w", err)
		}
		return nil
	}
	c.cur = decodeRow(c.b[:])
	return &c.cur
}

func (c *fileRun) err() error { return c.e }

// cursor is a run and its current row.
type cursor struct {
	run sortedRun
	cur *row
}
