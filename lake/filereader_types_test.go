package lake

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/deprecated"

	"tidemark"
	"tidemark/lake/delta"
	"tidemark/lake/store"
)

// int96Of encodes t as Spark writes INT96: nanoseconds of the day, then
// the Julian day.
func int96Of(t time.Time) deprecated.Int96 {
	sec := t.Unix()
	day := sec / 86400
	if sec%86400 < 0 {
		day--
	}
	nanos := uint64((sec-day*86400)*1e9 + int64(t.Nanosecond()))
	return deprecated.Int96{uint32(nanos), uint32(nanos >> 32), uint32(day + julianUnixEpoch)}
}

// typedRow holds one instant in every unit and physical type another
// engine may write a timestamp, long or double column in.
type typedRow struct {
	MS     time.Time        `parquet:"ms,timestamp(millisecond)"`
	MSDict time.Time        `parquet:"ms_dict,timestamp(millisecond),dict"`
	US     time.Time        `parquet:"us,timestamp(microsecond)"`
	NS     time.Time        `parquet:"ns,timestamp(nanosecond)"`
	MSOpt  *time.Time       `parquet:"ms_opt,optional,timestamp(millisecond)"`
	I96    deprecated.Int96 `parquet:"i96"`
	I32    int32            `parquet:"i32"`
	F32    float32          `parquet:"f32"`
}

// TestReadForeignPhysicalTypes writes, with parquet-go, timestamps in
// milliseconds (plain and dictionary, required and optional),
// microseconds, nanoseconds and INT96, an INT32 long and a FLOAT double,
// and reads them as tidemark's kinds: every instant exact to the
// microsecond (nanoseconds floored), before and after 1970; the footer
// bounds of a millisecond column in microseconds too.
func TestReadForeignPhysicalTypes(t *testing.T) {
	ctx := context.Background()
	instants := []time.Time{
		time.Date(2026, 1, 2, 3, 4, 5, 123456789, time.UTC),
		time.Date(1969, 12, 31, 23, 59, 59, 500000000, time.UTC),
		time.Date(2000, 1, 1, 8, 0, 0, 0, time.UTC),
	}
	var rows []typedRow
	for i, at := range instants {
		r := typedRow{MS: at, MSDict: at, US: at, NS: at, I96: int96Of(at), I32: int32(-7 + i), F32: 1.5 * float32(i)}
		if i != 1 {
			r.MSOpt = &instants[i]
		}
		rows = append(rows, r)
	}
	var buf bytes.Buffer
	w := parquet.NewGenericWriter[typedRow](&buf)
	if _, err := w.Write(rows); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	st, err := store.OpenDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Put(ctx, "x/part-0.parquet", bytes.NewReader(buf.Bytes()), int64(buf.Len())); err != nil {
		t.Fatal(err)
	}
	fr, err := openFileReader(ctx, st, "x/part-0.parquet")
	if err != nil {
		t.Fatal(err)
	}
	defer fr.Close()
	cols := []column{
		{name: "ms", kind: kindTimestamp}, {name: "ms_dict", kind: kindTimestamp}, {name: "us", kind: kindTimestamp},
		{name: "ns", kind: kindTimestamp}, {name: "ms_opt", kind: kindTimestamp, optional: true}, {name: "i96", kind: kindTimestamp},
		{name: "i32", kind: kindLong}, {name: "f32", kind: kindDouble},
	}
	out := make([]colData, len(cols))
	n, err := fr.readRowGroup(0, cols, out)
	if err != nil {
		t.Fatal(err)
	}
	if n != len(instants) {
		t.Fatalf("got %d rows, want %d", n, len(instants))
	}
	floorMicro := func(at time.Time) int64 { return at.Truncate(time.Microsecond).UnixMicro() }
	floorMilli := func(at time.Time) int64 { return at.Truncate(time.Millisecond).UnixMicro() }
	for i, at := range instants {
		for c, want := range map[string]int64{"ms": floorMilli(at), "ms_dict": floorMilli(at), "us": floorMicro(at), "ns": floorMicro(at), "i96": floorMicro(at)} {
			j := 0
			for cols[j].name != c {
				j++
			}
			if got := out[j].ints[i]; got != want {
				t.Errorf("row %d column %s: got %s, want %s", i, c, time.UnixMicro(got).UTC(), time.UnixMicro(want).UTC())
			}
		}
		if got, null := out[4].ints[i], out[4].isNull(i); null != (i == 1) || (!null && got != floorMilli(at)) {
			t.Errorf("row %d ms_opt: got %d null=%v", i, got, null)
		}
		if got := out[6].ints[i]; got != int64(-7+i) {
			t.Errorf("row %d i32: got %d, want %d", i, got, -7+i)
		}
		if got := out[7].floats[i]; got != 1.5*float64(i) {
			t.Errorf("row %d f32: got %g, want %g", i, got, 1.5*float64(i))
		}
	}
	lo, hi, ok := fr.int64Range(0, "ms")
	if want := floorMilli(instants[1]); !ok || lo != want || hi != floorMilli(instants[0]) {
		t.Errorf("ms footer bounds: got %d..%d (ok %v), want %d..%d", lo, hi, ok, want, floorMilli(instants[0]))
	}
	if _, _, ok := fr.int64Range(0, "i96"); ok {
		t.Error("INT96 footer bounds used: their order is not the time order")
	}
	// A type no Delta type allows for the column is still refused.
	if _, err := fr.readRowGroup(0, []column{{name: "f32", kind: kindTimestamp}}, out[:1]); err == nil {
		t.Error("FLOAT read as a timestamp")
	}
}

