package lake

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"tidemark"
	"tidemark/lake/delta"
	"tidemark/lake/store"
)

var t0 = time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC)

// fakeClock is a settable clock for tests. A lake reads it from several
// goroutines (raw_events and quarantine are written at once), so it is
// guarded.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = t
}

// advance moves the clock on by d.
func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

func testConfig(clock *fakeClock) Config {
	return Config{
		Keys:       []string{"page", "region"},
		ValueField: "v",
		Window:     tidemark.WindowSpec{Size: (10 * time.Minute).Microseconds()},
		Clock:      clock.Now,
	}
}

func openTestLake(t testing.TB) (*Lake, string, *fakeClock) {
	t.Helper()
	dir := t.TempDir()
	st, err := store.OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	clock := &fakeClock{now: t0}
	l, err := Open(context.Background(), st, testConfig(clock))
	if err != nil {
		t.Fatal(err)
	}
	return l, dir, clock
}

func us(t time.Time) int64 { return t.UnixMicro() }

// testRecords makes n records across two event hours, with null keys,
// missing values, late rows and every 10th one quarantined.
func testRecords(n int) []tidemark.Record {
	recs := make([]tidemark.Record, n)
	for i := range recs {
		r := &recs[i]
		r.Source, r.File, r.Offset = "src", fmt.Sprintf("f%d.ndjson", i%3), int64(i*100)
		if i%13 != 0 { // else none: file_id is null
			r.FileID = fmt.Sprintf("%032x", i%3+1)
		}
		r.Payload = []byte(fmt.Sprintf(`{"i":%d,"x":"\u00e9"}`, i))
		r.EventTime = us(t0) + int64(i)*int64(time.Minute/time.Microsecond)/7
		r.Arrival = r.EventTime + int64(i%5)*1000
		page := tidemark.KeyPart{Value: fmt.Sprintf("/p%d", i%4)}
		if i%11 == 0 {
			page = tidemark.KeyPart{Null: true}
		}
		r.Key = tidemark.MakeKey(page, tidemark.KeyPart{Value: "eu"})
		if i%3 != 0 {
			r.Value, r.HasValue = float64(i)/2, true
		}
		if i%7 == 0 {
			r.Status, r.Disorder = tidemark.StatusLate, int64(i)
		}
		if i%10 == 9 {
			r.Reason, r.Err = tidemark.ReasonBadValue, fmt.Sprintf("value %d is not a number", i)
			r.Payload = []byte{0xff, 0xfe, byte(i)}
		}
	}
	return recs
}

func recordText(r *tidemark.Record) string {
	v := "null"
	if r.HasValue {
		v = fmt.Sprint(r.Value)
	}
	return fmt.Sprintf("%d %d %s %s %s %d %s %s %s %d %q", r.EventTime, r.Arrival, r.Key, v, r.Status, r.Disorder, r.Source, r.File, r.FileID, r.Offset, r.Payload)
}

