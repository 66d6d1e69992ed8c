package lake

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"testing"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/format"

	"tidemark"
	"tidemark/lake/colfile/colfiletest"
	"tidemark/lake/store"
)

// A written file is checked against the values given to the writer with
// parquet-go's generic reader, independently of the encoder: every value,
// each chunk's statistics, and each page's column index and offset index
// entries against the values of the rows the offset index says the page
// holds. pqRows generates raw_events rows of every column shape: nulls,
// empty and invalid-UTF-8 payloads, constant columns (a one-entry
// dictionary), keys of few values (a dictionary) and of all-distinct values
// (PLAIN after the probation), a key whose dictionary fills up mid-chunk
// (dictionary pages, then PLAIN ones), a double column whose dictionary
// outgrows colfile's word limit mid-chunk.

// pqTable is raw_events with three keys.
func pqTable() *table {
	return rawEventsTable([]string{"page", "user", "late_key"}, nil, true, tidemark.AggList{})
}

// pqRows returns rows of pqTable, one value per column (nil for null), in
// the table's column order.
func pqRows(n int, seed uint64) [][]any {
	r := rand.New(rand.NewPCG(seed, 7))
	t := pqTable()
	rows := make([][]any, n)
	for i := range rows {
		row := make([]any, len(t.cols))
		set := func(name string, v any) { row[t.colNamed(name)] = v }
		set("event_time", int64(1767261600000000+r.IntN(3_600_000_000)))
		set("arrival_time", int64(1767261600000000+int64(i)*1000))
		set("ingest_time", int64(1767265200000000))
		if i%11 != 3 {
			set("page", fmt.Sprintf("/p/%d", r.IntN(40)))
		}
		if i%13 != 5 {
			set("user", fmt.Sprintf("user-%d-%d", i, r.Uint32()))
		}
		// A dictionary on probation passes, then fills up (dictMaxBytes)
		// in the first row group.
		if j := i % rowGroupRows; j < 3000 {
			set("late_key", fmt.Sprintf("k%d", j%20))
		} else {
			set("late_key", fmt.Sprintf("%040d-%d", i, r.Uint64()))
		}
		switch {
		case i%17 == 0:
		case i%rowGroupRows < 5000:
			set("value", float64(i%10)-4.5)
		case i%29 == 0:
			set("value", math.Copysign(0, -1))
		default:
			set("value", r.NormFloat64()*1e6)
		}
		set("status", []string{"ok", "late", "future"}[min(r.IntN(40), 2)])
		if r.IntN(10) == 0 {
			set("disorder_us", int64(r.IntN(1_000_000)))
		} else {
			set("disorder_us", int64(0))
		}
		set("source", "/in")
		set("file", fmt.Sprintf("events-%d.ndjson", i/5000))
		if i%19 != 4 {
			set(ColFileID, fmt.Sprintf("%032x", i/5000+1))
		}
		set("offset", int64(i)*137)
		set("batch_id", int64(42))
		var p []byte
		switch i % 9 {
		case 0:
			p = []byte{} // an empty line
		case 1:
			p = []byte{'{', 0xff, 0xfe, '"', 0x80, '}'} // invalid UTF-8
		default:
			p = fmt.Appendf(nil, `{"event_time":"%d","page":"/p/%d","pad":"%s"}`, i, i%40, bytes.Repeat([]byte{'x'}, r.IntN(300)))
		}
		set("payload", p)
		rows[i] = row
	}
	return rows
}

// writePQ writes rows to a file of t and returns its path in dir.
func writePQ(t *testing.T, tb *table, rows [][]any, dir string) (string, dataFile) {
	t.Helper()
	st, err := store.OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	w, err := newFileWriterIn(tb, st, len(rows))
	if err != nil {
		t.Fatal(err)
	}
	for _, row := range rows {
		for c, v := range row {
			switch v := v.(type) {
			case nil:
				w.null(c)
			case int64:
				w.long(c, v)
			case float64:
				w.double(c, v)
			case bool:
				w.boolean(c, v)
			case string:
				w.str(c, v)
			case []byte:
				w.bytes(c, v)
			}
		}
		endTestRow(t, w)
	}
	df, err := w.finish(context.Background(), st, "")
	if err != nil {
		t.Fatal(err)
	}
	return dir + "/" + tb.name + "/" + df.Path, df
}

