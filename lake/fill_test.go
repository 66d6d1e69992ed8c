package lake

import (
	"context"
	"os"
	"strings"
	"testing"

	"tidemark"
	"tidemark/lake/store"
)

// writeRawByRow writes rows (indexes into recs) to a raw_events file row by
// row with the typed setters, as writeRaw did before fillRows: the
// reference the columnar fill must match byte for byte.
func writeRawByRow(t *testing.T, l *Lake, st store.Store, recs []tidemark.Record, rows []int, ingest, batchID int64) dataFile {
	t.Helper()
	tb := l.tables[TableRawEvents].def
	w, err := newFileWriter(tb)
	if err != nil {
		t.Fatal(err)
	}
	keyCol := tb.keyCols()
	cEvent, cArrival, cIngest, cValue := tb.col("event_time"), tb.col("arrival_time"), tb.col("ingest_time"), tb.col("value")
	cStatus, cDisorder, cSource, cFile := tb.col("status"), tb.col("disorder_us"), tb.col("source"), tb.col("file")
	cOffset, cBatch, cPayload := tb.col("offset"), tb.col("batch_id"), tb.col("payload")
	for _, i := range rows {
		r := &recs[i]
		w.long(cEvent, r.EventTime)
		w.long(cArrival, r.Arrival)
		w.long(cIngest, ingest)
		w.key(keyCol, r.Key)
		w.optDouble(cValue, r.Value, r.HasValue)
		w.str(cStatus, r.Status.String())
		w.long(cDisorder, r.Disorder)
		w.str(cSource, r.Source)
		w.str(cFile, r.File)
		if c, ok := tb.index[ColFileID]; ok { // else a table from before file_id
			optStr(w, c, r.FileID)
		}
		w.long(cOffset, r.Offset)
		w.long(cBatch, batchID)
		w.bytes(cPayload, r.Payload)
		endTestRow(t, w)
	}
	return finishTestFile(t, w, st)
}

// optStr writes s, or null for "".
func optStr(w *fileWriter, c int, s string) {
	if s == "" {
		w.null(c)
	} else {
		w.str(c, s)
	}
}

// writeQuarantineByRow is writeRawByRow for the quarantine table.
func writeQuarantineByRow(t *testing.T, l *Lake, st store.Store, recs []tidemark.Record, idx []int, ingest, batchID int64) dataFile {
	t.Helper()
	tb := l.tables[TableQuarantine].def
	w, err := newFileWriter(tb)
	if err != nil {
		t.Fatal(err)
	}
	for _, i := range idx {
		r := &recs[i]
		w.str(tb.col("reason"), string(r.Reason))
		w.str(tb.col("error"), r.Err)
		w.str(tb.col("source"), r.Source)
		w.str(tb.col("file"), r.File)
		optStr(w, tb.col(ColFileID), r.FileID)
		w.long(tb.col("offset"), r.Offset)
		w.long(tb.col("ingest_time"), ingest)
		w.long(tb.col("batch_id"), batchID)
		w.bytes(tb.col("payload"), r.Payload)
		endTestRow(t, w)
	}
	return finishTestFile(t, w, st)
}

// writeInBulk writes n rows of tb with fillRows.
func writeInBulk(t *testing.T, tb *table, st store.Store, n int, fill rowFill) dataFile {
	t.Helper()
	w, err := newFileWriter(tb)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.fillRows(n, fill); err != nil {
		w.abort()
		t.Fatal(err)
	}
	return finishTestFile(t, w, st)
}

func sameFile(t *testing.T, dir, table string, a, b dataFile) {
	t.Helper()
	da, err := os.ReadFile(dir + "/" + table + "/" + a.Path)
	if err != nil {
		t.Fatal(err)
	}
	db, err := os.ReadFile(dir + "/" + table + "/" + b.Path)
	if err != nil {
		t.Fatal(err)
	}
	if string(da) != string(db) || a.Stats != b.Stats || a.Rows != b.Rows || a.Size != b.Size {
		t.Errorf("%s: filled in bulk: %d rows, %d bytes, stats %s; by row: %d rows, %d bytes, stats %s",
			table, b.Rows, len(db), b.Stats, a.Rows, len(da), a.Stats)
	}
}

// TestFillRowsSameFile checks that filling raw_events and quarantine files
// a chunk at a time with fillRows writes the same bytes and stats as
// filling them row by row: across chunk and row-group cuts by rows, and
// with row groups cut by bytes (large payloads).
func TestFillRowsSameFile(t *testing.T) {
	l, _, _ := openTestLake(t)
	dir := t.TempDir()
	st, err := store.OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	big := []byte(strings.Repeat(`{"pad":"0123456789abcdef"}`, 400)) // ~10 KB
	for _, tc := range []struct {
		name  string
		n     int
		large bool
	}{
		{"one row", 1, false},
		{"one chunk", chunkRows, false},
		{"row groups", 2*rowGroupRows + chunkRows + 17, false},
		{"byte cut", rowGroupRows + 5, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			recs := testRecords(tc.n)
			var valid, bad []int
			for i := range recs {
				if tc.large {
					recs[i].Payload = big[:len(big)-i%97]
				}
				if recs[i].Valid() {
					valid = append(valid, i)
				} else {
					bad = append(bad, i)
				}
			}
			const ingest, batch = 1767261600123456, 42
			sameFile(t, dir, TableRawEvents,
				writeRawByRow(t, l, st, recs, valid, ingest, batch),
				writeInBulk(t, l.tables[TableRawEvents].def, st, len(valid), l.rawFill(recs, valid, ingest, batch)))
			if len(bad) > 0 {
				sameFile(t, dir, TableQuarantine,
					writeQuarantineByRow(t, l, st, recs, bad, ingest, batch),
					writeInBulk(t, l.tables[TableQuarantine].def, st, len(bad), l.quarantineFill(recs, bad, ingest, batch)))
			}
		})
	}
}

// TestFillRowsErrors checks that a fill that sets too few values of a
// column is reported, not written.
func TestFillRowsErrors(t *testing.T) {
	l, _, _ := openTestLake(t)
	tb := l.tables[TableQuarantine].def
	recs := testRecords(20)
	idx := []int{9, 19}
	fill := l.quarantineFill(recs, idx, 1, 1)
	w, err := newFileWriter(tb)
	if err != nil {
		t.Fatal(err)
	}
	short := func(cols []*colBuf, lo, hi int) int64 {
		n := fill(cols, lo, hi)
		cols[1].n--
		return n
	}
	if err := w.fillRows(len(idx), short); err != nil {
		t.Fatal(err)
	}
	if _, err := w.finish(context.Background(), l.st, ""); err == nil || !strings.Contains(err.Error(), "values for") {
		t.Errorf("finish after a short column: %v, want a count error", err)
	}
}
