package lake

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"

	"tidemark/lake/delta"
	"tidemark/lake/store"
)

// A reconcile's corrections and their reconcile_log rows are two Delta
// tables, so two commits; they must still land as one unit. The log rows
// are written first, as a data file of reconcile_log, and the add action
// that will commit them is recorded in a pending marker
// (reconcile_log/_pending/<appId>.json, a hidden path no Delta reader or
// vacuum looks at) before the window_results commit. Both commits carry
// txn {appId, version}. A run killed between them leaves window_results
// at a txn version reconcile_log lacks and the marker naming the file:
// FinishReconcileLog, which every run calls first, commits it. So a
// corrected window never stays without its log row, whichever write dies.

// pendingLog is the marker: the txn version of the corrections and the add
// action of their log rows.
type pendingLog struct {
	Version int64           `json:"version"`
	Add     json.RawMessage `json:"add"` // one Delta add action, as in a commit
	Rows    int64           `json:"rows"`
}

func (l *Lake) pendingKey(appID string) string {
	return l.tables[TableReconcileLog].dt.FileKey("_pending/" + appID + ".json")
}

// readPending returns the marker of appID, nil when there is none.
func (l *Lake) readPending(ctx context.Context, appID string) (*pendingLog, *delta.Add, error) {
	data, err := store.ReadAll(ctx, l.st, l.pendingKey(appID))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("read pending reconcile_log rows: %w", err)
	}
	var p pendingLog
	if err := json.Unmarshal(data, &p); err != nil {
		return nil, nil, fmt.Errorf("read pending reconcile_log rows %s: %w", l.pendingKey(appID), err)
	}
	actions, err := delta.DecodeActions(l.pendingKey(appID), append([]byte(`{"add":`), append(p.Add, '}')...))
	if err != nil || len(actions) != 1 || actions[0].Add == nil {
		return nil, nil, fmt.Errorf("read pending reconcile_log rows %s: no add action (%v)", l.pendingKey(appID), err)
	}
	return &p, actions[0].Add, nil
}

// pendingFiles returns the store keys of the data files pending markers
// name: vacuum keeps them whatever their age.
func (l *Lake) pendingFiles(ctx context.Context) (map[string]bool, error) {
	h := l.tables[TableReconcileLog]
	objs, err := l.st.List(ctx, h.dt.FileKey("_pending")+"/")
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	out := map[string]bool{}
	for _, ob := range objs {
		data, err := store.ReadAll(ctx, l.st, ob.Key)
		if err != nil {
			continue // deleted since the listing
		}
		var p pendingLog
		if json.Unmarshal(data, &p) != nil {
			continue
		}
		var a struct {
			Path string `json:"path"`
		}
		if json.Unmarshal(p.Add, &a) == nil && a.Path != "" {
			out[delta.Add{Path: a.Path}.Key(h.dt.Path())] = true
		}
	}
	return out, nil
}

// upsertLogged is the write order of Upsert and UpsertSessions: the log
// rows' file and its marker, then corrections (the window_results commit),
// then the reconcile_log commit, then the marker goes.
func (l *Lake) upsertLogged(ctx context.Context, txn *delta.Txn, log []ReconcileRow, corrections func() error) error {
	if len(log) == 0 {
		return corrections()
	}
	h := l.tables[TableReconcileLog]
	f, err := l.writeReconcileLog(ctx, log)
	if err != nil {
		return err
	}
	act := f.action(l.clock().UnixMilli(), true)
	line, err := delta.EncodeActions([]delta.Action{act})
	if err != nil {
		return err
	}
	var wrapper struct {
		Add json.RawMessage `json:"add"`
	}
	if err := json.Unmarshal(bytes.TrimSpace(line), &wrapper); err != nil {
		return err
	}
	marker, err := json.Marshal(pendingLog{Version: txn.Version, Add: wrapper.Add, Rows: f.Rows})
	if err != nil {
		return err
	}
	if err := l.st.Put(ctx, l.pendingKey(txn.AppID), bytes.NewReader(marker), int64(len(marker))); err != nil {
		l.discard(ctx, h, []addFile{f})
		return fmt.Errorf("record pending reconcile_log rows: %w", err)
	}
	if err := corrections(); err != nil {
		return err // the marker stays; the next run finds no corrections for it and drops it
	}
	_, err = l.FinishReconcileLog(ctx, txn.AppID)
	return err
}

// FinishReconcileLog completes what a run of appID left between its two
// commits: when window_results holds the txn version of the pending marker
// and reconcile_log does not yet, it commits the marker's log rows to
// reconcile_log with that txn. A marker whose corrections never committed
// is dropped with its file. It returns the number of log rows it committed.
func (l *Lake) FinishReconcileLog(ctx context.Context, appID string) (int64, error) {
	p, add, err := l.readPending(ctx, appID)
	if err != nil || p == nil {
		return 0, err
	}
	h := l.tables[TableReconcileLog]
	wtx, err := l.Txns(ctx, TableWindowResults)
	if err != nil {
		return 0, fmt.Errorf("finish reconcile_log: %w", err)
	}
	ltx, err := l.Txns(ctx, TableReconcileLog)
	if err != nil {
		return 0, fmt.Errorf("finish reconcile_log: %w", err)
	}
	if lv, ok := ltx[appID]; ok && lv >= p.Version {
		return 0, l.st.Delete(ctx, l.pendingKey(appID)) // done before the marker went
	}
	if wv, ok := wtx[appID]; !ok || wv < p.Version {
		// The corrections never committed: nothing to log.
		if err := l.st.Delete(ctx, add.Key(h.dt.Path())); err != nil {
			return 0, err
		}
		return 0, l.st.Delete(ctx, l.pendingKey(appID))
	}
	if _, err := l.st.Open(ctx, add.Key(h.dt.Path())); err != nil {
		return 0, fmt.Errorf("finish reconcile_log: the pending log rows of run %d (%s) are unreadable; window_results holds its corrections without log rows: %w", p.Version, add.Path, err)
	}
	widen, err := l.widenSchema(ctx, h)
	if err != nil {
		return 0, fmt.Errorf("finish reconcile_log: %w", err)
	}
	txn := &delta.Txn{AppID: appID, Version: p.Version}
	_, err = h.dt.Update(ctx, func(snap *delta.Snapshot) (*delta.Transaction, error) {
		if snap == nil {
			return nil, fmt.Errorf("%s missing", TableReconcileLog)
		}
		if v, ok := snap.TxnVersion(appID); ok && v >= p.Version {
			return nil, nil
		}
		a := *add
		a.ModificationTime = l.clock().UnixMilli()
		return &delta.Transaction{
			Actions:             append([]delta.Action{{Add: &a}}, widen...),
			Operation:           "WRITE",
			OperationParameters: map[string]string{"mode": "Append"},
			OperationMetrics:    metrics(1, p.Rows, a.Size),
			Txn:                 txn,
		}, nil
	})
	if err != nil && !errors.Is(err, delta.ErrAlreadyCommitted) {
		return 0, fmt.Errorf("finish reconcile_log: %w", err)
	}
	if err := l.st.Delete(ctx, l.pendingKey(appID)); err != nil {
		return p.Rows, fmt.Errorf("finish reconcile_log: %w", err)
	}
	return p.Rows, nil
}
