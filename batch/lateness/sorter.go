package lateness

import (
	"bufio"
	"cmp"
	"container/heap"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"sync"
	"unsafe"
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
// offset, compared as strings) with bounded memory: an external merge sort.
// Rows gather in blocks of blockRows, each sorted when full, at most
// chunkRows rows in all; then the blocks are merged into a temporary file
// (a sorted run) and reused for the next rows. The end merges the runs and
// the blocks still in memory. Memory is chunkRows rows plus a 32 KiB read
// buffer per spilled run.
//
// Blocks rather than one growing slice: appending 1M rows to a slice
// copies each row about twice as it doubles, into memory touched for the
// first time each time (a page fault per 4 KiB): 0.8 of the report's 2.1
// CPU-seconds over a 1M-row lake. A block is written once and reused.
type sorter struct {
	dir       string
	chunkRows int
	blocks    [][]row // full blocks, each sorted, then the one filling
	spare     [][]row // emptied blocks, for reuse
	held      int     // rows in blocks
	files     []*os.File
	names     []string // source and file names by id
	ids       map[string]uint32
	last      [2]string      // the last two names looked up, and their ids:
	lastID    [2]uint32      // rows come in runs of one source and file
	lastRow   map[fileID]row // each file's last row in arrival order (frontier.go)
	curFile   fileID         // noteLast's current run of one file
	curRow    row
	hasCur    bool
	sorting   sync.WaitGroup // blocks being sorted or made ready in the background
	ready     chan []row     // the next fresh block (newBlock)
}

// blockRows is the size of a sorter block: 3 MiB.
const blockRows = 1 << 16

func newSorter(dir string, chunkRows int) *sorter {
	return &sorter{dir: dir, chunkRows: chunkRows, ids: map[string]uint32{}}
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

func (s *sorter) compare(a, b *row) int { return compareRows(s.names, a, b) }

// compareRows orders rows with names as the name table: rows name only
// ids below len(names), and names only grows, so a block sorting in the
// background reads a copy of the slice header while add appends.
func compareRows(names []string, a, b *row) int {
	if c := cmp.Compare(a.arrival, b.arrival); c != 0 {
		return c
	}
	if a.source != b.source {
		if c := cmp.Compare(names[a.source], names[b.source]); c != 0 {
			return c
		}
	}
	if a.file != b.file {
		if c := cmp.Compare(names[a.file], names[b.file]); c != 0 {
			return c
		}
	}
	return cmp.Compare(a.offset, b.offset)
}

func (s *sorter) add(r row) error {
	s.noteLast(r)
	n := len(s.blocks)
	if n == 0 || len(s.blocks[n-1]) == cap(s.blocks[n-1]) {
		switch {
		case s.held >= s.chunkRows: // spill sorts the last block itself
			if err := s.spill(); err != nil {
				return err
			}
		case n > 0: // sort the full block on the other core while the scan goes on
			b, names := s.blocks[n-1], s.names
			s.sorting.Go(func() { sortRows(names, b) })
		}
		s.blocks = append(s.blocks, s.newBlock())
		n = len(s.blocks)
	}
	s.blocks[n-1] = append(s.blocks[n-1], r)
	s.held++
	return nil
}

// newBlock returns an empty block, a reused one if there is one. The
// first block of a small input is no bigger than chunkRows.
//
// A new block is made ready on the other core: allocated and each of its
// pages written once, so the page faults of fresh memory (~15 µs each per
// 4 KiB on a virtual machine, 12,000 of them for 1M rows) are not paid on
// the scan's goroutine. The first block of an input is made here.
func (s *sorter) newBlock() []row {
	if k := len(s.spare); k > 0 {
		b := s.spare[k-1]
		s.spare = s.spare[:k-1]
		return b[:0]
	}
	size := min(blockRows, max(s.chunkRows, 1))
	var b []row
	if s.ready != nil {
		b = <-s.ready
	} else {
		b = make([]row, 0, size)
		s.ready = make(chan []row, 1)
	}
	s.sorting.Go(func() { s.ready <- touchedBlock(size) })
	return b
}

// touchedBlock is an empty block whose pages are all in memory.
func touchedBlock(size int) []row {
	b := make([]row, size)
	const perPage = 4096 / int(unsafe.Sizeof(row{}))
	for i := 0; i < len(b); i += perPage {
		b[i].arrival = 1
	}
	return b[:0]
}

func sortRows(names []string, b []row) {
	slices.SortFunc(b, func(x, y row) int { return compareRows(names, &x, &y) })
}

// spill merges the blocks in memory into a temporary file and frees them
// for reuse.
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

// memRuns sorts the last block (the others were handed to the background
// when full), waits for the background, and returns a run per block.
func (s *sorter) memRuns() []sortedRun {
	if n := len(s.blocks); n > 0 {
		sortRows(s.names, s.blocks[n-1])
	}
	s.sorting.Wait()
	runs := make([]sortedRun, 0, len(s.blocks))
	for _, b := range s.blocks {
		if len(b) > 0 {
			runs = append(runs, &memRun{rows: b})
		}
	}
	return runs
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
// the blocks still in memory.
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

// merge calls fn with the rows of the sorted runs in order.
func (s *sorter) merge(runs []sortedRun, fn func(*row) error) error {
	if len(runs) == 1 { // no heap for one run (a small input)
		for {
			r, err := runs[0].next()
			if r == nil || err != nil {
				return err
			}
			if err := fn(r); err != nil {
				return err
			}
		}
	}
	h := &mergeHeap{s: s}
	for _, rn := range runs {
		r, err := rn.next()
		if err != nil {
			return err
		}
		if r != nil {
			h.cs = append(h.cs, cursor{run: rn, cur: r})
		}
	}
	heap.Init(h)
	for len(h.cs) > 0 {
		c := &h.cs[0]
		if err := fn(c.cur); err != nil {
			return err
		}
		r, err := c.run.next()
		if err != nil {
			return err
		}
		if r != nil {
			c.cur = r
			heap.Fix(h, 0)
		} else {
			heap.Pop(h)
		}
	}
	return nil
}

// close removes the spilled files.
func (s *sorter) close() error {
	s.sorting.Wait()
	var errs []error
	for _, f := range s.files {
		errs = append(errs, f.Close(), os.Remove(f.Name()))
	}
	s.files = nil
	return errors.Join(errs...)
}

// sortedRun is one sorted sequence of rows; next returns nil at its end. The row
// stays valid until the next call.
type sortedRun interface {
	next() (*row, error)
}

// memRun is a sorted block.
type memRun struct {
	rows []row
	i    int
}

func (m *memRun) next() (*row, error) {
	if m.i == len(m.rows) {
		return nil, nil
	}
	m.i++
	return &m.rows[m.i-1], nil
}

// fileRun reads one spilled run.
type fileRun struct {
	r   *bufio.Reader
	b   [rowBytes]byte
	cur row
}

func (c *fileRun) next() (*row, error) {
	if _, err := io.ReadFull(c.r, c.b[:]); err != nil {
		if err == io.EOF {
			return nil, nil
		}
		return nil, fmt.Errorf("merge sorted rows: %w", err)
	}
	c.cur = decodeRow(c.b[:])
	return &c.cur, nil
}

// cursor is a run and its current row.
type cursor struct {
	run sortedRun
	cur *row
}

// mergeHeap orders the cursors by their current row.
type mergeHeap struct {
	s  *sorter
	cs []cursor
}

func (h *mergeHeap) Len() int           { return len(h.cs) }
func (h *mergeHeap) Less(i, j int) bool { return h.s.compare(h.cs[i].cur, h.cs[j].cur) < 0 }
func (h *mergeHeap) Swap(i, j int)      { h.cs[i], h.cs[j] = h.cs[j], h.cs[i] }
func (h *mergeHeap) Push(x any)         { h.cs = append(h.cs, x.(cursor)) }
func (h *mergeHeap) Pop() any {
	c := h.cs[len(h.cs)-1]
	h.cs = h.cs[:len(h.cs)-1]
	return c
}
