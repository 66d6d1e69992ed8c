package lake

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
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
// then appends log to reconcile_log. Both commits carry txn {appID,
// version}, so a retried run is a no-op, as with Upsert.
//
// A key's sessions never overlap at any version: the commit that adds a
// merged session removes every session it covers.
func (l *Lake) UpsertSessions(ctx context.Context, rows, removed []WindowRow, appID string, version int64, log []ReconcileRow) error {
	txn := &delta.Txn{AppID: appID, Version: version}
	if len(rows) > 0 || len(removed) > 0 {
		params := map[string]string{"predicate": "window_start, window_end, keys", "appId": appID, "version": strconv.FormatInt(version, 10)}
		if err := l.replaceWindows(ctx, rows, removed, txn, params); err != nil {
			return fmt.Errorf("upsert sessions: %w", err)
		}
	}
	if len(log) == 0 {
		return nil
	}
	h := l.tables[TableReconcileLog]
	widen, err := l.widenSchema(ctx, h)
	if err != nil {
		return fmt.Errorf("upsert sessions: %w", err)
	}
	err = l.appendTable(ctx, h, txn, widen, "WRITE", map[string]string{"mode": "Append"}, func() ([]addFile, error) {
		f, err := l.writeReconcileLog(ctx, log)
		if err != nil {
			return nil, err
		}
		return []addFile{f}, nil
	})
	if err != nil {
		return fmt.Errorf("upsert sessions: %w", err)
	}
	return nil
}

// replaceWindows is the copy-on-write commit of UpsertSessions: in every
// window_results partition holding a new or a removed row, each file that
// may hold one (by its window_start stats) is removed and one file with
// its surviving rows and the partition's new rows is added (none when
// nothing survives). Rows are matched by window id (start, end, key); a
// new row replaces an equal id.
func (l *Lake) replaceWindows(ctx context.Context, rows, removed []WindowRow, txn *delta.Txn, params map[string]string) error {
	h := l.tables[TableWindowResults]
	drop := make(map[windowID]bool, len(removed))
	news := map[string][]WindowRow{}  // new rows by partition directory
	probe := map[string][]WindowRow{} // new and removed rows, to judge files by
	pvs := map[string]map[string]*string{}
	note := func(r *WindowRow, add bool) {
		pv := h.partition(r)
		dir := h.partitionDir(pv)
		pvs[dir] = pv
		probe[dir] = append(probe[dir], *r)
		if add {
			news[dir] = append(news[dir], *r)
		}
	}
	for i := range rows {
		note(&rows[i], true)
	}
	for i := range removed {
		drop[removed[i].id()] = true
		note(&removed[i], false)
	}
	for _, p := range probe {
		sortWindowRows(p) // mayHold searches them by window start
	}
	touched := slices.Sorted(maps.Keys(probe))
	_, err := l.update(ctx, h, func(snap *delta.Snapshot) (*delta.Transaction, []addFile, error) {
		var written []addFile
		if snap == nil {
			return nil, nil, fmt.Errorf("table missing")
		}
		if v, ok := snap.TxnVersion(txn.AppID); ok && v >= txn.Version {
			return nil, nil, nil
		}
		now := l.clock().UnixMilli()
		var actions []delta.Action
		var nremoved, nadded, outRows int64
		for _, dir := range touched {
			keep := slices.Clone(news[dir])
			replaced := make(map[windowID]bool, len(keep))
			for i := range keep {
				replaced[keep[i].id()] = true
			}
			for i := range snap.Files {
				a := &snap.Files[i]
				if !samePartition(a.PartitionValues, pvs[dir]) || !l.mayHold(a, probe[dir]) {
					continue
				}
				old, err := l.readWindowRows(ctx, h, a)
				if err != nil {
					return nil, written, err
				}
				for _, r := range old {
					if id := r.id(); !replaced[id] && !drop[id] {
						keep = append(keep, r)
					}
				}
				actions = append(actions, delta.Action{Remove: &delta.Remove{
					Path: a.Path, DeletionTimestamp: now, DataChange: true, ExtendedFileMetadata: true,
					PartitionValues: a.PartitionValues, Size: a.Size, Stats: a.Stats,
				}})
				nremoved++
			}
			if len(keep) == 0 {
				continue
			}
			sortWindowRows(keep)
			f, err := l.writeWindowRows(ctx, h, keep, pvs[dir])
			if err != nil {
				return nil, written, err
			}
			written = append(written, f)
			actions = append(actions, f.action(now, true))
			nadded++
			outRows += f.Rows
		}
		return &delta.Transaction{
			Actions:             actions,
			Operation:           "MERGE",
			OperationParameters: params,
			OperationMetrics: map[string]string{
				"numTargetFilesRemoved": strconv.FormatInt(nremoved, 10),
				"numTargetFilesAdded":   strconv.FormatInt(nadded, 10),
				"numOutputRows":         strconv.FormatInt(outRows, 10),
			},
			Txn: txn,
			ReadPredicate: func(pv map[string]*string) bool {
				for _, dir := range touched {
					if samePartition(pv, pvs[dir]) {
						return true
					}
				}
				return false
			},
		}, written, nil
	})
	if err != nil && !errors.Is(err, delta.ErrAlreadyCommitted) {
		return fmt.Errorf("merge %s: %w", h.def.name, err)
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
	keyCol := t.colsOf(l.cfg.Keys)
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
					kb = tidemark.AppendKeyPart(kb, string(data[c].bytes[j]), data[c].isNull(j))
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
		if _, hi, has := fileTimeRange(a, "window_end"); has && hi <= t {
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
