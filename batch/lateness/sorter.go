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
// Rows gather in a chunk of at most chunkRows; a full chunk is sorted and
// spilled to a temporary file; the end merges the files. Memory is
// chunkRows rows plus a 32 KiB read buffer per spilled chunk.
type sorter struct {
	dir       string
	chunkRows int
	buf       []row
	files     []*os.File
	names     []string // source and file names by id
	ids       map[string]uint32
	last      [2]string      // the last two names looked up, and their ids:
	lastID    [2]uint32      // rows come in runs of one source and file
	lastRow   map[fileID]row // each file's last row in arrival order (frontier.go)
}

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
	s.buf = append(s.buf, r)
	if len(s.buf) >= s.chunkRows {
		return s.spill()
	}
	return nil
}

func (s *sorter) sortBuf() {
	slices.SortFunc(s.buf, func(a, b row) int { return s.compare(&a, &b) })
}

// spill sorts the chunk and writes it to a temporary file.
func (s *sorter) spill() error {
	s.sortBuf()
	f, err := os.CreateTemp(s.dir, "tidemark-lateness-*.rows")
	if err != nil {
		return fmt.Errorf("spill sorted rows: %w", err)
	}
	s.files = append(s.files, f)
	w := bufio.NewWriterSize(f, 1<<16)
	var b [rowBytes]byte
	for i := range s.buf {
		encodeRow(b[:], &s.buf[i])
		if _, err := w.Write(b[:]); err != nil {
			return fmt.Errorf("spill sorted rows: %w", err)
		}
	}
	if err := w.Flush(); err != nil {
		return fmt.Errorf("spill sorted rows: %w", err)
	}
	s.buf = s.buf[:0]
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

// each calls fn with every row in order. Without spills it sorts in memory.
func (s *sorter) each(fn func(*row) error) error {
	if len(s.files) == 0 {
		s.sortBuf()
		for i := range s.buf {
			if err := fn(&s.buf[i]); err != nil {
				return err
			}
		}
		return nil
	}
	if len(s.buf) > 0 {
		if err := s.spill(); err != nil {
			return err
		}
	}
	s.buf = nil
	h := &mergeHeap{s: s}
	for _, f := range s.files {
		if _, err := f.Seek(0, io.SeekStart); err != nil {
			return fmt.Errorf("merge sorted rows: %w", err)
		}
		c := &cursor{r: bufio.NewReaderSize(f, 32<<10)}
		ok, err := c.next()
		if err != nil {
			return err
		}
		if ok {
			h.cs = append(h.cs, c)
		}
	}
	heap.Init(h)
	for len(h.cs) > 0 {
		c := h.cs[0]
		if err := fn(&c.cur); err != nil {
			return err
		}
		ok, err := c.next()
		if err != nil {
			return err
		}
		if ok {
			heap.Fix(h, 0)
		} else {
			heap.Pop(h)
		}
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

// cursor reads one spilled chunk.
type cursor struct {
	r   *bufio.Reader
	b   [rowBytes]byte
	cur row
}

func (c *cursor) next() (bool, error) {
	if _, err := io.ReadFull(c.r, c.b[:]); err != nil {
		if err == io.EOF {
			return false, nil
		}
		return false, fmt.Errorf("merge sorted rows: %w", err)
	}
	c.cur = decodeRow(c.b[:])
	return true, nil
}

// mergeHeap orders the cursors by their current row.
type mergeHeap struct {
	s  *sorter
	cs []*cursor
}

func (h *mergeHeap) Len() int           { return len(h.cs) }
func (h *mergeHeap) Less(i, j int) bool { return h.s.compare(&h.cs[i].cur, &h.cs[j].cur) < 0 }
func (h *mergeHeap) Swap(i, j int)      { h.cs[i], h.cs[j] = h.cs[j], h.cs[i] }
func (h *mergeHeap) Push(x any)         { h.cs = append(h.cs, x.(*cursor)) }
func (h *mergeHeap) Pop() any {
	c := h.cs[len(h.cs)-1]
	h.cs = h.cs[:len(h.cs)-1]
	return c
}
