package colfile

import (
	"os"
	"path/filepath"
	"testing"
)

// WriteRows writes rows (rows[i][c]: row i's value of cols[c], nil for
// null; int64, float64, bool, string or []byte by the column's type) to a
// file in dir and returns its path. Row groups hold groupRows rows, given
// to each chunk addRows values at a time; the chunks are Reset and reused
// from one row group to the next, and released at the end, as tidemark's
// table writer uses them.
func WriteRows(tb testing.TB, dir string, cols []Column, rows [][]any, groupRows, addRows int) string {
	tb.Helper()
	path := filepath.Join(dir, "test.parquet")
	f, err := os.Create(path)
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	w, err := NewWriter(f, cols, "colfile test")
	if err != nil {
		tb.Fatal(err)
	}
	chunks := make([]*Chunk, len(cols))
	for c, col := range cols {
		chunks[c] = NewChunk(col, min(groupRows, len(rows)))
	}
	defer func() {
		for _, ch := range chunks {
			ch.Release()
		}
	}()
	for lo := 0; lo < len(rows); lo += groupRows {
		hi := min(len(rows), lo+groupRows)
		for c, ch := range chunks {
			ch.Expect(hi - lo)
			for a := lo; a < hi; a += addRows {
				if err := ch.Add(valuesOf(rows[a:min(hi, a+addRows)], c, cols[c])); err != nil {
					tb.Fatal(err)
				}
			}
			if err := ch.Finish(); err != nil {
				tb.Fatal(err)
			}
		}
		if err := w.WriteRowGroup(chunks, int64(hi-lo)); err != nil {
			tb.Fatal(err)
		}
		for _, ch := range chunks {
			ch.Reset()
		}
	}
	if err := w.Close(); err != nil {
		tb.Fatal(err)
	}
	if err := f.Close(); err != nil {
		tb.Fatal(err)
	}
	return path
}

// valuesOf returns column c of rows as Values.
func valuesOf(rows [][]any, c int, col Column) Values {
	var v Values
	for _, row := range rows {
		x := row[c]
		if col.Optional {
			v.Null = append(v.Null, x == nil)
		}
		switch col.Type {
		case Timestamp, Int64:
			i, _ := x.(int64)
			v.Ints = append(v.Ints, i)
		case Double:
			f, _ := x.(float64)
			v.Floats = append(v.Floats, f)
		case Boolean:
			b, _ := x.(bool)
			v.Bools = append(v.Bools, b)
		default:
			switch b := x.(type) {
			case string:
				v.Bytes = append(v.Bytes, []byte(b))
			case []byte:
				v.Bytes = append(v.Bytes, b)
			default:
				v.Bytes = append(v.Bytes, nil)
			}
		}
	}
	return v
}
