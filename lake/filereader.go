package lake

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"

	"github.com/parquet-go/parquet-go"

	"tidemark/lake/store"
)

// colData is one decoded column of a row group. Only the slice for the
// column's kind is filled; null is nil when no value is null.
type colData struct {
	ints   []int64   // timestamp, long
	floats []float64 // double
	bools  []bool    // boolean
	bytes  [][]byte  // string, binary: views into arena
	null   []bool    // per row; meaningful only when hasNull
	arena  []byte

	hasNull bool
}

func (c *colData) reset() {
	c.ints, c.floats, c.bools, c.bytes, c.null, c.arena = c.ints[:0], c.floats[:0], c.bools[:0], c.bytes[:0], c.null[:0], c.arena[:0]
	c.hasNull = false
}

// isNull reports whether row i is null.
func (c *colData) isNull(i int) bool { return c.hasNull && c.null[i] }

// fileReader reads one Parquet data file of a table through store.Reader.
// parquet-go can panic on a malformed file (issue #537); every entry point
// recovers and returns an error naming the file instead.
type fileReader struct {
	key string
	r   store.Reader
	f   *parquet.File
}

// errCorrupt marks a data file that could not be decoded.
var errCorrupt = errors.New("lake: corrupt data file")

func recoverTo(key string, err *error) {
	if p := recover(); p != nil {
		*err = fmt.Errorf("read %s: %w: parquet panic: %v", key, errCorrupt, p)
	}
}

func openFileReader(ctx context.Context, st store.Store, key string) (fr *fileReader, err error) {
	r, err := st.Open(ctx, key)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", key, err)
	}
	defer func() {
		if err != nil {
			r.Close()
		}
	}()
	defer recoverTo(key, &err)
	f, err := parquet.OpenFile(r, r.Size(), parquet.SkipBloomFilters(true), parquet.SkipPageIndex(true), parquet.ReadBufferSize(1<<20))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w: %v", key, errCorrupt, err)
	}
	return &fileReader{key: key, r: r, f: f}, nil
}

func (fr *fileReader) Close() error { return fr.r.Close() }

func (fr *fileReader) numRowGroups() int { return len(fr.f.Metadata().RowGroups) }

// int64Range returns the min and max of a timestamp or long column in row
// group rg from the footer statistics, ok=false when they are missing.
func (fr *fileReader) int64Range(rg int, name string) (lo, hi int64, ok bool) {
	lc, found := fr.f.Schema().Lookup(name)
	if !found || lc.Node.Type().Kind() != parquet.Int64 {
		return 0, 0, false
	}
	md := fr.f.Metadata()
	if rg >= len(md.RowGroups) || lc.ColumnIndex >= len(md.RowGroups[rg].Columns) {
		return 0, 0, false
	}
	s := md.RowGroups[rg].Columns[lc.ColumnIndex].MetaData.Statistics
	minV, maxV := s.MinValue, s.MaxValue
	if len(minV) != 8 || len(maxV) != 8 {
		minV, maxV = s.Min, s.Max // deprecated fields, signed order for INT64
	}
	if len(minV) != 8 || len(maxV) != 8 {
		return 0, 0, false
	}
	return int64(binary.LittleEndian.Uint64(minV)), int64(binary.LittleEndian.Uint64(maxV)), true
}

