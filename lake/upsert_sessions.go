package lake

import (
	"context"
	"fmt"
	"strconv"

	"tidemark"
	"tidemark/lake/delta"
)

// Columns of a session lake's reconcile_log naming the stored session a
// correction replaced (see reconcileLogTable).
const (
	ColReplacedStart = "replaced_start"
	ColReplacedEnd   = "replaced_end"
)

// UpsertSessions writes the corrections of a session reconcile: it adds
// rows to window_results and removes the stored rows in removed (the
// sessions the new ones replace; a removed row may live in another
// window_date partition than the row replacing it), in one Delta commit,
// then appends log to reconcile_log, as one unit (see Upsert).
//
// A key's sessions never overlap at any version: the commit that adds a
// merged session removes every session it covers.
func (l *Lake) UpsertSessions(ctx context.Context, rows, removed []WindowRow, appID string, version int64, log []ReconcileRow) error {
	txn := &delta.Txn{AppID: appID, Version: version}
	err := l.upsertLogged(ctx, txn, log, func() error {
		if len(rows) == 0 && len(removed) == 0 {
			return nil
		}
		params := map[string]string{"predicate": "window_start, window_end, keys", "appId": appID, "version": strconv.FormatInt(version, 10)}
		// upsertWindows removes every file that may hold a new or a removed
		// row and writes each touched partition's survivors and new rows.
		m := mergeSpec{h: l.tables[TableWindowResults], rows: fixedRows(rows), remove: removed, txn: txn, op: "MERGE", params: params}
		_, err := l.upsertWindows(ctx, m)
		return err
	})
	if err != nil {
		return fmt.Errorf("upsert sessions: %w", err)
	}
	return nil
}

// widenSchema returns the metaData action that adds the table's columns
// missing from its Delta schema (a session lake created before reconcile_log
// had replaced_start/replaced_end), or nil when none is missing: Delta
// schema evolution, the existing fields kept as they are and the new ones
// appended, nullable, so older files read them as null.
func (l *Lake) widenSchema(ctx context.Context, h *handle) ([]delta.Action, error) {
	snap, err := h.dt.Snapshot(ctx, -1)
	if err != nil {
		return nil, fmt.Errorf("read %s schema: %w", h.def.name, err)
	}
	schema, err := delta.ParseSchema(snap.Metadata.SchemaString)
	if err != nil {
		return nil, fmt.Errorf("read %s schema: %w", h.def.name, err)
	}
	n := len(schema.Fields)
	for _, c := range h.def.cols {
		if _, ok := schema.Field(c.name); !ok {
			schema.Fields = append(schema.Fields, delta.Field(c.name, c.kind.deltaType()))
		}
	}
	if len(schema.Fields) == n {
		return nil, nil
	}
	md := snap.Metadata
	md.SchemaString = schema.String()
	return []delta.Action{{Metadata: &md}}, nil
}

// writeReplaced writes a log row's replaced session into the file, when
// the table has the columns (session lakes only).
func writeReplaced(w *fileWriter, t *table, r *ReconcileRow) {
	cs, ok := t.index[ColReplacedStart]
	if !ok {
		return
	}
	ce := t.col(ColReplacedEnd)
	if r.Replaced == nil {
		w.null(cs)
		w.null(ce)
		return
	}
	w.long(cs, r.Replaced.Start)
	w.long(ce, r.Replaced.End)
}

// ReconcileLog returns every reconcile_log row, in file order: what runs
// corrected and, on a session lake, which stored session each replaced.
func (l *Lake) ReconcileLog(ctx context.Context) ([]ReconcileRow, error) {
	h := l.tables[TableReconcileLog]
	t := h.def
	snap, err := h.dt.Snapshot(ctx, -1)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", t.name, err)
	}
	data := make([]colData, len(t.cols))
	keyCol := t.keyCols()
	_, sessions := t.index[ColReplacedStart]
	var out []ReconcileRow
	var kb []byte
	for i := range snap.Files {
		fr, err := openFileReader(ctx, l.st, snap.Files[i].Key(h.dt.Path()))
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", t.name, err)
		}
		for rg := range fr.numRowGroups() {
			n, err := fr.readRowGroup(rg, t.cols, data)
			if err != nil {
				fr.Close()
				return nil, fmt.Errorf("read %s: %w", t.name, err)
			}
			col := func(name string) *colData { return &data[t.col(name)] }
			agg := func(prefix string, j int) tidemark.Agg {
				a := tidemark.Agg{Count: col(prefix + "count").ints[j]}
				if sum := col(prefix + "sum"); !sum.isNull(j) {
					a.Values, a.Sum = a.Count, sum.floats[j]
					a.Min, a.Max = col(prefix + "min").floats[j], col(prefix + "max").floats[j]
				}
				return a
			}
			for j := range n {
				kb = kb[:0]
				for _, c := range keyCol {
					kb = appendKeyCol(kb, &data[c], t.cols[c].kind, j)
				}
				r := ReconcileRow{
					RunID:       string(col("run_id").bytes[j]),
					Window:      tidemark.Window{Start: col("window_start").ints[j], End: col("window_end").ints[j]},
					Key:         tidemark.Key(kb),
					New:         agg("new_", j),
					LateRows:    col("late_rows").ints[j],
					CorrectedAt: col("corrected_at").ints[j],
				}
				if !col("old_count").isNull(j) {
					old := agg("old_", j)
					r.Old = &old
				}
				if sessions && !col(ColReplacedStart).isNull(j) {
					r.Replaced = &tidemark.Window{Start: col(ColReplacedStart).ints[j], End: col(ColReplacedEnd).ints[j]}
				}
				out = append(out, r)
			}
		}
		fr.Close()
	}
	return out, nil
}

// FirstStartEndingAfter returns the earliest window_start of the
// window_results rows that end after t: on a session lake, the first
// session the stream still held open at watermark t (it emitted them
// later). Files whose window_end stats end at or before t are not read.
func (l *Lake) FirstStartEndingAfter(ctx context.Context, t int64) (start int64, ok bool, err error) {
	h := l.tables[TableWindowResults]
	snap, err := h.dt.Snapshot(ctx, -1)
	if err != nil {
		return 0, false, fmt.Errorf("read %s: %w", h.def.name, err)
	}
	for i := range snap.Files {
		a := &snap.Files[i]
		if _, hi, has := fileTimeRange(a, l.phys("window_end")); has && hi <= t {
			continue
		}
		rows, err := l.readWindowRows(ctx, h, a)
		if err != nil {
			return 0, false, fmt.Errorf("read %s: %w", h.def.name, err)
		}
		for _, r := range rows {
			if r.Window.End > t && (!ok || r.Window.Start < start) {
				start, ok = r.Window.Start, true
			}
		}
	}
	return start, ok, nil
}