// TestReadSparkINT96Golden reads the data file Spark 3.5 wrote in the
// golden table spark-column-mapping-name (its as_timestamp column is
// INT96; the table itself is refused for its column mapping): the
// timestamp is 2000-01-01T00:00:00-08:00, as its stats say, and the int
// (INT32), short, byte and float columns read as long and double.
func TestReadSparkINT96Golden(t *testing.T) {
	dir := filepath.Join("..", "..", "shared", "delta-golden", "spark-column-mapping-name")
	if _, err := os.Stat(dir); err != nil {
		dir = "/work/shared/delta-golden/spark-column-mapping-name"
	}
	if _, err := os.Stat(dir); err != nil {
		t.Skip("golden tables not present")
	}
	st, err := store.OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	fr, err := openFileReader(ctx, st, "part-00001-97ba0cfd-25fe-4911-a28f-29d37288fdd0-c000.snappy.parquet")
	if err != nil {
		t.Fatal(err)
	}
	defer fr.Close()
	cols := []column{
		{name: "col-7296be94-39f4-4703-a791-e1ce50396a17", kind: kindTimestamp, optional: true}, // as_timestamp
		{name: "col-51c5f1e8-f3d9-4504-86fb-003ea4d1b703", kind: kindLong, optional: true},      // as_int
		{name: "col-3101512b-834d-41e9-83b6-e7a2c0ef318a", kind: kindLong, optional: true},      // as_byte
		{name: "col-d89267e7-eaa8-492b-81c6-9b36fb9e3434", kind: kindLong, optional: true},      // as_short
		{name: "col-44632733-0978-43d3-bcb5-872df4fb3ace", kind: kindDouble, optional: true},    // as_float
	}
	if lc, ok := fr.f.Schema().Lookup(cols[0].name); !ok || lc.Node.Type().Kind() != parquet.Int96 {
		t.Fatalf("golden as_timestamp is not INT96")
	}
	out := make([]colData, len(cols))
	n, err := fr.readRowGroup(0, cols, out)
	if err != nil {
		t.Fatal(err)
	}
	want := time.Date(2000, 1, 1, 8, 0, 0, 0, time.UTC).UnixMicro()
	if n != 1 || out[0].ints[0] != want || out[0].isNull(0) {
		t.Errorf("as_timestamp: got %s (%d rows), want %s", time.UnixMicro(out[0].ints[0]).UTC(), n, time.UnixMicro(want).UTC())
	}
	for i := 1; i < 4; i++ {
		if out[i].ints[0] != 0 || out[i].isNull(0) {
			t.Errorf("%s: got %d, want 0", cols[i].name, out[i].ints[0])
		}
	}
	if out[4].floats[0] != 0 {
		t.Errorf("as_float: got %g, want 0", out[4].floats[0])
	}
}

// sparkWindowRow is a window_results row as Spark 3.5 writes it by
// default: INT96 timestamps.
type sparkWindowRow struct {
	WindowStart deprecated.Int96 `parquet:"window_start"`
	WindowEnd   deprecated.Int96 `parquet:"window_end"`
	Page        *string          `parquet:"page,optional"`
	Region      *string          `parquet:"region,optional"`
	Count       int64            `parquet:"count"`
	Sum         *float64         `parquet:"sum,optional"`
	Min         *float64         `parquet:"min,optional"`
	Max         *float64         `parquet:"max,optional"`
	Final       bool             `parquet:"final"`
	Origin      string           `parquet:"origin"`
	Revision    int64            `parquet:"revision"`
	ComputedAt  deprecated.Int96 `parquet:"computed_at"`
}

