// Package colfiletest checks Parquet files against the values written to
// them, with parquet-go's generic reader: a test kit for colfile and for
// the writers built on it, as testing/fstest is for fs.FS.
package colfiletest

import (
	"bytes"
	"fmt"
	"math"
	"os"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/encoding/plain"
	"github.com/parquet-go/parquet-go/encoding/thrift"
	"github.com/parquet-go/parquet-go/format"

	"tidemark/lake/colfile"
)

// Check reads the file at path with parquet-go's generic reader and
// returns every way it differs from rows: rows[i][c] is row i's value of
// the column named names[c] (nil for null; int64, float64, bool, string
// or []byte by the column's type). It checks every value, page by page;
// each chunk's statistics (exact bounds, NaN left out, a zero min -0 and
// max +0, and none when a NaN is present); each page's column index entry
// (bounds, byte arrays cut to colfile.IndexPrefix, the max rounded up;
// null count; null page) and offset index entry (first row, offsets in
// order) against the values of the rows the offset index says the page
// holds. tamper, when not nil, is given each chunk's column index as read
// from the file before it is checked (a test of the check itself).
func Check(path string, names []string, rows [][]any, tamper func(col string, ci *format.ColumnIndex)) []error {
	var errs []error
	fail := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	f, err := os.Open(path)
	if err != nil {
		return []error{err}
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return []error{err}
	}
	pf, err := parquet.OpenFile(f, fi.Size())
	if err != nil {
		return []error{err}
	}
	if got := pf.NumRows(); got != int64(len(rows)) {
		fail("file has %d rows, want %d", got, len(rows))
	}
	md := pf.Metadata()
	byName := make(map[string]int, len(names))
	for c, n := range names {
		byName[n] = c
	}
	if got := len(pf.Schema().Fields()); got != len(names) {
		fail("file has %d columns, want %d", got, len(names))
	}
	first := int64(0) // the row group's first row
	for g, rg := range pf.RowGroups() {
		for _, cc := range rg.ColumnChunks() {
			name := pf.Schema().Fields()[cc.Column()].Name()
			c, ok := byName[name]
			if !ok {
				fail("rg %d: column %s not expected", g, name)
				continue
			}
			typ := cc.Type()
			want := func(row int64) parquet.Value { return cell(rows[first+row][c]) }
			// Every value, page by page, in order.
			pages := cc.Pages()
			var got []parquet.Value
			var perPage []int64
			for {
				p, err := pages.ReadPage()
				if err != nil {
					break
				}
				vals := make([]parquet.Value, p.NumValues())
				n, _ := p.Values().ReadValues(vals)
				for _, v := range vals[:n] {
					got = append(got, v.Clone())
				}
				perPage = append(perPage, p.NumRows())
				parquet.Release(p)
			}
			pages.Close()
			if int64(len(got)) != rg.NumRows() {
				fail("rg %d %s: %d values, want %d", g, name, len(got), rg.NumRows())
				continue
			}
			for i, v := range got {
				w := want(int64(i))
				if v.IsNull() != w.IsNull() || (!w.IsNull() && !sameBits(v, w)) {
					fail("rg %d %s row %d: got %v, want %v", g, name, first+int64(i), v, w)
					break
				}
			}
			// The chunk's statistics.
			cm := md.RowGroups[g].Columns[cc.Column()].MetaData
			lo, hi, nulls, nan := valueBounds(typ, want, 0, rg.NumRows())
			if cm.Statistics.NullCount != nulls {
				fail("rg %d %s: null count %d, want %d", g, name, cm.Statistics.NullCount, nulls)
			}
			switch {
			case nan || lo.IsNull():
				if cm.Statistics.MinValue != nil || cm.Statistics.MaxValue != nil {
					fail("rg %d %s: chunk bounds %x..%x, want none (NaN or no values)", g, name, cm.Statistics.MinValue, cm.Statistics.MaxValue)
				}
			case !bytes.Equal(cm.Statistics.MinValue, plainOf(lo)) || !bytes.Equal(cm.Statistics.MaxValue, plainOf(hi)):
				fail("rg %d %s: chunk bounds %x..%x, want %v..%v", g, name, cm.Statistics.MinValue, cm.Statistics.MaxValue, lo, hi)
			}
			// The offset index gives each page's first row; the column index
			// each page's bounds: both are checked against the values.
			oi, err := cc.OffsetIndex()
			if err != nil {
				fail("rg %d %s: offset index: %v", g, name, err)
				continue
			}
			if oi.NumPages() != len(perPage) {
				fail("rg %d %s: offset index has %d pages, the chunk %d", g, name, oi.NumPages(), len(perPage))
				continue
			}
			fci := md.RowGroups[g].Columns[cc.Column()]
			if fci.ColumnIndexLength == 0 {
				if !nan {
					fail("rg %d %s: no column index", g, name)
				}
				continue // a NaN: no page bounds to trust
			}
			if nan {
				fail("rg %d %s: a column index for a chunk with a NaN", g, name)
			}
			raw := readColumnIndex(f, fci)
			if len(raw.NullPages) != oi.NumPages() || len(raw.MinValues) != oi.NumPages() || len(raw.MaxValues) != oi.NumPages() || len(raw.NullCounts) != oi.NumPages() {
				fail("rg %d %s: column index of %d pages, want %d", g, name, len(raw.NullPages), oi.NumPages())
				continue
			}
			if tamper != nil {
				tamper(name, &raw)
			}
			row := int64(0)
			for p := range oi.NumPages() {
				if oi.FirstRowIndex(p) != row {
					fail("rg %d %s page %d: first row %d, want %d", g, name, p, oi.FirstRowIndex(p), row)
				}
				if p > 0 && oi.Offset(p) <= oi.Offset(p-1) {
					fail("rg %d %s page %d: offset %d not after %d", g, name, p, oi.Offset(p), oi.Offset(p-1))
				}
				end := row + perPage[p]
				lo, hi, nulls, _ := valueBounds(typ, want, row, end)
				if raw.NullCounts[p] != nulls {
					fail("rg %d %s page %d: index null count %d, want %d", g, name, p, raw.NullCounts[p], nulls)
				}
				if raw.NullPages[p] != lo.IsNull() {
					fail("rg %d %s page %d: null page %t, want %t", g, name, p, raw.NullPages[p], lo.IsNull())
				}
				if !lo.IsNull() {
					wlo, whi := plainOf(lo), plainOf(hi)
					if typ.Kind() == parquet.ByteArray {
						wlo, whi = wlo[:min(len(wlo), colfile.IndexPrefix)], colfile.RoundUp(whi, colfile.IndexPrefix)
					}
					if !bytes.Equal(raw.MinValues[p], wlo) || !bytes.Equal(raw.MaxValues[p], whi) {
						fail("rg %d %s page %d: index bounds %x..%x, want %x..%x", g, name, p, raw.MinValues[p], raw.MaxValues[p], wlo, whi)
					}
				}
				row = end
			}
			// parquet-go's reader takes a file's column indexes for all or
			// none of its chunks (a NaN chunk has none); when all are there
			// it must give the pages the offset index gives.
			if allIndexed(md) {
				if ci, err := cc.ColumnIndex(); err != nil || ci.NumPages() != oi.NumPages() {
					fail("rg %d %s: parquet-go's column index: %v (want %d pages)", g, name, err, oi.NumPages())
				}
			}
		}
		first += rg.NumRows()
	}
	return errs
}

