package lake

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"tidemark"
	"tidemark/lake/delta"
	"tidemark/lake/store"
)

// oldSessionLake creates a session lake as tidemark made them before
// reconcile_log had replaced_start/replaced_end, and opens it.
func oldSessionLake(t *testing.T) (*Lake, store.Store) {
	t.Helper()
	ctx := context.Background()
	st, err := store.OpenDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	clock := &fakeClock{now: t0}
	cfg := Config{Keys: []string{"user"}, ValueField: "v", SessionGap: 5 * time.Minute, Clock: clock.Now}
	old := &Lake{st: st, cfg: cfg, clock: clock.Now, tables: map[string]*handle{}}
	old.cfg.Window = tidemark.WindowSpec{Size: cfg.SessionGap.Microseconds(), Slide: cfg.SessionGap.Microseconds()}
	h := &handle{def: reconcileLogTable(cfg.Keys, nil, false), dt: delta.Open(st, TableReconcileLog, delta.Options{Clock: clock.Now})}
	if err := old.create(ctx, h); err != nil {
		t.Fatal(err)
	}
	l, err := Open(ctx, st, Config{Clock: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	if l.Config().SessionGap != cfg.SessionGap {
		t.Fatalf("adopted gap %d", l.Config().SessionGap)
	}
	return l, st
}

func session(user string, from, to time.Duration, count int64, rev int64) WindowRow {
	w := tidemark.Window{Start: t0.Add(from).UnixMicro(), End: t0.Add(to).UnixMicro()}
	return WindowRow{Result: tidemark.Result{Window: w, Key: tidemark.MakeKey(tidemark.KeyPart{Value: user}), Agg: tidemark.Agg{Count: count}, Final: true},
		Origin: OriginStream, Revision: rev, ComputedAt: t0.UnixMicro()}
}

func rowsText(t *testing.T, l *Lake) string {
	t.Helper()
	rows, err := l.Windows(context.Background(), AllFrom, AllTo, 0)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, r := range rows {
		out = append(out, fmt.Sprintf("%s %s n=%d %s rev %d", r.Window, r.Key, r.Agg.Count, r.Origin, r.Revision))
	}
	return strings.Join(out, "\n")
}

// TestUpsertSessions: one commit adds a merged session and removes the
// ones it replaces, in its own window_date partition and in the next day's
// (rows of other keys and sessions there stay); a retried commit (same txn) changes nothing; and the reconcile_log
// of a session lake made before replaced_start existed is widened by a
// metaData action that keeps the old fields and appends the new ones.
func TestUpsertSessions(t *testing.T) {
	ctx := context.Background()
	l, _ := oldSessionLake(t)
	a := session("u1", 14*time.Hour-5*time.Minute, 14*time.Hour, 1, 1) // 23:55 - 00:00
	b := session("u1", 14*time.Hour+time.Minute, 14*time.Hour+6*time.Minute, 1, 1)
	other := session("u2", 14*time.Hour+2*time.Minute, 14*time.Hour+7*time.Minute, 1, 1)
	c := session("u1", 0, 5*time.Minute, 3, 1)
	if err := l.Upsert(ctx, []WindowRow{a, b, other, c}, "stream", 1, nil); err != nil {
		t.Fatal(err)
	}
	merged := session("u1", 14*time.Hour-5*time.Minute, 14*time.Hour+6*time.Minute, 3, 2)
	merged.Origin = OriginBatch
	log := []ReconcileRow{
		{RunID: "r", Window: merged.Window, Key: merged.Key, Old: &a.Agg, New: merged.Agg, LateRows: 1, Replaced: &a.Window},
		{RunID: "r", Window: merged.Window, Key: merged.Key, Old: &b.Agg, New: merged.Agg, LateRows: 1, Replaced: &b.Window},
	}
	for range 2 { // the second time is a retried run: a no-op
		if err := l.UpsertSessions(ctx, []WindowRow{merged}, []WindowRow{a, b}, "run", 1, log); err != nil {
			t.Fatal(err)
		}
	}
	want := "[2026-01-01T10:00:00Z, 2026-01-01T10:05:00Z) u1 n=3 stream rev 1\n" +
		"[2026-01-01T23:55:00Z, 2026-01-02T00:06:00Z) u1 n=3 batch rev 2\n" +
		"[2026-01-02T00:02:00Z, 2026-01-02T00:07:00Z) u2 n=1 stream rev 1"
	if got := rowsText(t, l); got != want {
		t.Errorf("window_results:\n%s\nwant\n%s", got, want)
	}
	got, err := l.ReconcileLog(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || *got[0].Replaced != a.Window || *got[1].Replaced != b.Window || got[0].Old.Count != 1 || got[1].New.Count != 3 {
		t.Errorf("reconcile_log: %+v", got)
	}
	// Only u1's sessions were rewritten: one commit in window_results.
	if v, err := l.Version(ctx, TableWindowResults); err != nil || v != 2 {
		t.Errorf("window_results at version %d (%v), want 2 (create, stream, merge)", v, err)
	}
	snap, err := l.tables[TableReconcileLog].dt.Snapshot(ctx, -1)
	if err != nil {
		t.Fatal(err)
	}
	schema, err := delta.ParseSchema(snap.Metadata.SchemaString)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range schema.Fields {
		names = append(names, f.Name+":"+f.Type.Name)
	}
	wantNames := append(colNamesTyped(reconcileLogTable([]string{"user"}, nil, false)), "replaced_start:timestamp", "replaced_end:timestamp")
	if !slices.Equal(names, wantNames) {
		t.Errorf("reconcile_log schema %v, want %v", names, wantNames)
	}
	// A second log append does not widen again.
	if widen, err := l.widenSchema(ctx, l.tables[TableReconcileLog]); err != nil || widen != nil {
		t.Errorf("widen after widening: %v %v", widen, err)
	}
}

func colNamesTyped(t *table) []string {
	var out []string
	for _, c := range t.cols {
		out = append(out, c.name+":"+c.kind.deltaType())
	}
	return out
}

// TestReconcileLogColumns: only a session lake's reconcile_log has the
// replaced columns; a window lake's schema is as before.
func TestReconcileLogColumns(t *testing.T) {
	for _, sessions := range []bool{false, true} {
		_, has := reconcileLogTable(nil, nil, sessions).index[ColReplacedStart]
		if has != sessions {
			t.Errorf("sessions=%v: replaced_start present %v", sessions, has)
		}
	}
}
