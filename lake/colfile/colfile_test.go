package colfile_test

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"testing"

	"github.com/parquet-go/parquet-go/format"

	"tidemark/lake/colfile"
	"tidemark/lake/colfile/colfiletest"
)

func names(cols []colfile.Column) []string {
	n := make([]string, len(cols))
	for i, c := range cols {
		n[i] = c.Name
	}
	return n
}

// randomValue returns a value of column col: one of distinct values,
// with NaN, ±Inf and -0 among the doubles and all-0xff byte values (a max
// with no rounded-up prefix).
func randomValue(r *rand.Rand, col colfile.Column, distinct int) any {
	x := r.IntN(distinct)
	switch col.Type {
	case colfile.Timestamp, colfile.Int64:
		return int64(x)*7919 - int64(distinct)*3000
	case colfile.Double:
		switch r.IntN(200) {
		case 0:
			return math.NaN()
		case 1:
			return math.Inf(1 - 2*r.IntN(2))
		case 2:
			return math.Copysign(0, -1)
		}
		return float64(x) / 8
	case colfile.Boolean:
		return x%2 == 0
	case colfile.String:
		return fmt.Sprintf("%0*d", r.IntN(40), x)
	}
	b := make([]byte, r.IntN(60))
	for j := range b {
		b[j] = byte(x + j*31)
	}
	if r.IntN(20) == 0 {
		b = bytes.Repeat([]byte{0xff}, 1+r.IntN(20))
	}
	return b
}

// TestWriterProperty writes random files (every type, REQUIRED and
// OPTIONAL, dictionary or not, every codec; few to all-distinct values,
// no to all nulls; several row groups, values given in runs) and checks
// each with parquet-go's reader (colfiletest.Check).
func TestWriterProperty(t *testing.T) {
	r := rand.New(rand.NewPCG(18, 4))
	types := []colfile.Type{colfile.Timestamp, colfile.String, colfile.Int64, colfile.Double, colfile.Boolean, colfile.ByteArray}
	iters := 24
	if testing.Short() {
		iters = 8
	}
	for iter := range iters {
		var cols []colfile.Column
		for c := range 1 + r.IntN(8) {
			cols = append(cols, colfile.Column{Name: fmt.Sprintf("c%d", c), Type: types[r.IntN(len(types))],
				Optional: r.IntN(2) == 0, Dictionary: r.IntN(3) > 0, Codec: colfile.Codec(r.IntN(3))})
		}
		n := []int{0, 1, 2, 100, 3000, 40000 + r.IntN(20000)}[r.IntN(6)]
		distinct := []int{1, 2, 50, 5000, 1 << 30}[r.IntN(5)]
		nulls := []int{0, 2, 10, 1 << 30}[r.IntN(4)] // one in: 0 none, 1<<30 all but row 0
		rows := make([][]any, n)
		for i := range rows {
			row := make([]any, len(cols))
			for c, col := range cols {
				if col.Optional && nulls > 0 && (nulls == 1<<30 && i > 0 || r.IntN(nulls) == 0) {
					continue
				}
				row[c] = randomValue(r, col, distinct)
			}
			rows[i] = row
		}
		group := []int{1000, 32 << 10}[r.IntN(2)]
		path := colfile.WriteRows(t, t.TempDir(), cols, rows, group, 1+r.IntN(20000))
		for _, err := range colfiletest.Check(path, names(cols), rows, nil) {
			t.Errorf("file %d (%d rows, %d distinct, nulls 1/%d, %+v): %v", iter, n, distinct, nulls, cols, err)
		}
	}
}

// TestCheckCatchesBadIndex makes sure colfiletest.Check fails a file whose
// column index lies: each page's bounds shifted, then one null count.
func TestCheckCatchesBadIndex(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 3))
	var cols []colfile.Column
	for i, typ := range []colfile.Type{colfile.Timestamp, colfile.String, colfile.Int64, colfile.Double, colfile.Boolean, colfile.ByteArray} {
		cols = append(cols, colfile.Column{Name: fmt.Sprintf("c%d", i), Type: typ, Optional: i%2 == 0, Dictionary: true})
	}
	rows := make([][]any, 100)
	for i := range rows {
		rows[i] = make([]any, len(cols))
		for c, col := range cols {
			if i%7 != 3 || !col.Optional {
				v := randomValue(r, col, 20)
				if f, ok := v.(float64); ok && math.IsNaN(f) {
					v = 1.5 // a NaN chunk has no column index to tamper with
				}
				rows[i][c] = v
			}
		}
	}
	path := colfile.WriteRows(t, t.TempDir(), cols, rows, 1000, 1000)
	if errs := colfiletest.Check(path, names(cols), rows, nil); len(errs) > 0 {
		t.Fatal(errs)
	}
	tampers := map[string]func(*format.ColumnIndex){
		"min": func(ci *format.ColumnIndex) {
			for p, v := range ci.MinValues {
				if len(v) == 0 {
					ci.MinValues[p] = []byte{0}
				} else {
					ci.MinValues[p] = slices.Clone(v)
					ci.MinValues[p][0]++
				}
			}
		},
		"max": func(ci *format.ColumnIndex) {
			for p, v := range ci.MaxValues {
				ci.MaxValues[p] = append(slices.Clone(v), 1)
			}
		},
		"nulls": func(ci *format.ColumnIndex) { ci.NullCounts[0]++ },
	}
	for name, tamper := range tampers {
		for _, c := range cols {
			only := func(col string, ci *format.ColumnIndex) {
				if col == c.Name {
					tamper(ci)
				}
			}
			if errs := colfiletest.Check(path, names(cols), rows, only); len(errs) == 0 {
				t.Errorf("%s of %s: a tampered column index passed the check", name, c.Name)
			}
		}
	}
}

