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

// ReconcileRow is one row of reconcile_log: a window corrected by a run.
type ReconcileRow struct {
	RunID       string
	Window      tidemark.Window
	Key         tidemark.Key
	Old         *tidemark.Agg // nil when window_results had no row
	New         tidemark.Agg
	LateRows    int64 // late rows found in the window
	CorrectedAt int64 // µs
}

// Upsert replaces (or inserts) rows in window_results by window key, then
// appends log to reconcile_log; both commits carry txn {appID, version}, so
// a retried run is a no-op. See merge for how the rewrite works.
func (l *Lake) Upsert(ctx context.Context, rows []WindowRow, appID string, version int64, log []ReconcileRow) error {
	txn := &delta.Txn{AppID: appID, Version: version}
	if len(rows) > 0 {
		params := map[string]string{"predicate": "window_start, window_end, keys", "appId": appID, "version": strconv.FormatInt(version, 10)}
		if _, err := l.merge(ctx, rows, txn, "MERGE", params); err != nil {
			return fmt.Errorf("upsert windows: %w", err)
		}
	}
	if len(log) > 0 {
		h := l.tables[TableReconcileLog]
		err := l.appendTable(ctx, h, txn, nil, "WRITE", map[string]string{"mode": "Append"}, func() ([]addFile, error) {
			f, err := l.writeReconcileLog(ctx, log)
			if err != nil {
				return nil, err
			}
			return []addFile{f}, nil
		})
		if err != nil {
			return fmt.Errorf("upsert windows: %w", err)
		}
	}
	return nil
}

// merge is the copy-on-write upsert of window_results: one commit that
// removes every file of the touched partitions that may hold one of the
// rows' keys (by its window_start stats) and adds, per partition, one file
// with the surviving old rows and the new ones. Files that cannot hold a key
// stay, so an emission of new windows appends. The commit carries txn and
// reads the touched partitions: a concurrent change there redoes the merge.
func (l *Lake) merge(ctx context.Context, rows []WindowRow, txn *delta.Txn, op string, params map[string]string) (int64, error) {
	h := l.tables[TableWindowResults]
	// The last row for a key wins.
	byID := make(map[windowID]int, len(rows))
	for i := range rows {
		byID[rows[i].id()] = i
	}
	byDate := map[string][]WindowRow{}
	for i := range rows {
		if byID[rows[i].id()] != i {
			continue
		}
		d := dateOf(rows[i].Window.Start)
		byDate[d] = append(byDate[d], rows[i])
	}
	v, err := l.update(ctx, h, func(snap *delta.Snapshot) (*delta.Transaction, []addFile, error) {
		var written []addFile // files of this attempt
		if snap == nil {
			return nil, nil, fmt.Errorf("table missing")
		}
		if v, ok := snap.TxnVersion(txn.AppID); ok && v >= txn.Version {
			return nil, nil, nil
		}
		now := l.clock().UnixMilli()
		var actions []delta.Action
		var removed, added, outRows int64
		for _, d := range slices.Sorted(maps.Keys(byDate)) {
			news := byDate[d]
			keep := append([]WindowRow(nil), news...)
			for i := range snap.Files {
				a := &snap.Files[i]
				if pv := a.PartitionValues["window_date"]; pv == nil || *pv != d || !mayHold(a, news) {
					continue
				}
				old, err := l.readWindowRows(ctx, a.Key(h.dt.Path()))
				if err != nil {
					return nil, written, err
				}
				for _, r := range old {
					if _, replaced := byID[r.id()]; !replaced {
						keep = append(keep, r)
					}
				}
				actions = append(actions, delta.Action{Remove: &delta.Remove{
					Path: a.Path, DeletionTimestamp: now, DataChange: true, ExtendedFileMetadata: true,
					PartitionValues: a.PartitionValues, Size: a.Size, Stats: a.Stats,
				}})
				removed++
			}
			sortWindowRows(keep)
			f, err := l.writeWindowRows(ctx, keep, d)
			if err != nil {
				return nil, written, err
			}
			written = append(written, f)
			actions = append(actions, f.action(now, true))
			added++
			outRows += f.Rows
		}
		touched := slices.Sorted(maps.Keys(byDate))
		return &delta.Transaction{
			Actions:             actions,
			Operation:           op,
			OperationParameters: params,
			OperationMetrics: map[string]string{
				"numTargetFilesRemoved": strconv.FormatInt(removed, 10),
				"numTargetFilesAdded":   strconv.FormatInt(added, 10),
				"numOutputRows":         strconv.FormatInt(outRows, 10),
			},
			Txn: txn,
			ReadPredicate: func(pv map[string]*string) bool {
				d := pv["window_date"]
				return d == nil || slices.Contains(touched, *d)
			},
		}, written, nil
	})
	switch {
	case errors.Is(err, delta.ErrAlreadyCommitted):
		return v, nil
	case err != nil:
		return -1, fmt.Errorf("merge %s: %w", h.def.name, err)
	}
	return v, nil
}

// mayHold reports whether a window_results file may hold one of rows' keys,
// judged by its window_start stats (no stats: it may).
func mayHold(a *delta.Add, rows []WindowRow) bool {
	lo, hi, ok := fileTimeRange(a, "window_start")
	if !ok {
		return true
	}
	for i := range rows {
		if s := rows[i].Window.Start; s >= lo && s < hi {
			return true
		}
	}
	return false
}

// writeReconcileLog writes the log rows as one file (the table is
// unpartitioned).
func (l *Lake) writeReconcileLog(ctx context.Context, rows []ReconcileRow) (addFile, error) {
	t := l.tables[TableReconcileLog].def
	w, err := newFileWriter(t)
	if err != nil {
		return addFile{}, err
	}
	keyCol := t.colsOf(l.cfg.Keys)
	for i := range rows {
		r := &rows[i]
		w.str(t.col("run_id"), r.RunID)
		w.long(t.col("window_start"), r.Window.Start)
		w.long(t.col("window_end"), r.Window.End)
		w.key(keyCol, r.Key)
		var old tidemark.Agg
		if r.Old != nil {
			old = *r.Old
			w.long(t.col("old_count"), old.Count)
		} else {
			w.null(t.col("old_count"))
		}
		w.long(t.col("new_count"), r.New.Count)
		w.optDouble(t.col("old_sum"), old.Total(), old.Values > 0)
		w.optDouble(t.col("new_sum"), r.New.Total(), r.New.Values > 0)
		w.optDouble(t.col("old_min"), old.Min, old.Values > 0)
		w.optDouble(t.col("new_min"), r.New.Min, r.New.Values > 0)
		w.optDouble(t.col("old_max"), old.Max, old.Values > 0)
		w.optDouble(t.col("new_max"), r.New.Max, r.New.Values > 0)
		w.long(t.col("late_rows"), r.LateRows)
		w.long(t.col("corrected_at"), r.CorrectedAt)
		if err := w.endRow(); err != nil {
			w.abort()
			return addFile{}, err
		}
	}
	f, err := w.finish(ctx, l.st, "")
	if err != nil {
		return addFile{}, err
	}
	return addFile{f, map[string]*string{}}, nil
}
