package lake

import (
	"tidemark"

	"context"
	"slices"
	"testing"

	"tidemark/lake/delta"
	"tidemark/lake/store"
)

// withoutFileID is t as tidemark defined it before the file_id column.
func withoutFileID(t *table) *table {
	cols := slices.DeleteFunc(slices.Clone(t.cols), func(c column) bool { return c.name == ColFileID })
	return newTable(t.name, t.partCols, cols...)
}

// TestFileIDOldLake: a lake written before file_id existed opens; its rows
// read with an empty FileID (null); the next append widens the Delta schema
// of raw_events and quarantine with a nullable file_id and its rows carry
// their file's identity.
func TestFileIDOldLake(t *testing.T) {
	ctx := context.Background()
	st, err := store.OpenDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	clock := &fakeClock{now: t0}
	cfg := testConfig(clock)
	old := &Lake{st: st, cfg: cfg, clock: clock.Now, tables: map[string]*handle{}}
	old.cfg.Window = old.cfg.Window.Normalized()
	raw := &handle{def: withoutFileID(rawEventsTable(cfg.Keys, nil, cfg.ValueField != "", tidemark.AggList{})), dt: delta.Open(st, TableRawEvents, delta.Options{Clock: clock.Now})}
	quar := &handle{def: withoutFileID(quarantineTable()), dt: delta.Open(st, TableQuarantine, delta.Options{Clock: clock.Now})}
	for _, h := range []*handle{raw, quar} {
		if err := old.create(ctx, h); err != nil {
			t.Fatal(err)
		}
	}
	recs := testRecords(50)
	var valid []int
	for i := range recs {
		if recs[i].Valid() {
			valid = append(valid, i)
		}
	}
	old.tables[TableRawEvents] = raw
	if err := old.appendTable(ctx, raw, &delta.Txn{AppID: "s", Version: 0}, nil, "STREAMING UPDATE", nil, func() ([]addFile, error) {
		return []addFile{{dataFile: writeRawByRow(t, old, st, recs, valid, us(t0), 0)}}, nil
	}); err != nil {
		t.Fatal(err)
	}

	l, err := Open(ctx, st, cfg)
	if err != nil {
		t.Fatal(err)
	}
	scan := func() (ids []string) {
		err := l.ScanRaw(ctx, RawQuery{Columns: []string{ColFileID, ColOffset}}, func(b RawBatch) error {
			ids = append(ids, b.FileID[:b.N]...)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return ids
	}
	if ids := scan(); len(ids) != len(valid) || slices.ContainsFunc(ids, func(s string) bool { return s != "" }) {
		t.Fatalf("old rows: got file ids %q, want %d empty", ids, len(valid))
	}
	if err := l.AppendBatch(ctx, Batch{AppID: "s", BatchID: 1, Records: recs, IngestTime: us(t0)}); err != nil {
		t.Fatal(err)
	}
	ids := scan()
	withID := 0
	for _, id := range ids {
		if id != "" {
			withID++
		}
	}
	want := 0
	for _, i := range valid {
		if recs[i].FileID != "" {
			want++
		}
	}
	if len(ids) != 2*len(valid) || withID != want {
		t.Errorf("after an append: got %d rows, %d with a file id; want %d, %d", len(ids), withID, 2*len(valid), want)
	}
	for _, name := range []string{TableRawEvents, TableQuarantine} {
		snap, err := l.tables[name].dt.Snapshot(ctx, -1)
		if err != nil {
			t.Fatal(err)
		}
		schema, err := delta.ParseSchema(snap.Metadata.SchemaString)
		if err != nil {
			t.Fatal(err)
		}
		if f, ok := schema.Field(ColFileID); !ok || f.Type.Name != "string" || !f.Nullable {
			t.Errorf("%s: schema after an append: file_id %+v %v, want a nullable string", name, f, ok)
		}
	}
	var qids []string
	if err := l.ScanQuarantine(ctx, func(r QuarantineRow) error { qids = append(qids, r.FileID); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(qids) != 5 || qids[0] == "" {
		t.Errorf("quarantine file ids %q, want 5 set", qids)
	}
}
