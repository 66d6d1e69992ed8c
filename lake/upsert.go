package lake

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"

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
	// Replaced is the stored session a session lake's correction replaced
	// (see UpsertSessions); nil otherwise.
	Replaced *tidemark.Window
}

// Upsert replaces (or inserts) rows in window_results by window key and
// appends log to reconcile_log, as one unit: both commits carry txn
// {appID, version}, so a retried run is a no-op, and a run that dies
// between them is completed by the next (see upsertLogged). See merge for
// how the rewrite works.
func (l *Lake) Upsert(ctx context.Context, rows []WindowRow, appID string, version int64, log []ReconcileRow) error {
	txn := &delta.Txn{AppID: appID, Version: version}
	err := l.upsertLogged(ctx, txn, log, func() error {
		if len(rows) == 0 {
			return nil
		}
		params := map[string]string{"predicate": "window_start, window_end, keys", "appId": appID, "version": strconv.FormatInt(version, 10)}
		_, err := l.merge(ctx, rows, txn, "MERGE", params)
		return err
	})
	if err != nil {
		return fmt.Errorf("upsert windows: %w", err)
	}
	return nil
}

// mergeSpec is one copy-on-write upsert of a window table (window_results
// or window_partials).
type mergeSpec struct {
	h *handle
	// rows returns the rows to upsert; it is called again for every attempt
	// (the merged rows of window_results are re-read from the partials
	// after a lost race). The last row for a key wins.
	rows   func(ctx context.Context) ([]WindowRow, error)
	txn    *delta.Txn
	extra  []delta.Action // more actions of the commit (watermark txns)
	op     string
	params map[string]string
	// bump gives a row that replaces a different one the old row's
	// revision + 1, and one that replaces an equal one the old revision.
	bump bool
	// check, if set, may refuse an attempt by the snapshot it is built on.
	check func(snap *delta.Snapshot) error
	// remove are rows to delete by window key (a session reconcile's
	// replaced sessions); they may live in partitions no new row does, and
	// a partition left with no row gets no new file.
	remove []WindowRow
	// precommit, if set, is called right before each commit (see
	// updateChecked).
	precommit func(context.Context) error
}

// fixedRows is a mergeSpec.rows that returns rows.
func fixedRows(rows []WindowRow) func(context.Context) ([]WindowRow, error) {
	return func(context.Context) ([]WindowRow, error) { return rows, nil }
}

// merge is the copy-on-write upsert of window_results: one commit that
// removes every file of the touched partitions that may hold one of the
// rows' keys (by its window_start stats) and adds, per partition, one file
// with the surviving old rows and the new ones. Files that cannot hold a key
// stay, so an emission of new windows appends. The commit carries txn and
// reads the touched partitions: a concurrent change there redoes the merge.
func (l *Lake) merge(ctx context.Context, rows []WindowRow, txn *delta.Txn, op string, params map[string]string) (int64, error) {
	return l.upsertWindows(ctx, mergeSpec{h: l.tables[TableWindowResults], rows: fixedRows(rows), txn: txn, op: op, params: params})
}