// checkPQ checks the file at path against rows of tb with
// colfiletest.Check, and its created_by and schema: the schema parquet-go
// would have written for the table.
func checkPQ(path string, tb *table, rows [][]any, tamper func(string, *format.ColumnIndex)) []error {
	var errs []error
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
	if got := pf.Metadata().CreatedBy; got != tidemark.CreatedBy() {
		errs = append(errs, fmt.Errorf("created_by %q, want %q", got, tidemark.CreatedBy()))
	}
	if got, want := pf.Schema().String(), tb.parquetSchema().String(); got != want {
		errs = append(errs, fmt.Errorf("schema\n%s\nwant\n%s", got, want))
	}
	names := make([]string, len(tb.cols))
	for i, c := range tb.cols {
		names[i] = c.name
	}
	return append(errs, colfiletest.Check(path, names, rows, tamper)...)
}

func TestPQFileReadBack(t *testing.T) {
	for _, n := range []int{1, 2*rowGroupRows + 1234} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			tb := pqTable().withPayload(PayloadSnappy)
			rows := pqRows(n, uint64(n))
			dir := t.TempDir()
			path, df := writePQ(t, tb, rows, dir)
			for _, err := range checkPQ(path, tb, rows, nil) {
				t.Error(err)
			}
			checkDeltaStats(t, tb, rows, df)
			checkOwnReader(t, tb, rows, dir, tb.name+"/"+df.Path)
			if n > 1 {
				checkShapes(t, path)
			}
		})
	}
}

// TestPQFileReadBackLZ4Raw reads back a raw_events file whose payload is
// LZ4_RAW and compresses less than 3x (random bytes), with parquet-go's
// reader and the lake's: parquet-go v0.32.0 read such pages as garbage
// (its LZ4 decoder left the page buffer it was given unfilled), so a
// --payload-codec lz4_raw lake of poorly compressible lines came back
// empty or wrong to reconcile and compact; v0.32.1 decodes into it.
func TestPQFileReadBackLZ4Raw(t *testing.T) {
	tb := pqTable().withPayload(PayloadLZ4Raw)
	rows := pqRows(3000, 1)
	r := rand.New(rand.NewPCG(1, 2))
	for _, row := range rows {
		p := make([]byte, 200)
		for i := range p {
			p[i] = byte(r.Uint32())
		}
		row[tb.colNamed("payload")] = p
	}
	dir := t.TempDir()
	path, df := writePQ(t, tb, rows, dir)
	for _, err := range checkPQ(path, tb, rows, nil) {
		t.Error(err)
	}
	checkOwnReader(t, tb, rows, dir, tb.name+"/"+df.Path)
}

// TestPQCheckCatchesBadIndex makes sure the check above fails a file whose
// column index lies: each page's bounds shifted, then one null count.
func TestPQCheckCatchesBadIndex(t *testing.T) {
	tb := pqTable()
	rows := pqRows(100, 3)
	path, _ := writePQ(t, tb, rows, t.TempDir())
	if errs := checkPQ(path, tb, rows, nil); len(errs) > 0 {
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
		for _, c := range tb.cols {
			only := func(col string, ci *format.ColumnIndex) {
				if col == c.name {
					tamper(ci)
				}
			}
			if errs := checkPQ(path, tb, rows, only); len(errs) == 0 {
				t.Errorf("%s of %s: a tampered column index passed the check", name, c.name)
			}
		}
	}
}