// millisWindowRow is one with TIMESTAMP(MILLIS) timestamps (as an engine
// told to write millis, or an older writer, does).
type millisWindowRow struct {
	WindowStart time.Time  `parquet:"window_start,timestamp(millisecond)"`
	WindowEnd   time.Time  `parquet:"window_end,timestamp(millisecond)"`
	Page        *string    `parquet:"page,optional"`
	Region      *string    `parquet:"region,optional"`
	Count       int64      `parquet:"count"`
	Sum         *float64   `parquet:"sum,optional"`
	Min         *float64   `parquet:"min,optional"`
	Max         *float64   `parquet:"max,optional"`
	Final       bool       `parquet:"final"`
	Origin      string     `parquet:"origin"`
	Revision    int64      `parquet:"revision"`
	ComputedAt  time.Time  `parquet:"computed_at,timestamp(millisecond)"`
	Watermark   *time.Time `parquet:"watermark,optional,timestamp(millisecond)"`
}

// TestForeignWindowFiles commits to window_results one file of INT96
// timestamps and one of millisecond timestamps, as another engine's MERGE
// would, and reads the table: the windows are at their times (not in
// 1970), an upsert over them keeps each key once, and compaction rewrites
// them as tidemark's microsecond files with the same rows.
func TestForeignWindowFiles(t *testing.T) {
	ctx := context.Background()
	l, _, _ := openTestLake(t)
	h := l.tables[TableWindowResults]
	w0 := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	str := func(s string) *string { return &s }
	f := func(v float64) *float64 { return &v }
	write := func(name string, rows any) delta.Action {
		t.Helper()
		var buf bytes.Buffer
		var err error
		switch rows := rows.(type) {
		case []sparkWindowRow:
			w := parquet.NewGenericWriter[sparkWindowRow](&buf)
			if _, err = w.Write(rows); err == nil {
				err = w.Close()
			}
		case []millisWindowRow:
			w := parquet.NewGenericWriter[millisWindowRow](&buf)
			if _, err = w.Write(rows); err == nil {
				err = w.Close()
			}
		}
		if err != nil {
			t.Fatal(err)
		}
		rel := "window_date=2026-03-01/" + name
		if err := l.st.Put(ctx, h.dt.FileKey(rel), bytes.NewReader(buf.Bytes()), int64(buf.Len())); err != nil {
			t.Fatal(err)
		}
		d := "2026-03-01"
		return delta.Action{Add: &delta.Add{Path: rel, PartitionValues: map[string]*string{"window_date": &d}, Size: int64(buf.Len()), DataChange: true}}
	}
	a1 := write("part-00000-spark.c000.snappy.parquet", []sparkWindowRow{{
		WindowStart: int96Of(w0), WindowEnd: int96Of(w0.Add(10 * time.Minute)), Page: str("/a"), Count: 3,
		Sum: f(6), Min: f(1), Max: f(3), Final: true, Origin: "batch", Revision: 2, ComputedAt: int96Of(w0.Add(time.Hour)),
	}})
	a2 := write("part-00001-millis.c000.snappy.parquet", []millisWindowRow{{
		WindowStart: w0.Add(10 * time.Minute), WindowEnd: w0.Add(20 * time.Minute), Page: str("/b"), Region: str("eu"), Count: 1,
		Final: true, Origin: "stream", Revision: 1, ComputedAt: w0.Add(time.Hour),
	}})
	if _, err := h.dt.Update(ctx, func(snap *delta.Snapshot) (*delta.Transaction, error) {
		return &delta.Transaction{Actions: []delta.Action{a1, a2}, Operation: "MERGE"}, nil
	}); err != nil {
		t.Fatal(err)
	}
	text := func() string {
		t.Helper()
		rows, err := l.Windows(ctx, AllFrom, AllTo, 0)
		if err != nil {
			t.Fatal(err)
		}
		var b strings.Builder
		for _, r := range rows {
			fmt.Fprintf(&b, "%s %s n=%d %s rev %d at %s\n", r.Window, r.Key, r.Agg.Count, r.Origin, r.Revision, tidemark.FormatTime(r.ComputedAt))
		}
		return b.String()
	}
	want := "[2026-03-01T10:00:00Z, 2026-03-01T10:10:00Z) /a|∅ n=3 batch rev 2 at 2026-03-01T11:00:00Z\n" +
		"[2026-03-01T10:10:00Z, 2026-03-01T10:20:00Z) /b|eu n=1 stream rev 1 at 2026-03-01T11:00:00Z\n"
	if got := text(); got != want {
		t.Fatalf("got windows\n%s\nwant\n%s", got, want)
	}
	rep, err := l.Compact(ctx, TableWindowResults, 0)
	if err != nil {
		t.Fatal(err)
	}
	if rep.FilesRemoved != 2 || rep.FilesAdded != 1 {
		t.Errorf("compact: removed %d added %d, want 2 and 1", rep.FilesRemoved, rep.FilesAdded)
	}
	if got := text(); got != want {
		t.Errorf("after compaction: got windows\n%s\nwant\n%s", got, want)
	}
}
