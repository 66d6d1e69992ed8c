package lake

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"tidemark"

	"tidemark/lake/delta"
	"tidemark/lake/store"
	"tidemark/lake/store/storetest"
)

// TestRepairLostFiles removes raw_events files by hand: the dry run reports
// them (rows and event-time range from the stats) and commits nothing; the
// repair commits their removal in one FSCK commit; compaction and scans work
// afterwards, and a second repair finds nothing.
func TestRepairLostFiles(t *testing.T) {
	st, err := store.OpenDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	testRepair(t, st)
}

// TestRepairS3 is the same on a lake in a real S3-compatible server.
func TestRepairS3(t *testing.T) {
	srv := storetest.StartVersity(t)
	st, err := store.OpenS3(t.Context(), srv.Bucket(t), "lake", store.S3Config{
		Endpoint: srv.Endpoint, Region: srv.Region, AccessKey: srv.AccessKey, SecretKey: srv.SecretKey,
	})
	if err != nil {
		t.Fatal(err)
	}
	testRepair(t, st)
}

func testRepair(t *testing.T, st store.Store) {
	ctx := context.Background()
	l, err := Open(ctx, st, testConfig(&fakeClock{now: t0}))
	if err != nil {
		t.Fatal(err)
	}
	var keepRows int
	for b := range 4 {
		recs := testRecords(140) // one event hour: one file per batch
		for i := range recs {
			recs[i].Offset += int64(b) * 1_000_000
		}
		if err := l.AppendBatch(ctx, Batch{AppID: "s", BatchID: int64(b), Records: recs}); err != nil {
			t.Fatal(err)
		}
		keepRows += len(wantValid(recs))
	}
	snap, err := l.tables[TableRawEvents].dt.Snapshot(ctx, -1)
	if err != nil {
		t.Fatal(err)
	}
	if len(snap.Files) != 4 {
		t.Fatalf("got %d files, want 4", len(snap.Files))
	}
	// Lose one file, truncate another, from outside the lake.
	var lostRows int64
	var lo, hi int64
	for i, a := range snap.Files[:2] {
		key := a.Key("raw_events")
		var err error
		if i == 0 {
			err = st.Delete(ctx, key)
		} else {
			err = st.Put(ctx, key, bytes.NewReader(make([]byte, 10)), 10)
		}
		if err != nil {
			t.Fatal(err)
		}
		fl, fh, _ := fileTimeRange(&a, "event_time")
		if i == 0 || fl < lo {
			lo = fl
		}
		if i == 0 || fh-1000 > hi {
			hi = fh - 1000
		}
		stats, err := delta.ParseStats(a.Stats)
		if err != nil {
			t.Fatal(err)
		}
		lostRows += stats.NumRecords
	}
	keepRows -= int(lostRows)
	if _, err := l.Compact(ctx, TableRawEvents, 1<<20); err == nil {
		t.Fatal("compact of a table with a hole: got no error")
	}

	before := tableVersion(t, l, TableRawEvents)
	reps, err := l.Repair(ctx, RepairOptions{Tables: []string{TableRawEvents}, DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	r := reps[0]
	if len(r.Lost) != 2 || r.Rows != lostRows || r.Version != -1 || !r.HasTime || r.MinTime != lo || r.MaxTime != hi || r.Checked != 4 {
		t.Errorf("dry run: got %+v, want 2 files, %d rows, time %d..%d, no commit", r, lostRows, lo, hi)
	}
	missing, truncated := 0, 0
	for _, f := range r.Lost {
		switch {
		case f.Found == -1:
			missing++
		case f.Found == 10:
			truncated++
		}
		if f.Partition["event_date"] == "" || f.Rows <= 0 {
			t.Errorf("lost file %+v: want its partition and rows", f)
		}
	}
	if missing != 1 || truncated != 1 {
		t.Errorf("got %d missing and %d truncated, want 1 and 1", missing, truncated)
	}
	if v := tableVersion(t, l, TableRawEvents); v != before {
		t.Errorf("dry run committed: version %d, want %d", v, before)
	}

	reps, err = l.Repair(ctx, RepairOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(reps) != len(tableNames) {
		t.Fatalf("got %d reports, want one per table", len(reps))
	}
	for _, r := range reps {
		switch {
		case r.Table == TableRawEvents && (r.Version != before+1 || len(r.Lost) != 2):
			t.Errorf("repair: got %+v, want version %d removing 2 files", r, before+1)
		case r.Table != TableRawEvents && (r.Version != -1 || len(r.Lost) != 0):
			t.Errorf("repair of %s: got %+v, want nothing", r.Table, r)
		}
	}
	hist, err := l.tables[TableRawEvents].dt.History(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if ci := hist[len(hist)-1].CommitInfo; ci == nil || ci.Operation != "FSCK" {
		t.Errorf("got last commit %+v, want FSCK", ci)
	}
	if got := len(scanAll(t, l, RawQuery{})); got != keepRows {
		t.Errorf("got %d rows after repair, want %d", got, keepRows)
	}
	if _, err := l.Compact(ctx, TableRawEvents, 1<<20); err != nil {
		t.Errorf("compact after repair: %v", err)
	}
	if got := len(scanAll(t, l, RawQuery{})); got != keepRows {
		t.Errorf("got %d rows after compaction, want %d", got, keepRows)
	}
	reps, err = l.Repair(ctx, RepairOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range reps {
		if len(r.Lost) != 0 || r.Version != -1 {
			t.Errorf("second repair of %s: got %+v, want nothing", r.Table, r)
		}
	}
	if _, err := l.Repair(ctx, RepairOptions{Tables: []string{"nope"}}); err == nil {
		t.Error("repair of an unknown table: got no error")
	}
}

// A lost raw_events file is named in input terms from its stats: the one
// input its rows came from (file_id and path, through the lake's names of
// its own columns: here a key takes "source" and "file"), the offsets and
// batches they span; rows from several inputs, or some without file_id,
// name no single input.
func TestRepairNamesLostInput(t *testing.T) {
	ctx := context.Background()
	st, err := store.OpenDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	cfg := testConfig(&fakeClock{now: t0})
	cfg.Keys = []string{"source", "file"} // tidemark's own become _tm_source, _tm_file
	l, err := Open(ctx, st, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if l.phys(ColSource) != "_tm_source" || l.phys(ColFile) != "_tm_file" {
		t.Fatalf("own columns %s, %s; want them renamed", l.phys(ColSource), l.phys(ColFile))
	}
	id := fmt.Sprintf("%032x", 7)
	batch := func(b int64, mixed bool) []tidemark.Record {
		var recs []tidemark.Record
		for i := range 20 {
			r := tidemark.Record{Source: "logs", File: "app.log.1.gz", FileID: id, Offset: 1000 + int64(i)*50,
				Payload: []byte("{}"), EventTime: us(t0) + int64(i), Arrival: us(t0) + int64(i),
				Key: tidemark.MakeKey(tidemark.KeyPart{Value: "k"}, tidemark.KeyPart{Value: "f"})}
			if mixed && i%2 == 1 {
				r.File, r.FileID = "other.log", fmt.Sprintf("%032x", 8)
			}
			recs = append(recs, r)
		}
		if err := l.AppendBatch(ctx, Batch{AppID: "s", BatchID: b, Records: recs}); err != nil {
			t.Fatal(err)
		}
		return recs
	}
	batch(3, false)
	batch(4, true)
	snap, err := l.tables[TableRawEvents].dt.Snapshot(ctx, -1)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range snap.Files {
		if err := st.Delete(ctx, a.Key("raw_events")); err != nil {
			t.Fatal(err)
		}
	}
	reps, err := l.Repair(ctx, RepairOptions{Tables: []string{TableRawEvents}, DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, f := range reps[0].Lost {
		if in := f.Input; in == nil {
			got = append(got, "none")
		} else {
			got = append(got, fmt.Sprintf("id=%q file=%q source=%q off=%d..%d(%v) batch=%d..%d(%v)",
				in.FileID, in.File, in.Source, in.MinOffset, in.MaxOffset, in.HasOffset, in.MinBatch, in.MaxBatch, in.HasBatch))
		}
	}
	slices.Sort(got)
	want := []string{
		`id="" file="" source="logs" off=1000..1950(true) batch=4..4(true)`,
		fmt.Sprintf(`id=%q file="app.log.1.gz" source="logs" off=1000..1950(true) batch=3..3(true)`, id),
	}
	if !slices.Equal(got, want) {
		t.Errorf("lost inputs:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