// checkDeltaStats compares the add action's stats with the rows'.
func checkDeltaStats(t *testing.T, tb *table, rows [][]any, df dataFile) {
	t.Helper()
	var st struct {
		NumRecords int64
		MinValues  map[string]any
		MaxValues  map[string]any
		NullCount  map[string]int64
	}
	if err := json.Unmarshal([]byte(df.Stats), &st); err != nil {
		t.Fatal(err)
	}
	if st.NumRecords != int64(len(rows)) {
		t.Errorf("stats: %d records, want %d", st.NumRecords, len(rows))
	}
	for c, col := range tb.cols {
		var nulls int64
		var lo, hi any
		long := false // a string longer than Spark's stats prefix
		for _, r := range rows {
			v := r[c]
			if v == nil {
				nulls++
				continue
			}
			if s, ok := v.(string); ok && len(s) > statsPrefix {
				long = true
			}
			if lo == nil || less(v, lo) {
				lo = v
			}
			if hi == nil || less(hi, v) {
				hi = v
			}
		}
		if st.NullCount[col.name] != nulls {
			t.Errorf("stats %s: %d nulls, want %d", col.name, st.NullCount[col.name], nulls)
		}
		if lo == nil {
			continue
		}
		var wlo, whi any
		switch col.kind {
		case kindTimestamp:
			wlo, whi = formatStatsTime(lo.(int64)), formatStatsTime(hi.(int64))
		case kindLong:
			wlo, whi = float64(lo.(int64)), float64(hi.(int64))
		case kindDouble:
			wlo, whi = lo, hi
		case kindString:
			// A prefix is a lower bound; with a long value, no upper bound.
			wlo, whi = lo.(string)[:min(len(lo.(string)), statsPrefix)], hi
			if long {
				whi = nil
			}
		default:
			continue
		}
		if st.MinValues[col.name] != wlo || st.MaxValues[col.name] != whi {
			t.Errorf("stats %s: %v..%v, want %v..%v", col.name, st.MinValues[col.name], st.MaxValues[col.name], wlo, whi)
		}
	}
}

func less(a, b any) bool {
	switch a := a.(type) {
	case int64:
		return a < b.(int64)
	case float64:
		return a < b.(float64)
	case string:
		return a < b.(string)
	}
	return false
}

// checkOwnReader reads the file back with the lake's reader.
func checkOwnReader(t *testing.T, tb *table, rows [][]any, dir, key string) {
	t.Helper()
	st, err := store.OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	fr, err := openFileReader(context.Background(), st, key)
	if err != nil {
		t.Fatal(err)
	}
	defer fr.Close()
	out := make([]colData, len(tb.cols))
	first := 0
	for g := range fr.numRowGroups() {
		n, err := fr.readRowGroup(g, tb.cols, out)
		if err != nil {
			t.Fatal(err)
		}
		for c, col := range tb.cols {
			for i := range n {
				want := rows[first+i][c]
				d := &out[c]
				var got any
				switch {
				case d.isNull(i):
				case col.kind == kindTimestamp || col.kind == kindLong:
					got = d.ints[i]
				case col.kind == kindDouble:
					got = d.floats[i]
				case col.kind == kindString:
					got = string(d.bytes[i])
				default:
					got = d.bytes[i]
				}
				if d.isNull(i) != (want == nil) {
					t.Fatalf("own reader %s row %d: got %v, want %v", col.name, first+i, got, want)
				}
				if w, ok := want.([]byte); ok {
					if b, _ := got.([]byte); !bytes.Equal(b, w) {
						t.Fatalf("own reader rg %d %s row %d: got %q, want %q", g, col.name, first+i, got, w)
					}
					continue
				}
				if f, ok := want.(float64); ok && got != nil && math.Signbit(f) != math.Signbit(got.(float64)) {
					t.Fatalf("own reader %s row %d: got %v, want %v", col.name, first+i, got, want)
				}
				if got != want {
					t.Fatalf("own reader %s row %d: got %v, want %v", col.name, first+i, got, want)
				}
			}
		}
		first += n
	}
	if first != len(rows) {
		t.Errorf("own reader: %d rows, want %d", first, len(rows))
	}
}

// openPQ opens a Parquet file for the rest of the test.
func openPQ(t *testing.T, path string) (*os.File, *parquet.File) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	fi, _ := f.Stat()
	pf, err := parquet.OpenFile(f, fi.Size())
	if err != nil {
		t.Fatal(err)
	}
	return f, pf
}