// TestWriterRejects checks the errors a caller's mistakes get.
func TestWriterRejects(t *testing.T) {
	if _, err := colfile.NewWriter(&bytes.Buffer{}, []colfile.Column{{Name: "a"}, {Name: "a"}}, ""); err == nil {
		t.Error("two columns named a: no error")
	}
	if _, err := colfile.NewWriter(&bytes.Buffer{}, []colfile.Column{{Name: ""}}, ""); err == nil {
		t.Error("an unnamed column: no error")
	}
	cols := []colfile.Column{{Name: "a", Type: colfile.Int64}, {Name: "b", Type: colfile.Int64}}
	w, err := colfile.NewWriter(&bytes.Buffer{}, cols, "")
	if err != nil {
		t.Fatal(err)
	}
	a, b := colfile.NewChunk(cols[0], 10), colfile.NewChunk(cols[1], 10)
	defer a.Release()
	defer b.Release()
	for _, ch := range []*colfile.Chunk{a, b} {
		if err := ch.Add(colfile.Values{Ints: []int64{1, 2, 3}}); err != nil {
			t.Fatal(err)
		}
		if err := ch.Finish(); err != nil {
			t.Fatal(err)
		}
	}
	for name, chunks := range map[string][]*colfile.Chunk{"one chunk": {a}, "swapped": {b, a}} {
		if err := w.WriteRowGroup(chunks, 3); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	if err := w.WriteRowGroup([]*colfile.Chunk{a, b}, 4); err == nil {
		t.Error("3 values for 4 rows: no error")
	}
	if err := w.WriteRowGroup([]*colfile.Chunk{a, b}, 3); err != nil {
		t.Errorf("a right row group: %v", err)
	}
}

// FuzzWriter writes files of columns and values the fuzzer chooses and
// checks them with parquet-go's reader (colfiletest.Check): spec gives
// the columns (a byte each: type, OPTIONAL, dictionary, codec), the row
// count and group size; data gives the values (cycled), numbers from few
// values or any bits, byte values of any length and content.
func FuzzWriter(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3, 4, 5, 200, 3}, []byte("some bytes to take values from"))
	f.Add([]byte{0x1c, 0x1d, 0x0b, 0xff, 9}, bytes.Repeat([]byte{0xff, 0, 7}, 100))
	f.Add([]byte{0x13, 0x14, 0x15, 0, 0}, []byte{0x7f, 0xf8, 0, 0, 0, 0, 0, 1}) // NaN bits
	types := []colfile.Type{colfile.Timestamp, colfile.String, colfile.Int64, colfile.Double, colfile.Boolean, colfile.ByteArray}
	f.Fuzz(func(t *testing.T, spec, data []byte) {
		if len(spec) < 3 || len(data) == 0 {
			return
		}
		ncols := min(len(spec)-2, 8)
		rowsN := int(spec[ncols]) * (1 + int(spec[ncols+1]%64)) // up to ~16k rows
		group := 1 + int(spec[ncols+1])*97
		var cols []colfile.Column
		for c, b := range spec[:ncols] {
			cols = append(cols, colfile.Column{Name: fmt.Sprintf("c%d", c), Type: types[int(b&7)%len(types)],
				Optional: b&8 != 0, Dictionary: b&16 != 0, Codec: colfile.Codec((b >> 5) % 3)})
		}
		at := 0
		take := func(n int) []byte {
			out := make([]byte, n)
			for i := range out {
				out[i] = data[at%len(data)]
				at++
			}
			return out
		}
		rows := make([][]any, rowsN)
		for i := range rows {
			row := make([]any, ncols)
			for c, col := range cols {
				sel := take(1)[0]
				if col.Optional && sel%5 == 0 {
					continue
				}
				word := int64(binary.LittleEndian.Uint64(take(8)))
				if sel&0x80 == 0 {
					word %= 16 // few values: dictionaries
				}
				switch col.Type {
				case colfile.Timestamp, colfile.Int64:
					row[c] = word
				case colfile.Double:
					row[c] = math.Float64frombits(uint64(word))
				case colfile.Boolean:
					row[c] = word&1 == 1
				case colfile.String:
					row[c] = string(take(int(sel % 48)))
				default:
					row[c] = take(int(sel % 48))
				}
			}
			rows[i] = row
		}
		path := colfile.WriteRows(t, t.TempDir(), cols, rows, group, 1+rowsN/3)
		for _, err := range colfiletest.Check(path, names(cols), rows, nil) {
			t.Error(err)
		}
		if t.Failed() {
			b, _ := os.ReadFile(path)
			t.Logf("%d rows, %+v, file of %d bytes", rowsN, cols, len(b))
		}
	})
}