// upsertWindows is merge on any window table, with rows computed per attempt.
func (l *Lake) upsertWindows(ctx context.Context, m mergeSpec) (int64, error) {
	h, txn := m.h, m.txn
	v, err := l.updateChecked(ctx, h, m.precommit, func(snap *delta.Snapshot) (*delta.Transaction, []addFile, error) {
		var written []addFile // files of this attempt
		if snap == nil {
			return nil, nil, fmt.Errorf("table missing")
		}
		if txn != nil {
			if v, ok := snap.TxnVersion(txn.AppID); ok && v >= txn.Version {
				return nil, nil, nil
			}
		}
		if m.check != nil {
			if err := m.check(snap); err != nil {
				return nil, nil, err
			}
		}
		rows, err := m.rows(ctx)
		if err != nil {
			return nil, nil, err
		}
		rows = l.fillAggs(rows)
		parts := h.withRemovals(h.groupByPartition(rows), h.groupByPartition(m.remove))
		if len(parts) == 0 && len(m.extra) == 0 && txn == nil {
			return nil, nil, nil // nothing to record (a hand-over with nothing to copy)
		}
		now := l.clock().UnixMilli()
		var actions []delta.Action
		var removed, added, outRows int64
		for k := range parts {
			p := &parts[k]
			var kept []WindowRow // old rows no new row replaces
			for i := range snap.Files {
				a := &snap.Files[i]
				if !samePartition(a.PartitionValues, p.pv) || !l.mayHold(a, p.probe()) {
					continue
				}
				old, err := l.readWindowRows(ctx, h, a)
				if err != nil {
					return nil, written, err
				}
				if len(p.remove) > 0 {
					old = replaceRows(&partRows{rows: p.remove}, old, nil, false)
				}
				kept = replaceRows(p, old, kept, m.bump)
				actions = append(actions, delta.Action{Remove: &delta.Remove{
					Path: a.Path, DeletionTimestamp: now, DataChange: true, ExtendedFileMetadata: true,
					PartitionValues: a.PartitionValues, Size: a.Size, Stats: a.Stats,
				}})
				removed++
			}
			out := mergeSorted(p.rows, kept)
			if len(out) == 0 {
				continue // every row of the partition was removed
			}
			f, err := l.writeWindowRows(ctx, h, out, p.pv)
			if err != nil {
				return nil, written, err
			}
			written = append(written, f)
			actions = append(actions, f.action(now, true))
			added++
			outRows += f.Rows
		}
		actions = append(actions, m.extra...)
		return &delta.Transaction{
			Actions:             actions,
			Operation:           m.op,
			OperationParameters: m.params,
			OperationMetrics: map[string]string{
				"numTargetFilesRemoved": strconv.FormatInt(removed, 10),
				"numTargetFilesAdded":   strconv.FormatInt(added, 10),
				"numOutputRows":         strconv.FormatInt(outRows, 10),
			},
			Txn: txn,
			ReadPredicate: func(pv map[string]*string) bool {
				for _, p := range parts {
					if samePartition(pv, p.pv) {
						return true
					}
				}
				return false
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

// samePartition reports whether a file's partition values are want's; a
// value the file lacks (a table not written by tidemark) matches.
func samePartition(got, want map[string]*string) bool {
	for c, w := range want {
		if g := got[c]; g != nil && *g != *w {
			return false
		}
	}
	return true
}

// nextRevision is the revision of row replacing old: old's when the value
// is the same, old's + 1 otherwise, and never below row's own.
func nextRevision(old, row *WindowRow) int64 {
	if sameValue(old.Agg, row.Agg) && old.Final == row.Final && old.Exact == row.Exact && slices.Equal(old.Aggs, row.Aggs) {
		return max(old.Revision, row.Revision)
	}
	return max(old.Revision+1, row.Revision)
}

// mayHold reports whether a window_results or window_partials file may
// hold one of rows' keys (sorted by window start), judged by its
// window_start stats (no stats: it may).
func (l *Lake) mayHold(a *delta.Add, rows []WindowRow) bool {
	lo, hi, ok := l.memo.starts.of(a, l.phys("window_start"))
	if !ok {
		return true
	}
	i, _ := slices.BinarySearchFunc(rows, lo, func(r WindowRow, t int64) int { return cmp.Compare(r.Window.Start, t) })
	return i < len(rows) && rows[i].Window.Start < hi
}

// startRanges caches the window_start range of window files by path. A
// file's stats never change, and every upsert judges every file of the
// partitions it touches by them: parsing the stats JSON again for every
// file at every commit was ~18% of an emit-heavy stream's CPU once each
// emitting batch upserted two tables.
type startRanges struct {
	mu sync.Mutex
	m  map[string]startRange
}

type startRange struct {
	lo, hi int64
	ok     bool
}

// maxStartRanges bounds the cache; past it, it starts again empty (the
// files of a compacted or vacuumed lake are never asked for again).
const maxStartRanges = 1 << 16

func (c *startRanges) of(a *delta.Add, col string) (lo, hi int64, ok bool) {
	c.mu.Lock()
	r, hit := c.m[a.Path]
	c.mu.Unlock()
	if hit {
		return r.lo, r.hi, r.ok
	}
	lo, hi, ok = fileTimeRange(a, col)
	c.mu.Lock()
	if c.m == nil || len(c.m) >= maxStartRanges {
		c.m = make(map[string]startRange)
	}
	c.m[a.Path] = startRange{lo, hi, ok}
	c.mu.Unlock()
	return lo, hi, ok
}

// writeReconcileLog writes the log rows as one file (the table is
// unpartitioned).
func (l *Lake) writeReconcileLog(ctx context.Context, rows []ReconcileRow) (addFile, error) {
	t := l.tables[TableReconcileLog].def
	w, err := newFileWriter(t)
	if err != nil {
		return addFile{}, err
	}
	keyCol := t.keyCols()
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
		writeReplaced(w, t, r)
		if err := w.endRow(); err != nil {
			w.abort()
			return addFile{}, err
		}
	}
	f, err := w.finish(ctx, l.st, "")
	if err != nil {
		return addFile{}, err
	}
	return addFile{dataFile: f, pv: map[string]*string{}}, nil
}

// fillAggs returns rows with the Aggs of those that have none computed
// from their State (see WindowRow.Aggs), so that an upsert compares and
// writes the values once; in a copy, as the caller's rows are not ours
// to change.
func (l *Lake) fillAggs(rows []WindowRow) []WindowRow {
	if l.cfg.Aggs.Empty() || !slices.ContainsFunc(rows, func(r WindowRow) bool { return r.Aggs == nil }) {
		return rows
	}
	rows = slices.Clone(rows)
	for i := range rows {
		if rows[i].Aggs == nil {
			rows[i].Aggs = l.cfg.Aggs.Values(rows[i].State)
		}
	}
	return rows
}

// sameValue compares two aggregates as window_results stores them (count,
// sum, min, max; Values only as "has values").
func sameValue(a, b tidemark.Agg) bool {
	if a.Count != b.Count || (a.Values > 0) != (b.Values > 0) {
		return false
	}
	return a.Values == 0 || (a.Total() == b.Total() && a.Min == b.Min && a.Max == b.Max)
}
