package lake

import (
	"context"
	"fmt"
	"math"
	"os"
	"strings"
	"testing"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/format"

	"tidemark"
	"tidemark/lake/colfile"
	"tidemark/lake/store"
)

// testTable has one column of every kind, optional and required.
func testTable() *table {
	return newTable("t", nil,
		column{name: "ts", kind: kindTimestamp},
		column{name: "k", kind: kindString, optional: true},
		column{name: "p", kind: kindString, plain: true},
		column{name: "n", kind: kindLong},
		column{name: "v", kind: kindDouble, optional: true},
		column{name: "b", kind: kindBool},
		column{name: "raw", kind: kindBinary},
	)
}

// testRow renders row i of the test data as text.
func testRow(i int) string {
	k := "null"
	if i%7 != 0 {
		k = fmt.Sprintf("key-%d", i%13)
	}
	v := "null"
	if i%5 != 0 {
		v = fmt.Sprint(float64(i) / 4)
	}
	return fmt.Sprintf("%d %s p%d %d %s %t %q", 1767261600000000+int64(i)*1000, k, i, -int64(i), v, i%2 == 0, fmt.Sprintf("raw\x00\xff%d", i))
}

func writeTestFile(t testing.TB, st store.Store, rows int) dataFile {
	t.Helper()
	tb := testTable()
	w, err := newFileWriter(tb)
	if err != nil {
		t.Fatal(err)
	}
	for i := range rows {
		w.long(0, 1767261600000000+int64(i)*1000)
		if i%7 != 0 {
			w.str(1, fmt.Sprintf("key-%d", i%13))
		} else {
			w.null(1)
		}
		w.str(2, fmt.Sprintf("p%d", i))
		w.long(3, -int64(i))
		if i%5 != 0 {
			w.double(4, float64(i)/4)
		} else {
			w.null(4)
		}
		w.boolean(5, i%2 == 0)
		w.bytes(6, []byte(fmt.Sprintf("raw\x00\xff%d", i)))
		endTestRow(t, w)
	}
	return finishTestFile(t, w, st)
}

func readTestFile(t testing.TB, st store.Store, key string) ([]string, error) {
	t.Helper()
	fr, err := openFileReader(context.Background(), st, key)
	if err != nil {
		return nil, err
	}
	defer fr.Close()
	tb := testTable()
	out := make([]colData, len(tb.cols))
	var rows []string
	for rg := range fr.numRowGroups() {
		n, err := fr.readRowGroup(rg, tb.cols, out)
		if err != nil {
			return nil, err
		}
		for i := range n {
			k := "null"
			if !out[1].isNull(i) {
				k = string(out[1].bytes[i])
			}
			v := "null"
			if !out[4].isNull(i) {
				v = fmt.Sprint(out[4].floats[i])
			}
			rows = append(rows, fmt.Sprintf("%d %s %s %d %s %t %q", out[0].ints[i], k, out[2].bytes[i], out[3].ints[i], v, out[5].bools[i], out[6].bytes[i]))
		}
	}
	return rows, nil
}

