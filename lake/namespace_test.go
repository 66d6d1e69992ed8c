package lake

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"tidemark"
	"tidemark/lake/delta"
	"tidemark/lake/store"
)

// ownNameKeys take the names of tidemark's own columns (data and partition
// columns of every table, in other cases too).
var ownNameKeys = []string{"status", "Source", "count", "event_date", "window_date", "tidemark_shard", "file", "OFFSET", "payload", "value", "reason", "old_count", "late_rows"}

// TestOwnNamesAsKeys: keys named like tidemark's own columns are columns
// under their own names; the own columns move to _tm_<name> in that lake
// only, recorded in the tables' configuration, and every reader and
// writer of the lake (appends, scans, windows, upserts, the reconcile log,
// compaction) finds them there, also after the lake is opened again by a
// run that adopts its setup.
func TestOwnNamesAsKeys(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	st, err := store.OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	clock := &fakeClock{now: t0}
	cfg := testConfig(clock)
	cfg.Keys = ownNameKeys
	l, err := Open(ctx, st, cfg)
	if err != nil {
		t.Fatal(err)
	}
	recs := testRecords(500)
	for i := range recs {
		parts := recs[i].Key.Parts()
		for j := 2; j < len(ownNameKeys); j++ {
			parts = append(parts, tidemark.KeyPart{Value: fmt.Sprintf("%s-%d", ownNameKeys[j], i%3)})
		}
		recs[i].Key = tidemark.MakeKey(parts...)
	}
	key := tidemark.MakeKey(func() []tidemark.KeyPart {
		var p []tidemark.KeyPart
		for _, k := range ownNameKeys {
			p = append(p, tidemark.KeyPart{Value: "k-" + k})
		}
		return p
	}()...)
	closed := []WindowRow{windowRow(t0, "/a", 3, 1)}
	closed[0].Key = key
	if err := l.AppendBatch(ctx, Batch{AppID: "s1", BatchID: 1, Records: recs, Closed: closed, IngestTime: us(t0.Add(time.Hour))}); err != nil {
		t.Fatal(err)
	}
	fix := closed[0]
	fix.Agg.Count, fix.Agg.Values, fix.Origin, fix.Revision, fix.Watermark = 9, 9, OriginBatch, 2, nil
	if err := l.Upsert(ctx, []WindowRow{fix}, "reconcile", 1, []ReconcileRow{{RunID: "r1", Window: fix.Window, Key: key, Old: &closed[0].Agg, New: fix.Agg, LateRows: 6, CorrectedAt: us(t0)}}); err != nil {
		t.Fatal(err)
	}
	check := func(l *Lake, when string) {
		t.Helper()
		if got, want := scanAll(t, l, RawQuery{}), wantValid(recs); !slices.Equal(got, want) {
			t.Errorf("%s: raw_events: got %d rows, want %d; first got %q want %q", when, len(got), len(want), first(got), first(want))
		}
		if got := scanAll(t, l, RawQuery{Status: "late", Time: Between(us(t0), us(t0.Add(30*time.Minute)))}); len(got) == 0 {
			t.Errorf("%s: no late rows found by status (pruned by the renamed status stats?)", when)
		}
		ws, err := l.Windows(ctx, AllFrom, AllTo, -1)
		if err != nil {
			t.Fatal(err)
		}
		if len(ws) != 1 || windowText(ws[0]) != windowText(fix) {
			t.Errorf("%s: windows: got %v, want %v", when, ws, fix)
		}
		log, err := l.ReconcileLog(ctx)
		if err != nil || len(log) != 1 || log[0].Key != key || log[0].New.Count != 9 {
			t.Errorf("%s: reconcile log: got %+v %v", when, log, err)
		}
		for _, name := range tableNames {
			snap, err := l.tables[name].dt.Snapshot(ctx, -1)
			if err != nil {
				t.Fatal(err)
			}
			if got := snap.Metadata.Configuration[confColumns]; !strings.Contains(got, `"status":"_tm_status"`) || !strings.Contains(got, `"event_date":"_tm_event_date"`) {
				t.Errorf("%s: table %s: %s = %q", when, name, confColumns, got)
			}
		}
	}
	check(l, "written")
	raw := readTable(t, l, TableRawEvents)
	if !strings.HasPrefix(raw[0], "_tm_event_date=2026-01-01 event_hour=10 event_time=") || !strings.Contains(raw[0], ` _tm_status="late"`) || !strings.Contains(raw[0], ` count="count-0"`) || !strings.Contains(raw[0], ` _tm_offset=`) {
		t.Errorf("raw_events row: got %s", raw[0])
	}
	if w := readTable(t, l, TableWindowResults); len(w) != 1 || !strings.Contains(w[0], " count=\"k-count\"") || !strings.Contains(w[0], " _tm_count=9 ") || !strings.HasPrefix(w[0], "_tm_window_date=2026-01-01 ") {
		t.Errorf("window_results: got %q", w)
	}
	if q := readTable(t, l, TableQuarantine); len(q) == 0 || !strings.Contains(q[0], " _tm_reason=") || !strings.Contains(q[0], " _tm_source=") {
		t.Errorf("quarantine: got %q", first(q))
	}
	snap, _ := l.tables[TableRawEvents].dt.Snapshot(ctx, -1)
	for _, want := range []string{`{"name":"status","type":"string"`, `{"name":"_tm_status","type":"string"`, `{"name":"OFFSET","type":"string"`, `{"name":"_tm_offset","type":"long"`, `{"name":"_tm_event_date","type":"string"`} {
		if !strings.Contains(snap.Metadata.SchemaString, want) {
			t.Errorf("schemaString %s: missing %s", snap.Metadata.SchemaString, want)
		}
	}
	for _, name := range []string{TableRawEvents, TableQuarantine, TableWindowResults} {
		if _, err := l.Compact(ctx, name, 0); err != nil {
			t.Fatalf("compact %s: %v", name, err)
		}
	}
	again, err := Open(ctx, st, Config{Clock: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	check(again, "adopted")
}

// TestNoNamespaceWithoutClash: a lake whose keys take no own name records
// no namespace and names every column as lakes always did, so lakes made
// before the namespace existed are read and written unchanged.
func TestNoNamespaceWithoutClash(t *testing.T) {
	l, _, _ := openTestLake(t)
	for _, name := range tableNames {
		snap, err := l.tables[name].dt.Snapshot(context.Background(), -1)
		if err != nil {
			t.Fatal(err)
		}
		if v, ok := snap.Metadata.Configuration[confColumns]; ok {
			t.Errorf("table %s records %s = %q", name, confColumns, v)
		}
		if strings.Contains(snap.Metadata.SchemaString, ownPrefix) {
			t.Errorf("table %s: schema %s", name, snap.Metadata.SchemaString)
		}
	}
}

// TestKeyFieldsRemembered: a lake remembers its keys' field specs in
// canonical form (request.path and path=request.path are one setup), and
// a lake made before nested fields, whose dotted key was a literal
// top-level name, keeps meaning it.
func TestKeyFieldsRemembered(t *testing.T) {
	ctx := context.Background()
	st, err := store.OpenDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	clock := &fakeClock{now: t0}
	cfg := testConfig(clock)
	cfg.Keys = []string{"path=request.path", "`a.b`"}
	if _, err := Open(ctx, st, cfg); err != nil {
		t.Fatal(err)
	}
	cfg.Keys = []string{"request.path", "`a.b`"}
	l, err := Open(ctx, st, cfg)
	if err != nil {
		t.Fatalf("the same keys, spelt otherwise: %v", err)
	}
	if got := l.Config().KeyNames(); !slices.Equal(got, []string{"path", "a.b"}) {
		t.Errorf("key names %q", got)
	}
	cfg.Keys = []string{"request.path", "a.b"}
	if _, err := Open(ctx, st, cfg); err == nil || !strings.Contains(err.Error(), "--key request.path --key `a.b`") {
		t.Errorf("a.b (nested) on a lake of `a.b` (literal): got %v", err)
	}

	// A lake written before nested fields: tidemark.keys only.
	old := t.TempDir()
	ost, _ := store.OpenDir(old)
	ocfg := testConfig(clock)
	ocfg.Keys = []string{"a.b", "page"}
	lk := &Lake{st: ost, cfg: ocfg, clock: clock.Now, tables: map[string]*handle{}}
	lk.cfg.Window.Slide = lk.cfg.Window.Size
	for _, name := range tableNames {
		h := &handle{def: rawEventsTable([]string{"a.b", "page"}, nil, true, tidemark.AggList{}), dt: delta.Open(ost, name, delta.Options{Clock: clock.Now})}
		conf := lk.cfg.configuration()
		delete(conf, confKeyFields)
		conf[confKeys] = `["a.b","page"]`
		if _, err := h.dt.Commit(ctx, &delta.Transaction{ReadVersion: -1, Operation: "CREATE TABLE", Actions: []delta.Action{
			{Protocol: &delta.Protocol{MinReaderVersion: 1, MinWriterVersion: 2}},
			{Metadata: &delta.Metadata{ID: name, Format: delta.Format{Provider: "parquet", Options: map[string]string{}}, SchemaString: h.def.schemaString(), PartitionColumns: h.def.partCols, Configuration: conf}},
		}}); err != nil {
			t.Fatal(err)
		}
	}
	adopted, err := Open(ctx, ost, Config{Clock: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	if got := adopted.Config().Keys; !slices.Equal(got, []string{"`a.b`", "page"}) {
		t.Errorf("old lake's keys adopted as %q", got)
	}
	if got := adopted.Config().KeyNames(); !slices.Equal(got, []string{"a.b", "page"}) {
		t.Errorf("old lake's key names %q", got)
	}
}

// TestOpenRemembersInput: a lake remembers how its lines are read (format,
// time field, unit, layout) and refuses a run that reads them otherwise in
// one line, unless it asks to change them (ChangeInput); a run that sets
// no input (reconcile, windows) is not checked; a lake that remembers none
// takes the first one given.
func TestOpenRemembersInput(t *testing.T) {
	ctx := context.Background()
	st, err := store.OpenDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	clock := &fakeClock{now: t0}
	cfg := testConfig(clock)
	if _, err := Open(ctx, st, cfg); err != nil { // no input: a lake made before inputs were remembered
		t.Fatal(err)
	}
	ts := Input{Format: "ndjson", TimeField: "ts", TimeUnit: "ms"}
	cfg.Input = ts
	l, err := Open(ctx, st, cfg)
	if err != nil {
		t.Fatalf("first input on an old lake: %v", err)
	}
	if err := l.AppendBatch(ctx, Batch{AppID: "s", BatchID: 1, Records: testRecords(20), IngestTime: us(t0)}); err != nil {
		t.Fatal(err)
	}
	for _, in := range []Input{
		{Format: "ndjson", TimeField: "event_time", TimeUnit: "ms"},
		{Format: "ndjson", TimeField: "ts", TimeUnit: "s"},
		{Format: "csv", TimeField: "ts", TimeUnit: "ms"},
		{Format: "ndjson", TimeField: "ts", TimeUnit: "ms", TimeLayout: "2006-01-02 15:04"},
	} {
		cfg.Input = in
		_, err := Open(ctx, st, cfg)
		if !errors.Is(err, ErrConfigMismatch) || !strings.Contains(err.Error(), "the lake reads its lines with --format ndjson --time-field ts --time-unit ms, this run asks for "+in.describe()+"; use the same flags, or add --change-input") {
			t.Errorf("%+v: got %v", in, err)
		}
		if err != nil && strings.Contains(err.Error(), "\n") {
			t.Errorf("error is not one line: %q", err)
		}
	}
	if _, err := Open(ctx, st, Config{Clock: clock.Now}); err != nil {
		t.Errorf("adopting without an input: %v", err)
	}
	cfg.Input, cfg.ChangeInput = Input{Format: "csv", TimeField: "time", TimeUnit: "s"}, true
	if _, err := Open(ctx, st, cfg); err != nil {
		t.Fatalf("changing the input on purpose: %v", err)
	}
	cfg.ChangeInput = false
	if _, err := Open(ctx, st, cfg); err != nil {
		t.Errorf("the changed input, again: %v", err)
	}
	cfg.Input = ts
	if _, err := Open(ctx, st, cfg); !errors.Is(err, ErrConfigMismatch) {
		t.Errorf("the old input after the change: got %v", err)
	}
	l, err = Open(ctx, st, Config{Clock: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range tableNames {
		snap, err := l.tables[name].dt.Snapshot(ctx, -1)
		if err != nil {
			t.Fatal(err)
		}
		if got := snap.Metadata.Configuration[confInput]; got != `{"format":"csv","timeField":"time","timeUnit":"s"}` {
			t.Errorf("table %s remembers %s", name, got)
		}
	}
	// A new lake remembers its input from its creation; while it holds
	// no line (a first run stopped before its first commit) another run
	// may read otherwise.
	st2, _ := store.OpenDir(t.TempDir())
	cfg.Input, cfg.ChangeInput = ts, false
	if _, err := Open(ctx, st2, cfg); err != nil {
		t.Fatal(err)
	}
	cfg.Input.TimeUnit = "s"
	l2, err := Open(ctx, st2, cfg)
	if err != nil {
		t.Fatalf("empty lake, other unit: %v", err)
	}
	q := testRecords(10)
	for i := range q {
		q[i].Reason = tidemark.ReasonMissingTime
	}
	if err := l2.AppendBatch(ctx, Batch{AppID: "s", BatchID: 1, Records: q, IngestTime: us(t0)}); err != nil {
		t.Fatal(err)
	}
	cfg.Input.TimeUnit = "ms"
	if _, err := Open(ctx, st2, cfg); !errors.Is(err, ErrConfigMismatch) || !strings.Contains(err.Error(), "--time-unit s, this run asks for --format ndjson --time-field ts --time-unit ms") {
		t.Errorf("lake with quarantined lines, other unit: got %v", err)
	}
}