func scanAll(t testing.TB, l *Lake, q RawQuery) []string {
	t.Helper()
	var out []string
	err := l.ScanRaw(context.Background(), q, func(b RawBatch) error {
		for i := range b.N {
			r := tidemark.Record{EventTime: b.EventTime[i], Arrival: b.ArrivalTime[i], Key: b.Key[i], Value: b.Value[i], HasValue: b.HasValue[i],
				Status: b.Status[i], Disorder: b.Disorder[i], Source: b.Source[i], File: b.File[i], FileID: b.FileID[i], Offset: b.Offset[i], Payload: b.Payload[i]}
			if !r.HasValue {
				r.Value = 0
			}
			out = append(out, recordText(&r))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(out)
	return out
}

func wantValid(recs []tidemark.Record) []string {
	var out []string
	for i := range recs {
		if recs[i].Valid() {
			out = append(out, recordText(&recs[i]))
		}
	}
	slices.Sort(out)
	return out
}

// readTable decodes every row of a table's active files as text.
func readTable(t testing.TB, l *Lake, name string) []string {
	t.Helper()
	h := l.tables[name]
	snap, err := h.dt.Snapshot(context.Background(), -1)
	if err != nil {
		t.Fatal(err)
	}
	data := make([]colData, len(h.def.cols))
	var out []string
	for _, a := range snap.Files {
		fr, err := openFileReader(context.Background(), l.st, a.Key(h.dt.Path()))
		if err != nil {
			t.Fatal(err)
		}
		for rg := range fr.numRowGroups() {
			n, err := fr.readRowGroup(rg, h.def.cols, data)
			if err != nil {
				t.Fatal(err)
			}
			for i := range n {
				var parts []string
				for _, p := range h.def.partCols {
					parts = append(parts, p+"="+*a.PartitionValues[p])
				}
				for c, col := range h.def.cols {
					d := &data[c]
					var s string
					switch {
					case d.isNull(i):
						s = "null"
					case col.kind == kindTimestamp:
						s = tidemark.FormatTime(d.ints[i])
					case col.kind == kindLong:
						s = fmt.Sprint(d.ints[i])
					case col.kind == kindDouble:
						s = fmt.Sprint(d.floats[i])
					case col.kind == kindBool:
						s = fmt.Sprint(d.bools[i])
					default:
						s = fmt.Sprintf("%q", d.bytes[i])
					}
					parts = append(parts, col.name+"="+s)
				}
				out = append(out, strings.Join(parts, " "))
			}
		}
		fr.Close()
	}
	slices.Sort(out)
	return out
}

func windowRow(start time.Time, page string, count int64, rev int64) WindowRow {
	wm := us(start.Add(15 * time.Minute))
	return WindowRow{
		Result: tidemark.Result{
			Window: tidemark.Window{Start: us(start), End: us(start.Add(10 * time.Minute))},
			Key:    tidemark.MakeKey(tidemark.KeyPart{Value: page}, tidemark.KeyPart{Null: true}),
			Agg:    tidemark.Agg{Count: count, Values: count, Sum: float64(count), Min: 1, Max: 1},
			Final:  true,
		},
		Origin: OriginStream, Revision: rev, ComputedAt: us(start.Add(16 * time.Minute)), Watermark: &wm,
	}
}

func windowText(r WindowRow) string {
	wm := "null"
	if r.Watermark != nil {
		wm = tidemark.FormatTime(*r.Watermark)
	}
	return fmt.Sprintf("%s %s %+v %t %s %d %s %s", r.Window, r.Key, r.Agg, r.Final, r.Origin, r.Revision, tidemark.FormatTime(r.ComputedAt), wm)
}

func TestAppendRoundTrip(t *testing.T) {
	l, _, _ := openTestLake(t)
	ctx := context.Background()
	recs := testRecords(1000)
	closed := []WindowRow{windowRow(t0, "/a", 3, 1), windowRow(t0, "/b", 1, 1)}
	ingest := us(t0.Add(time.Hour))
	if err := l.AppendBatch(ctx, Batch{AppID: "s1", BatchID: 1, Records: recs, Closed: closed, IngestTime: ingest}); err != nil {
		t.Fatal(err)
	}
	got, want := scanAll(t, l, RawQuery{}), wantValid(recs)
	if !slices.Equal(got, want) {
		t.Fatalf("raw_events: got %d rows, want %d; first got %q want %q", len(got), len(want), first(got), first(want))
	}
	// Partitions: event_date/event_hour of event time, not stored in files.
	raw := readTable(t, l, TableRawEvents)
	if !strings.HasPrefix(raw[0], "event_date=2026-01-01 event_hour=10 event_time=2026-01-01T10:00:00Z ") {
		t.Errorf("raw_events row: got %s", raw[0])
	}
	var quarantined []string
	for i := range recs {
		r := &recs[i]
		if !r.Valid() {
			id := "null"
			if r.FileID != "" {
				id = strconv.Quote(r.FileID)
			}
			quarantined = append(quarantined, fmt.Sprintf("ingest_date=2026-01-01 reason=%q error=%q source=%q file=%q file_id=%s offset=%d ingest_time=2026-01-01T11:00:00Z batch_id=1 payload=%q",
				r.Reason, r.Err, r.Source, r.File, id, r.Offset, r.Payload))
		}
	}
	slices.Sort(quarantined)
	if got := readTable(t, l, TableQuarantine); !slices.Equal(got, quarantined) {
		t.Errorf("quarantine: got %d rows, want %d; first got %q want %q", len(got), len(quarantined), first(got), first(quarantined))
	}
	ws, err := l.Windows(ctx, AllFrom, AllTo, -1)
	if err != nil {
		t.Fatal(err)
	}
	if len(ws) != 2 || windowText(ws[0]) != windowText(closed[0]) || windowText(ws[1]) != windowText(closed[1]) {
		t.Errorf("windows: got %v, want %v", ws, closed)
	}
	// Spark-compatible schemaString.
	snap, _ := l.tables[TableRawEvents].dt.Snapshot(ctx, -1)
	for _, want := range []string{`{"name":"event_time","type":"timestamp"`, `{"name":"page","type":"string"`, `{"name":"payload","type":"binary"`, `{"name":"event_hour","type":"string"`} {
		if !strings.Contains(snap.Metadata.SchemaString, want) {
			t.Errorf("schemaString %s: missing %s", snap.Metadata.SchemaString, want)
		}
	}
}

func first(s []string) string {
	if len(s) == 0 {
		return ""
	}
	return s[0]
}

func TestScanRawFilters(t *testing.T) {
	l, _, _ := openTestLake(t)
	ctx := context.Background()
	recs := testRecords(2000)
	if err := l.AppendBatch(ctx, Batch{AppID: "s", BatchID: 1, Records: recs}); err != nil {
		t.Fatal(err)
	}
	from, to := us(t0.Add(50*time.Minute)), us(t0.Add(70*time.Minute))
	var want []string
	for i := range recs {
		r := &recs[i]
		if r.Valid() && r.Status == tidemark.StatusLate && r.EventTime >= from && r.EventTime < to {
			want = append(want, recordText(r))
		}
	}
	slices.Sort(want)
	if got := scanAll(t, l, RawQuery{Time: Between(from, to), Status: "late"}); !slices.Equal(got, want) {
		t.Errorf("got %d rows, want %d", len(got), len(want))
	}
	// Projection: only the window columns are filled.
	err := l.ScanRaw(ctx, RawQuery{Columns: WindowColumns}, func(b RawBatch) error {
		if b.Payload != nil || b.Source != nil || len(b.EventTime) != b.N || len(b.Key) != b.N || len(b.Value) != b.N {
			return fmt.Errorf("got payload=%v source=%v event_time=%d, want only window columns", b.Payload != nil, b.Source != nil, len(b.EventTime))
		}
		return nil
	})
	if err != nil {
		t.Error(err)
	}
	// MinCommitVersion: only files of later commits.
	v := tableVersion(t, l, TableRawEvents)
	more := testRecords(20)
	if err := l.AppendBatch(ctx, Batch{AppID: "s", BatchID: 2, Records: more}); err != nil {
		t.Fatal(err)
	}
	if got, want := scanAll(t, l, RawQuery{MinCommitVersion: v}), wantValid(more); !slices.Equal(got, want) {
		t.Errorf("since version %d: got %d rows, want %d", v, len(got), len(want))
	}
}

func tableVersion(t testing.TB, l *Lake, name string) int64 {
	t.Helper()
	snap, err := l.tables[name].dt.Snapshot(context.Background(), -1)
	if err != nil {
		t.Fatal(err)
	}
	return snap.Version
}

func TestReplayedBatchIsNoOp(t *testing.T) {
	l, _, _ := openTestLake(t)
	ctx := context.Background()
	b := Batch{AppID: "s1", BatchID: 7, Records: testRecords(100), Closed: []WindowRow{windowRow(t0, "/a", 1, 1)}}
	if err := l.AppendBatch(ctx, b); err != nil {
		t.Fatal(err)
	}
	before, err := l.Tables(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []int64{7, 3} { // the same batch, and an older one
		b.BatchID = id
		if err := l.AppendBatch(ctx, b); err != nil {
			t.Fatal(err)
		}
	}
	after, err := l.Tables(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(before, after) {
		t.Errorf("got tables %+v after replay, want %+v", after, before)
	}
	if got, want := len(scanAll(t, l, RawQuery{})), len(wantValid(b.Records)); got != want {
		t.Errorf("got %d raw rows, want %d", got, want)
	}
}

func TestUpsertEachKeyOnce(t *testing.T) {
	l, _, _ := openTestLake(t)
	ctx := context.Background()
	day2 := t0.Add(24 * time.Hour)
	steps := [][]WindowRow{
		{windowRow(t0, "/a", 1, 1), windowRow(t0, "/b", 2, 1)},
		{windowRow(t0.Add(10*time.Minute), "/a", 5, 1)}, // new window: appends
		{windowRow(t0, "/a", 4, 2), windowRow(day2, "/a", 1, 1)},
		{windowRow(t0, "/a", 6, 3), windowRow(t0, "/a", 7, 3)}, // twice in one call: last wins
	}
	var log []ReconcileRow
	for i, rows := range steps {
		if i == 2 {
			old := windowRow(t0, "/a", 1, 1).Agg
			log = []ReconcileRow{{RunID: "r1", Window: rows[0].Window, Key: rows[0].Key, Old: &old, New: rows[0].Agg, LateRows: 3, CorrectedAt: us(t0)}}
		}
		if err := l.Upsert(ctx, rows, "reconcile", int64(i+1), log); err != nil {
			t.Fatal(err)
		}
		log = nil
	}
	latest := tableVersion(t, l, TableWindowResults)
	for v := int64(1); v <= latest; v++ {
		rows, err := l.Windows(ctx, AllFrom, AllTo, v)
		if err != nil {
			t.Fatal(err)
		}
		seen := map[windowID]bool{}
		for _, r := range rows {
			if seen[r.id()] {
				t.Errorf("version %d: window %s key %s appears twice", v, r.Window, r.Key)
			}
			seen[r.id()] = true
		}
	}
	rows, err := l.Windows(ctx, AllFrom, AllTo, -1)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range rows {
		got = append(got, fmt.Sprintf("%s %s %d rev%d", tidemark.FormatTime(r.Window.Start), r.Key, r.Agg.Count, r.Revision))
	}
	want := []string{
		"2026-01-01T10:00:00Z /a|∅ 7 rev3",
		"2026-01-01T10:00:00Z /b|∅ 2 rev1",
		"2026-01-01T10:10:00Z /a|∅ 5 rev1",
		"2026-01-02T10:00:00Z /a|∅ 1 rev1",
	}
	if !slices.Equal(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
	// A retried run is a no-op.
	if err := l.Upsert(ctx, steps[0], "reconcile", 1, nil); err != nil {
		t.Fatal(err)
	}
	if v := tableVersion(t, l, TableWindowResults); v != latest {
		t.Errorf("got version %d after a retried upsert, want %d", v, latest)
	}
	logRows := readTable(t, l, TableReconcileLog)
	if len(logRows) != 1 || !strings.Contains(logRows[0], "old_count=1 new_count=4 ") || !strings.Contains(logRows[0], "late_rows=3") {
		t.Errorf("reconcile_log: got %q", logRows)
	}
	// Range: only the first day.
	rows, err = l.Windows(ctx, us(t0), us(t0.Add(time.Hour)), -1)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 3 {
		t.Errorf("got %d windows in the first hour, want 3", len(rows))
	}
}

func TestCrashBeforeCommitThenVacuum(t *testing.T) {
	l, dir, clock := openTestLake(t)
	ctx := context.Background()
	recs := testRecords(200)
	if err := l.AppendBatch(ctx, Batch{AppID: "s", BatchID: 1, Records: recs}); err != nil {
		t.Fatal(err)
	}
	before := tableVersion(t, l, TableRawEvents)
	// The crash: data files are put, the commit never happens.
	var valid []int
	for i := range recs {
		if recs[i].Valid() {
			valid = append(valid, i)
		}
	}
	orphans, err := l.writeRaw(ctx, recs, valid, 0, 2)
	if err != nil {
		t.Fatal(err)
	}
	if v := tableVersion(t, l, TableRawEvents); v != before {
		t.Errorf("got version %d, want %d", v, before)
	}
	if got, want := scanAll(t, l, RawQuery{}), wantValid(recs); !slices.Equal(got, want) {
		t.Errorf("got %d rows, want %d", len(got), len(want))
	}
	// Too young to vacuum.
	rep, err := l.Vacuum(ctx, VacuumOptions{Retain: time.Hour, Force: true})
	if err != nil {
		t.Fatal(err)
	}
	if rep.FilesRemoved != 0 {
		t.Errorf("got %d files vacuumed inside the retention, want 0: %v", rep.FilesRemoved, rep.Deleted)
	}
	clock.set(time.Now().Add(2 * time.Hour))
	rep, err = l.Vacuum(ctx, VacuumOptions{Retain: time.Hour, Force: true, DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	if rep.FilesRemoved != len(orphans) {
		t.Errorf("dry run: got %d files, want the %d orphans", rep.FilesRemoved, len(orphans))
	}
	rep, err = l.Vacuum(ctx, VacuumOptions{Retain: time.Hour, Force: true})
	if err != nil {
		t.Fatal(err)
	}
	var wantDeleted []string
	for _, o := range orphans {
		wantDeleted = append(wantDeleted, "raw_events/"+o.Path)
		if _, err := os.Stat(filepath.Join(dir, "raw_events", o.Path)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("orphan %s still there: %v", o.Path, err)
		}
	}
	slices.Sort(wantDeleted)
	if !slices.Equal(rep.Deleted, wantDeleted) {
		t.Errorf("got deleted %v, want %v", rep.Deleted, wantDeleted)
	}
	if got, want := scanAll(t, l, RawQuery{}), wantValid(recs); !slices.Equal(got, want) {
		t.Errorf("after vacuum: got %d rows, want %d", len(got), len(want))
	}
	if _, err := os.Stat(filepath.Join(dir, "raw_events", "_delta_log", "00000000000000000000.json")); err != nil {
		t.Errorf("vacuum touched the log: %v", err)
	}
}

func TestCompactKeepsRows(t *testing.T) {
	l, _, clock := openTestLake(t)
	ctx := context.Background()
	var all []tidemark.Record
	for b := range 5 {
		recs := testRecords(300)
		for i := range recs {
			recs[i].Offset += int64(b) * 1_000_000
		}
		all = append(all, recs...)
		if err := l.AppendBatch(ctx, Batch{AppID: "s", BatchID: int64(b), Records: recs}); err != nil {
			t.Fatal(err)
		}
	}
	before := tableVersion(t, l, TableRawEvents)
	rep, err := l.Compact(ctx, TableRawEvents, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	// 300 records span 43 minutes of one event hour: 5 files, one partition.
	if rep.FilesRemoved != 5 || rep.FilesAdded != 1 || rep.Version != before+1 {
		t.Errorf("got report %+v, want 5 files into 1 at version %d", rep, before+1)
	}
	if got, want := scanAll(t, l, RawQuery{}), wantValid(all); !slices.Equal(got, want) {
		t.Errorf("got %d rows, want %d", len(got), len(want))
	}
	snap, err := l.tables[TableRawEvents].dt.Snapshot(ctx, -1)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range snap.Files {
		if a.DataChange {
			t.Errorf("file %s: got dataChange=true after compaction, want false", a.Path)
		}
	}
	// Nothing left to merge: no commit.
	rep, err = l.Compact(ctx, TableRawEvents, 1<<20)
	if err != nil || rep.Version != -1 {
		t.Errorf("second compaction: got %+v, %v, want no commit", rep, err)
	}
	// The merged-away files go with vacuum once out of retention.
	clock.set(time.Now().Add(200 * time.Hour))
	vr, err := l.Vacuum(ctx, VacuumOptions{Retain: 168 * time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if vr.FilesRemoved != 5 {
		t.Errorf("got %d files vacuumed, want 5", vr.FilesRemoved)
	}
	if got, want := len(scanAll(t, l, RawQuery{})), len(wantValid(all)); got != want {
		t.Errorf("after vacuum: got %d rows, want %d", got, want)
	}
}

func TestOpenRemembersSetup(t *testing.T) {
	dir := t.TempDir()
	st, err := store.OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	clock := &fakeClock{now: t0}
	if _, err := Open(ctx, st, Config{}); !errors.Is(err, ErrNoLake) {
		t.Errorf("empty store, zero config: got %v, want ErrNoLake", err)
	}
	cfg := testConfig(clock)
	if _, err := Open(ctx, st, cfg); err != nil {
		t.Fatal(err)
	}
	l, err := Open(ctx, st, Config{})
	if err != nil {
		t.Fatal(err)
	}
	if got := l.Config(); !slices.Equal(got.Keys, cfg.Keys) || got.ValueField != "v" || got.Window.Size != cfg.Window.Size {
		t.Errorf("adopted %+v, want %+v", got, cfg)
	}
	tests := []struct {
		name   string
		change func(*Config)
	}{
		{"keys", func(c *Config) { c.Keys = []string{"user"} }},
		{"key order", func(c *Config) { c.Keys = []string{"region", "page"} }},
		{"value", func(c *Config) { c.ValueField = "" }},
		{"window", func(c *Config) { c.Window.Size *= 2 }},
		{"slide", func(c *Config) { c.Window.Slide = c.Window.Size / 2 }},
	}
	for _, tt := range tests {
		c := testConfig(clock)
		tt.change(&c)
		_, err := Open(ctx, st, c)
		if !errors.Is(err, ErrConfigMismatch) || !strings.Contains(err.Error(), "--key page --key region --value v --window 10m0s") {
			t.Errorf("%s: got %v, want a mismatch naming the lake's flags", tt.name, err)
		}
	}
	c := testConfig(clock)
	c.Keys = []string{"count"}
	if _, err := Open(ctx, st, c); err == nil {
		t.Errorf("key named like a column: got no error")
	}
}

func TestCorruptFileInLake(t *testing.T) {
	l, dir, _ := openTestLake(t)
	ctx := context.Background()
	if err := l.AppendBatch(ctx, Batch{AppID: "s", BatchID: 1, Records: testRecords(50)}); err != nil {
		t.Fatal(err)
	}
	snap, err := l.tables[TableRawEvents].dt.Snapshot(ctx, -1)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "raw_events", snap.Files[0].Path)
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	for i := 4; i < len(b)-8; i += 3 {
		b[i] ^= 0x5a
	}
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	err = l.ScanRaw(ctx, RawQuery{}, func(RawBatch) error { return nil })
	if err == nil || !strings.Contains(err.Error(), snap.Files[0].Path) {
		t.Errorf("got %v, want an error naming %s", err, snap.Files[0].Path)
	}
}

func benchLake(b *testing.B, rows int) *Lake {
	l, _, _ := openTestLake(b)
	recs := testRecords(rows)
	for i := range recs {
		recs[i].Reason = tidemark.ReasonNone
		recs[i].EventTime = us(t0) + int64(i)*10_000 // 100 rows/s: 2 event hours
	}
	if err := l.AppendBatch(context.Background(), Batch{AppID: "s", BatchID: 1, Records: recs}); err != nil {
		b.Fatal(err)
	}
	return l
}

func BenchmarkAppendRaw(b *testing.B) {
	l, _, _ := openTestLake(b)
	const rows = 200_000
	recs := testRecords(rows)
	for i := range recs {
		recs[i].Reason = tidemark.ReasonNone
		recs[i].EventTime = us(t0) + int64(i) // one partition, as a live stream writes
	}
	b.ResetTimer()
	for i := range b.N {
		if err := l.AppendBatch(context.Background(), Batch{AppID: "s", BatchID: int64(i), Records: recs}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)*rows/b.Elapsed().Seconds(), "rows/s")
}

func benchScan(b *testing.B, cols []string) {
	const rows = 500_000
	l := benchLake(b, rows)
	b.ResetTimer()
	for range b.N {
		n := 0
		err := l.ScanRaw(context.Background(), RawQuery{Columns: cols}, func(rb RawBatch) error { n += rb.N; return nil })
		if err != nil || n != rows {
			b.Fatalf("got %d rows, %v", n, err)
		}
	}
	b.ReportMetric(float64(b.N)*rows/b.Elapsed().Seconds(), "rows/s")
}

func BenchmarkScanRawAll(b *testing.B)           { benchScan(b, nil) }
func BenchmarkScanRawWindowColumns(b *testing.B) { benchScan(b, WindowColumns) }

// An upsert with revision bumps changes the revisions it writes, never the
// caller's rows (groupByPartition does not copy rows that come sorted), on
// the first attempt or a retried one.
func TestUpsertBumpLeavesCallerRows(t *testing.T) {
	l, _, _ := openTestLake(t)
	ctx := context.Background()
	upsert := func(rows []WindowRow, version int64) {
		t.Helper()
		m := mergeSpec{h: l.tables[TableWindowResults], rows: fixedRows(rows), txn: &delta.Txn{AppID: "s", Version: version}, op: "STREAMING UPDATE", bump: true}
		if _, err := l.upsertWindows(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	upsert([]WindowRow{windowRow(t0, "/a", 1, 1), windowRow(t0, "/b", 1, 1)}, 1)
	again := []WindowRow{windowRow(t0, "/a", 2, 1), windowRow(t0, "/b", 1, 1)}
	upsert(again, 2)
	if again[0].Revision != 1 || again[1].Revision != 1 {
		t.Errorf("the caller's rows changed: revisions %d, %d, want 1, 1", again[0].Revision, again[1].Revision)
	}
	rows, err := l.Windows(ctx, AllFrom, AllTo, -1)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range rows {
		got = append(got, fmt.Sprintf("%s %d rev%d", r.Key, r.Agg.Count, r.Revision))
	}
	if want := []string{"/a|∅ 2 rev2", "/b|∅ 1 rev1"}; !slices.Equal(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
}

// TestOneLine: a batch whose raw_events and quarantine appends both fail
// reports both on one line (the stream's error is the last line of its
// stderr), and both stay reachable.
func TestOneLine(t *testing.T) {
	a, b := errors.New("append raw_events: down"), errors.New("append quarantine: down")
	if oneLine(nil, nil) != nil || oneLine(a, nil) != a || oneLine(nil, b) != b {
		t.Fatal("a single error or none must come back as it is")
	}
	err := oneLine(a, b)
	if strings.Contains(err.Error(), "\n") || !errors.Is(err, a) || !errors.Is(err, b) {
		t.Fatalf("oneLine(a, b) = %q", err)
	}
}