// readRowGroup decodes the given columns of row group rg into out (one per
// column, reused). A column missing from the file reads as all null. It
// returns the row count.
func (fr *fileReader) readRowGroup(rg int, cols []column, out []colData) (n int, err error) {
	defer recoverTo(fr.key, &err)
	groups := fr.f.RowGroups()
	if rg >= len(groups) {
		return 0, fmt.Errorf("read %s: row group %d out of range", fr.key, rg)
	}
	group := groups[rg]
	n = int(group.NumRows())
	chunks := group.ColumnChunks()
	var buf []parquet.Value
	for i, c := range cols {
		d := &out[i]
		d.reset()
		lc, ok := fr.f.Schema().Lookup(c.name)
		if !ok {
			for range n {
				d.null = append(d.null, true)
			}
			d.hasNull = true
			fillZero(d, c.kind, n)
			continue
		}
		if err := checkKind(lc.Node.Type().Kind(), c.kind); err != nil {
			return 0, fmt.Errorf("read %s column %s: %w", fr.key, c.name, err)
		}
		if buf == nil {
			buf = make([]parquet.Value, 4096)
		}
		if err := readChunk(chunks[lc.ColumnIndex], c.kind, d, buf); err != nil {
			return 0, fmt.Errorf("read %s column %s: %w: %v", fr.key, c.name, errCorrupt, err)
		}
		if got := rowsIn(d, c.kind); got != n {
			return 0, fmt.Errorf("read %s column %s: %w: %d values for %d rows", fr.key, c.name, errCorrupt, got, n)
		}
	}
	return n, nil
}

func checkKind(k parquet.Kind, want kind) error {
	ok := false
	switch want {
	case kindTimestamp, kindLong:
		ok = k == parquet.Int64
	case kindDouble:
		ok = k == parquet.Double
	case kindBool:
		ok = k == parquet.Boolean
	case kindString, kindBinary:
		ok = k == parquet.ByteArray
	}
	if !ok {
		return fmt.Errorf("physical type %s, want %s", k, want.deltaType())
	}
	return nil
}

func rowsIn(d *colData, k kind) int {
	switch k {
	case kindTimestamp, kindLong:
		return len(d.ints)
	case kindDouble:
		return len(d.floats)
	case kindBool:
		return len(d.bools)
	default:
		return len(d.bytes)
	}
}

func fillZero(d *colData, k kind, n int) {
	switch k {
	case kindTimestamp, kindLong:
		d.ints = append(d.ints, make([]int64, n)...)
	case kindDouble:
		d.floats = append(d.floats, make([]float64, n)...)
	case kindBool:
		d.bools = append(d.bools, make([]bool, n)...)
	default:
		d.bytes = append(d.bytes, make([][]byte, n)...)
	}
}

func readChunk(chunk parquet.ColumnChunk, k kind, d *colData, buf []parquet.Value) error {
	pages := chunk.Pages()
	defer pages.Close()
	anyNull := false
	var offs []int // arena offsets for byte values, resolved after reading
	for {
		page, err := pages.ReadPage()
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
		vr := page.Values()
		for {
			m, err := vr.ReadValues(buf)
			for _, v := range buf[:m] {
				null := v.IsNull()
				anyNull = anyNull || null
				d.null = append(d.null, null)
				switch k {
				case kindTimestamp, kindLong:
					if null {
						d.ints = append(d.ints, 0)
					} else {
						d.ints = append(d.ints, v.Int64())
					}
				case kindDouble:
					if null {
						d.floats = append(d.floats, math.NaN())
					} else {
						d.floats = append(d.floats, v.Double())
					}
				case kindBool:
					d.bools = append(d.bools, !null && v.Boolean())
				default:
					offs = append(offs, len(d.arena))
					if !null {
						d.arena = append(d.arena, v.ByteArray()...)
					}
				}
			}
			if err == io.EOF {
				break
			}
			if err != nil {
				parquet.Release(page)
				return err
			}
			if m == 0 {
				parquet.Release(page)
				return errors.New("page reader made no progress")
			}
		}
		parquet.Release(page)
	}
	// Byte views are cut only now: the arena may have moved while growing.
	for i, off := range offs {
		end := len(d.arena)
		if i+1 < len(offs) {
			end = offs[i+1]
		}
		if d.null[i] {
			d.bytes = append(d.bytes, nil)
		} else {
			d.bytes = append(d.bytes, d.arena[off:end:end])
		}
	}
	d.hasNull = anyNull
	return nil
}