func allIndexed(md *format.FileMetaData) bool {
	for _, rg := range md.RowGroups {
		for _, cc := range rg.Columns {
			if cc.ColumnIndexLength == 0 {
				return false
			}
		}
	}
	return true
}

// readColumnIndex decodes a chunk's column index from the file as written.
func readColumnIndex(f *os.File, cc format.ColumnChunk) format.ColumnIndex {
	b := make([]byte, cc.ColumnIndexLength)
	if _, err := f.ReadAt(b, cc.ColumnIndexOffset); err != nil {
		return format.ColumnIndex{}
	}
	var ci format.ColumnIndex
	if err := UnmarshalCompact(b, &ci); err != nil {
		return format.ColumnIndex{}
	}
	return ci
}

// valueBounds returns the min, max (null when there are none) and null count
// of rows lo to hi, NaN left out (nan reports one).
func valueBounds(typ parquet.Type, val func(int64) parquet.Value, lo, hi int64) (mn, mx parquet.Value, nulls int64, nan bool) {
	for i := lo; i < hi; i++ {
		v := val(i)
		if v.IsNull() {
			nulls++
			continue
		}
		if v.Kind() == parquet.Double && math.IsNaN(v.Double()) {
			nan = true
			continue
		}
		if mn.IsNull() || typ.Compare(v, mn) < 0 {
			mn = v
		}
		if mx.IsNull() || typ.Compare(v, mx) > 0 {
			mx = v
		}
	}
	// A zero bound is written -0 (min) and +0 (max).
	if mn.Kind() == parquet.Double && mn.Double() == 0 {
		mn = parquet.DoubleValue(math.Copysign(0, -1))
	}
	if mx.Kind() == parquet.Double && mx.Double() == 0 {
		mx = parquet.DoubleValue(0)
	}
	return mn, mx, nulls, nan
}

// sameBits compares doubles by their bits (NaN, -0), the rest as
// parquet-go does.
func sameBits(a, b parquet.Value) bool {
	if a.Kind() == parquet.Double && b.Kind() == parquet.Double {
		return math.Float64bits(a.Double()) == math.Float64bits(b.Double())
	}
	return parquet.Equal(a, b)
}

func plainOf(v parquet.Value) []byte {
	switch v.Kind() {
	case parquet.Int64:
		return plain.Int64(v.Int64())
	case parquet.Double:
		return plain.Double(v.Double())
	case parquet.Boolean:
		return plain.Boolean(v.Boolean())
	}
	return v.ByteArray()
}

// cell renders a test value as parquet-go reads it back.
func cell(v any) parquet.Value {
	switch v := v.(type) {
	case nil:
		return parquet.NullValue()
	case int64:
		return parquet.Int64Value(v)
	case float64:
		return parquet.DoubleValue(v)
	case bool:
		return parquet.BooleanValue(v)
	case string:
		return parquet.ByteArrayValue([]byte(v))
	}
	return parquet.ByteArrayValue(v.([]byte))
}

// UnmarshalCompact decodes Thrift compact bytes (a page header, a page
// index) into v.
func UnmarshalCompact(b []byte, v any) error {
	return thrift.Unmarshal(new(thrift.CompactProtocol), b, v)
}