func TestFileRoundTrip(t *testing.T) {
	for _, rows := range []int{1, 4095, 4096, 300_000} {
		t.Run(fmt.Sprint(rows), func(t *testing.T) {
			st, err := store.OpenDir(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			df := writeTestFile(t, st, rows)
			if df.Rows != int64(rows) {
				t.Errorf("got %d rows, want %d", df.Rows, rows)
			}
			if !strings.HasPrefix(df.Path, "d=1/part-") || !strings.HasSuffix(df.Path, ".zstd.parquet") {
				t.Errorf("got path %s, want d=1/part-<uuid>.zstd.parquet", df.Path)
			}
			got, err := readTestFile(t, st, "t/"+df.Path)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != rows {
				t.Fatalf("got %d rows back, want %d", len(got), rows)
			}
			for i, g := range got {
				if want := testRow(i); g != want {
					t.Fatalf("row %d: got %s, want %s", i, g, want)
				}
			}
		})
	}
}

func TestFileRowGroupsBounded(t *testing.T) {
	st, err := store.OpenDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	df := writeTestFile(t, st, 300_000)
	fr, err := openFileReader(context.Background(), st, "t/"+df.Path)
	if err != nil {
		t.Fatal(err)
	}
	defer fr.Close()
	if got := fr.numRowGroups(); got < 3 {
		t.Errorf("got %d row groups for 300000 rows, want at least 3", got)
	}
	for _, rg := range fr.f.Metadata().RowGroups {
		if rg.NumRows > rowGroupRows+chunkRows {
			t.Errorf("got row group of %d rows, want at most %d", rg.NumRows, rowGroupRows+chunkRows)
		}
	}
	lo, hi, ok := fr.int64Range(0, "ts")
	if !ok || lo != 1767261600000000 || hi < lo {
		t.Errorf("got ts range %d..%d ok=%t, want from 1767261600000000", lo, hi, ok)
	}
}

// TestFileFooter checks what Spark needs: TIMESTAMP(MICROS, UTC), PLAIN or
// dictionary values only (no DELTA_LENGTH_BYTE_ARRAY), data pages v1, zstd,
// and a created_by parquet-mr parses (tidemark.CreatedBy, tested there).
func TestFileFooter(t *testing.T) {
	st, err := store.OpenDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	df := writeTestFile(t, st, 10_000)
	fr, err := openFileReader(context.Background(), st, "t/"+df.Path)
	if err != nil {
		t.Fatal(err)
	}
	defer fr.Close()
	md := fr.f.Metadata()
	for _, el := range md.Schema {
		if el.Name != "ts" {
			continue
		}
		ts, ok := el.LogicalType.Value.(*format.TimestampType)
		if !ok || !ts.IsAdjustedToUTC || ts.Unit.String() != "MICROS" {
			t.Errorf("got ts logical type %v, want TIMESTAMP(isAdjustedToUTC=true,unit=MICROS)", &el.LogicalType)
		}
	}
	if md.CreatedBy != tidemark.CreatedBy() {
		t.Errorf("created_by: got %q, want %q", md.CreatedBy, tidemark.CreatedBy())
	}
	allowed := map[format.Encoding]bool{format.Plain: true, format.RLEDictionary: true, format.PlainDictionary: true, format.RLE: true}
	sch := fr.f.Schema()
	for _, c := range testTable().cols {
		name := c.name
		lc, _ := sch.Lookup(name)
		for _, rg := range md.RowGroups {
			cm := rg.Columns[lc.ColumnIndex].MetaData
			for _, e := range cm.Encoding {
				if !allowed[e] {
					t.Errorf("column %s: got encoding %v, want PLAIN or dictionary", name, e)
				}
			}
			if cm.Codec != format.Zstd {
				t.Errorf("column %s: got codec %v, want ZSTD", name, cm.Codec)
			}
			if len(cm.EncodingStats) == 0 {
				t.Errorf("column %s: no encoding stats to check page types", name)
			}
			for _, es := range cm.EncodingStats {
				if es.PageType == format.DataPageV2 {
					t.Errorf("column %s: got page type %v, want DATA_PAGE (v1)", name, es.PageType)
				}
			}
		}
	}
	if lc, _ := sch.Lookup("k"); lc.MaxDefinitionLevel != 1 {
		t.Errorf("got k definition level %d, want 1 (OPTIONAL)", lc.MaxDefinitionLevel)
	}
}

func TestFileStats(t *testing.T) {
	st, err := store.OpenDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	df := writeTestFile(t, st, 10)
	for _, want := range []string{
		`"numRecords":10`,
		`"ts":"2026-01-01T10:00:00.000Z"`,
		`"ts":"2026-01-01T10:00:00.009Z"`,
		`"n":-9`,
		`"k":"key-1"`,
		`"v":2.25`,
		`"nullCount":{`,
		`"v":2`,
	} {
		if !strings.Contains(df.Stats, want) {
			t.Errorf("stats %s: missing %s", df.Stats, want)
		}
	}
	if strings.Contains(df.Stats, `"raw":"`) {
		t.Errorf("stats %s: want no min/max for binary", df.Stats)
	}
}

func TestStatsNaNLeftOut(t *testing.T) {
	var s colStats
	s.kind = kindDouble
	s.addFloat(1)
	s.addFloat(math.NaN())
	if !s.bad {
		t.Errorf("got bad=false after NaN, want true")
	}
}

// TestCorruptFile flips and truncates bytes of a valid file: reading must
// fail with an error naming the file or succeed, never panic.
func TestCorruptFile(t *testing.T) {
	dir := t.TempDir()
	st, err := store.OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	df := writeTestFile(t, st, 5000)
	key := "t/" + df.Path
	orig, err := os.ReadFile(dir + "/" + key)
	if err != nil {
		t.Fatal(err)
	}
	cases := map[string][]byte{
		"empty":     {},
		"magic":     []byte("PAR1"),
		"truncated": orig[:len(orig)/2],
		"no footer": orig[:len(orig)-8],
	}
	for i := 0; i < 200; i++ {
		b := append([]byte(nil), orig...)
		pos := (i*7919 + 13) % len(b)
		b[pos] ^= byte(i*31 + 1)
		cases[fmt.Sprintf("flip-%d", i)] = b
	}
	for i := 0; i < 40; i++ {
		b := append([]byte(nil), orig...)
		// Corrupt the footer region, where lengths and offsets live.
		pos := len(b) - 8 - 1 - (i*37)%min(len(b)-9, 2000)
		b[pos] ^= 0xff
		cases[fmt.Sprintf("footer-%d", i)] = b
	}
	for name, data := range cases {
		if err := os.WriteFile(dir+"/"+key, data, 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := readTestFile(t, st, key)
		if err != nil && !strings.Contains(err.Error(), key) {
			t.Errorf("%s: got error %v, want it to name %s", name, err, key)
		}
		if name == "empty" || name == "truncated" || name == "no footer" || name == "magic" {
			if err == nil {
				t.Errorf("%s: got no error, want one", name)
			}
		}
	}
}

func BenchmarkFileWrite(b *testing.B) {
	st, err := store.OpenDir(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for range b.N {
		writeTestFile(b, st, 100_000)
	}
	b.ReportMetric(float64(b.N)*100_000/b.Elapsed().Seconds(), "rows/s")
}

// TestFileWriterDeterministic writes the same rows twice, across several
// chunks and row groups: the concurrent column workers must produce the
// same bytes.
func TestFileWriterDeterministic(t *testing.T) {
	dir := t.TempDir()
	st, err := store.OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	rows := rowGroupRows + 3*chunkRows + 17
	a, b := writeTestFile(t, st, rows), writeTestFile(t, st, rows)
	da, err := os.ReadFile(dir + "/t/" + a.Path)
	if err != nil {
		t.Fatal(err)
	}
	db, err := os.ReadFile(dir + "/t/" + b.Path)
	if err != nil {
		t.Fatal(err)
	}
	if string(da) != string(db) || a.Stats != b.Stats {
		t.Errorf("got different files for the same rows (%d and %d bytes)", len(da), len(db))
	}
}

// TestFileWriterErrors checks that misuse is reported, not written, and
// that the column workers stop (TestMain checks for leaks).
func TestFileWriterErrors(t *testing.T) {
	st, err := store.OpenDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		row  func(w *fileWriter, i int)
	}{
		{"missing column", func(w *fileWriter, i int) {
			w.long(0, 1)
			if i != 5 {
				w.null(1)
			}
			w.str(2, "p")
			w.long(3, 2)
			w.null(4)
			w.boolean(5, true)
			w.bytes(6, nil)
		}},
		{"null in a required column", func(w *fileWriter, i int) {
			if i == chunkRows+3 {
				w.null(0)
			} else {
				w.long(0, 1)
			}
			w.null(1)
			w.str(2, "p")
			w.long(3, 2)
			w.null(4)
			w.boolean(5, true)
			w.bytes(6, nil)
		}},
	}
	for _, tc := range tests {
		w, err := newFileWriter(testTable())
		if err != nil {
			t.Fatal(err)
		}
		for i := range 2*chunkRows + 10 {
			tc.row(w, i)
			if err = w.endRow(); err != nil {
				break
			}
		}
		if err == nil {
			_, err = w.finish(context.Background(), st, "")
		} else {
			w.abort()
		}
		if err == nil {
			t.Errorf("%s: got no error, want one", tc.name)
		}
	}
}

// TestFileColumnIndexBounds reads every page of every column back and checks
// that the values lie within the bounds the column index gives that page, as
// a reader pruning pages by the index assumes (parquet-go's SkipPageBounds
// would break this for a binary column: empty bounds on pages with values).
func TestFileColumnIndexBounds(t *testing.T) {
	st, err := store.OpenDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	df := writeTestFile(t, st, 3*colfile.PageBytes/16)
	fr, err := openFileReader(context.Background(), st, "t/"+df.Path)
	if err != nil {
		t.Fatal(err)
	}
	defer fr.Close()
	checked := 0
	for _, rg := range fr.f.RowGroups() {
		for _, cc := range rg.ColumnChunks() {
			idx, err := cc.ColumnIndex()
			if err != nil {
				t.Fatalf("column %d: column index: %v", cc.Column(), err)
			}
			typ := cc.Type()
			pages := cc.Pages()
			for p := 0; ; p++ {
				pg, err := pages.ReadPage()
				if err != nil {
					break
				}
				if p >= idx.NumPages() {
					t.Fatalf("column %d: page %d past the %d pages of the column index", cc.Column(), p, idx.NumPages())
				}
				if idx.NullPage(p) {
					continue
				}
				lo, hi := idx.MinValue(p), idx.MaxValue(p)
				vals := make([]parquet.Value, pg.NumValues())
				n, _ := pg.Values().ReadValues(vals)
				for _, v := range vals[:n] {
					if v.IsNull() {
						continue
					}
					if typ.Compare(v, lo) < 0 || typ.Compare(v, hi) > 0 {
						t.Fatalf("column %d page %d: value %v outside the index bounds [%v, %v]", cc.Column(), p, v, lo, hi)
					}
					checked++
				}
			}
			pages.Close()
		}
	}
	if checked < 7*3*colfile.PageBytes/16/2 {
		t.Errorf("checked %d values, want most of them", checked)
	}
}

// endTestRow ends a test file's row.
func endTestRow(t testing.TB, w *fileWriter) {
	t.Helper()
	if err := w.endRow(); err != nil {
		t.Fatal(err)
	}
}

// finishTestFile finishes a test file into partition d=1 of st.
func finishTestFile(t testing.TB, w *fileWriter, st store.Store) dataFile {
	t.Helper()
	df, err := w.finish(context.Background(), st, "d=1")
	if err != nil {
		t.Fatal(err)
	}
	return df
}