// checkShapes asserts the encodings the rows were made to exercise.
func checkShapes(t *testing.T, path string) {
	t.Helper()
	_, pf := openPQ(t, path)
	type shape struct{ dict, plain int32 }
	got := map[string]shape{}
	md := pf.Metadata()
	for _, cc := range md.RowGroups[0].Columns {
		var s shape
		for _, es := range cc.MetaData.EncodingStats {
			switch {
			case es.PageType == format.DataPage && es.Encoding == format.RLEDictionary:
				s.dict += es.Count
			case es.PageType == format.DataPage && es.Encoding == format.Plain:
				s.plain += es.Count
			}
		}
		got[cc.MetaData.PathInSchema[0]] = s
	}
	for name, want := range map[string]string{
		"batch_id": "dict", "ingest_time": "dict", "source": "dict", "page": "dict",
		"user": "plain", "event_time": "plain", "payload": "plain", "late_key": "both", "value": "both",
	} {
		s := got[name]
		ok := false
		switch want {
		case "dict":
			ok = s.dict > 0 && s.plain == 0
		case "plain":
			ok = s.dict == 0 && s.plain > 0
		case "both":
			ok = s.dict > 0 && s.plain > 0
		}
		if !ok {
			t.Errorf("%s: first row group has %d dictionary and %d PLAIN pages, want %s", name, s.dict, s.plain, want)
		}
	}
	if s := got["payload"]; s.plain < 2 {
		t.Errorf("payload: %d pages in the first row group, want several", s.plain)
	}
}

// TestPQFileProperty writes random tables (every kind, REQUIRED and
// OPTIONAL, dictionary-capable or PLAIN strings) of random rows and
// checks each file with parquet-go's reader as above.
func TestPQFileProperty(t *testing.T) {
	r := rand.New(rand.NewPCG(18, 4))
	kinds := []kind{kindTimestamp, kindString, kindLong, kindDouble, kindBool, kindBinary}
	for iter := range 24 {
		var cols []column
		for c := range 1 + r.IntN(8) {
			k := kinds[r.IntN(len(kinds))]
			cols = append(cols, column{name: fmt.Sprintf("c%d", c), kind: k, optional: r.IntN(2) == 0,
				plain: k == kindString && r.IntN(3) == 0})
		}
		tb := newTable("t", nil, cols...)
		n := []int{0, 1, 2, 100, 3000, rowGroupRows + 1 + r.IntN(chunkRows)}[r.IntN(6)]
		distinct := []int{1, 2, 50, 5000, 1 << 30}[r.IntN(5)]
		nulls := []int{0, 2, 10, 1 << 30}[r.IntN(4)] // one in: 0 none, 1<<30 all but row 0
		rows := make([][]any, n)
		for i := range rows {
			row := make([]any, len(cols))
			for c, col := range cols {
				if col.optional && nulls > 0 && (nulls == 1<<30 && i > 0 || r.IntN(nulls) == 0) {
					continue
				}
				x := r.IntN(distinct)
				switch col.kind {
				case kindTimestamp, kindLong:
					row[c] = int64(x)*7919 - int64(distinct)*3000
				case kindDouble:
					switch r.IntN(200) {
					case 0:
						row[c] = math.NaN()
					case 1:
						row[c] = math.Inf(1 - 2*r.IntN(2))
					case 2:
						row[c] = math.Copysign(0, -1)
					default:
						row[c] = float64(x) / 8
					}
				case kindBool:
					row[c] = x%2 == 0
				case kindString:
					row[c] = fmt.Sprintf("%0*d", r.IntN(40), x)
				default:
					b := make([]byte, r.IntN(60))
					for j := range b {
						b[j] = byte(x + j*31)
					}
					if r.IntN(20) == 0 {
						b = bytes.Repeat([]byte{0xff}, 1+r.IntN(20)) // a max with no rounded-up prefix
					}
					row[c] = b
				}
			}
			rows[i] = row
		}
		path, _ := writePQ(t, tb, rows, t.TempDir())
		for _, err := range checkPQ(path, tb, rows, nil) {
			t.Errorf("table %d (%d rows, %d distinct, nulls 1/%d, %v): %v", iter, n, distinct, nulls, cols, err)
		}
	}
}
