package lake

import (
	"context"
	"testing"
	"time"
)

// The questions batch and reconcile ask: raw_events' hours at a version,
// the txns a table recorded, and the watermark window_results holds.
func TestQueries(t *testing.T) {
	l, _, _ := openTestLake(t)
	ctx := context.Background()
	lay, err := l.RawLayout(ctx, 0)
	if err != nil || !lay.Partitioned || len(lay.Hours) != 0 || lay.Files != 0 {
		t.Fatalf("fresh lake: got %+v, %v, want an empty partitioned layout", lay, err)
	}
	if _, ok, err := l.WindowsWatermark(ctx); err != nil || ok {
		t.Fatalf("fresh lake watermark: ok %v, err %v, want none", ok, err)
	}
	recs := testRecords(40)
	if err := l.AppendBatch(ctx, Batch{AppID: "stream-a", BatchID: 7, Records: recs}); err != nil {
		t.Fatal(err)
	}
	lay, err = l.RawLayout(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	if v := tableVersion(t, l, TableRawEvents); lay.Version != v {
		t.Errorf("layout version: got %d, want %d", lay.Version, v)
	}
	var files, bytes int64
	for i, h := range lay.Hours {
		if h.Start%time.Hour.Microseconds() != 0 || (i > 0 && h.Start <= lay.Hours[i-1].Start) {
			t.Errorf("hour %d starts at %d: want sorted hour starts", i, h.Start)
		}
		files, bytes = files+h.Files, bytes+h.Bytes
	}
	if !lay.Partitioned || len(lay.Hours) == 0 || files != lay.Files || bytes != lay.Bytes || lay.Partitions != int64(len(lay.Hours)) {
		t.Errorf("layout %+v: hours hold %d files, %d bytes; want every file in an hour", lay, files, bytes)
	}
	if err := l.AppendBatch(ctx, Batch{AppID: "stream-a", BatchID: 8, Records: recs}); err != nil {
		t.Fatal(err)
	}
	if now, err := l.RawLayout(ctx, 0); err != nil || now.Version <= lay.Version || now.Files <= lay.Files {
		t.Errorf("layout after a second append: got %+v, %v, want a later version with more files", now, err)
	}
	if old, err := l.RawLayout(ctx, lay.Version); err != nil || old.Version != lay.Version || old.Files != lay.Files {
		t.Errorf("layout at version %d: got %+v, %v, want %+v", lay.Version, old, err, lay)
	}

	txns, err := l.Txns(ctx, TableRawEvents)
	if err != nil || txns["stream-a"] != 8 {
		t.Errorf("raw_events txns: got %v, %v, want stream-a=8", txns, err)
	}
	if err := l.RecordTxn(ctx, TableReconcileLog, "run", 5); err != nil {
		t.Fatal(err)
	}
	v := tableVersion(t, l, TableReconcileLog)
	if err := l.RecordTxn(ctx, TableReconcileLog, "run", 3); err != nil {
		t.Fatal(err)
	}
	if got := tableVersion(t, l, TableReconcileLog); got != v {
		t.Errorf("recording a lower version committed: version %d, want %d", got, v)
	}
	if txns, err := l.Txns(ctx, TableReconcileLog); err != nil || txns["run"] != 5 {
		t.Errorf("reconcile_log txns: got %v, %v, want run=5", txns, err)
	}
	if _, err := l.Txns(ctx, "no_such_table"); err == nil {
		t.Error("txns of an unknown table: got nil error")
	}

	rows := []WindowRow{windowRow(t0, "/a", 1, 1), windowRow(t0.Add(time.Hour), "/b", 2, 1)}
	if err := l.Upsert(ctx, rows, "stream", 1, nil); err != nil {
		t.Fatal(err)
	}
	w, ok, err := l.WindowsWatermark(ctx)
	if want := *rows[1].Watermark; err != nil || !ok || w != want {
		t.Errorf("window_results watermark: got %d, %v, %v, want %d", w, ok, err, want)
	}
}
