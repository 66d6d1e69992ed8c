package reconcile

import (
	"context"
	"errors"
	"fmt"
	"time"

	"tidemark"
	"tidemark/lake"
	"tidemark/lake/delta"
	"tidemark/lake/store"
)

// progress is what earlier runs recorded (see AppRaw, AppWatermark).
type progress struct {
	seq       int64 // last run sequence that wrote corrections
	raw       int64 // raw_events version consumed; 0: none
	wm        int64 // stream watermark seen
	hasWM     bool
	logTable  *delta.Table
	rawTable  *delta.Table
	windowsDT *delta.Table
}

func readProgress(ctx context.Context, st store.Store) (*progress, error) {
	p := &progress{
		logTable:  delta.Open(st, lake.TableReconcileLog, delta.Options{}),
		rawTable:  delta.Open(st, lake.TableRawEvents, delta.Options{}),
		windowsDT: delta.Open(st, lake.TableWindowResults, delta.Options{}),
	}
	snap, err := p.logTable.Snapshot(ctx, -1)
	if err != nil {
		return nil, fmt.Errorf("read reconcile progress: %w", err)
	}
	p.seq, _ = snap.TxnVersion(AppRun)
	p.raw, _ = snap.TxnVersion(AppRaw)
	p.wm, p.hasWM = snap.TxnVersion(AppWatermark)
	ws, err := p.windowsDT.Snapshot(ctx, -1)
	if err != nil {
		return nil, fmt.Errorf("read reconcile progress: %w", err)
	}
	if v, ok := ws.TxnVersion(AppRun); ok && v > p.seq {
		p.seq = v
	}
	return p, nil
}

// rawVersion returns the latest raw_events version.
func (p *progress) rawVersion(ctx context.Context) (int64, error) {
	snap, err := p.rawTable.Snapshot(ctx, -1)
	if err != nil {
		return 0, fmt.Errorf("read raw events log: %w", err)
	}
	return snap.Version, nil
}

// streamWatermark returns the highest watermark recorded in window_results,
// from the files' Delta stats (no data read). The stats keep milliseconds,
// truncated, so the value may be up to 1 ms low: windows ending in that
// millisecond wait for a later run. Files without stats are read.
func (p *progress) streamWatermark(ctx context.Context, lk *lake.Lake) (int64, bool, error) {
	snap, err := p.windowsDT.Snapshot(ctx, -1)
	if err != nil {
		return 0, false, fmt.Errorf("read window results log: %w", err)
	}
	w, has := tidemark.MinTime, false
	for i := range snap.Files {
		a := &snap.Files[i]
		s, err := delta.ParseStats(a.Stats)
		if a.Stats == "" || err != nil {
			v, ok, err := watermarkOfFile(ctx, lk, a)
			if err != nil {
				return 0, false, err
			}
			if ok && v > w {
				w, has = v, true
			}
			continue
		}
		if str, ok := s.MaxValues["watermark"].(string); ok {
			t, err := time.Parse(time.RFC3339Nano, str)
			if err == nil && t.UnixMicro() > w {
				w, has = t.UnixMicro(), true
			}
		}
	}
	// The stream also records its watermark with every raw_events commit,
	// which covers windows it closed without emitting anything (only late
	// rows reached them).
	if rw, ok, err := lk.StreamWatermark(ctx); err != nil {
		return 0, false, err
	} else if ok && (!has || rw > w) {
		w, has = rw, true
	}
	return w, has, nil
}

// watermarkOfFile reads the rows of a window_results partition when a file
// has no stats.
func watermarkOfFile(ctx context.Context, lk *lake.Lake, a *delta.Add) (int64, bool, error) {
	d := a.PartitionValues["window_date"]
	if d == nil {
		return 0, false, nil
	}
	day, err := time.Parse(time.DateOnly, *d)
	if err != nil {
		return 0, false, nil
	}
	from := day.UnixMicro()
	rows, err := lk.Windows(ctx, from, from+usPerDay, 0)
	if err != nil {
		return 0, false, err
	}
	w, has := tidemark.MinTime, false
	for _, r := range rows {
		if r.Watermark != nil && *r.Watermark > w {
			w, has = *r.Watermark, true
		}
	}
	return w, has, nil
}

// record commits a txn-only version to reconcile_log: appID reaches version.
// A lower or equal version already there is fine (nothing to record).
func (p *progress) record(ctx context.Context, appID string, version int64) error {
	_, err := p.logTable.Update(ctx, func(snap *delta.Snapshot) (*delta.Transaction, error) {
		if snap == nil {
			return nil, errors.New("reconcile_log missing")
		}
		if v, ok := snap.TxnVersion(appID); ok && v >= version {
			return nil, nil
		}
		return &delta.Transaction{
			Operation:           "SET TRANSACTION",
			OperationParameters: map[string]string{"appId": appID, "version": fmt.Sprint(version)},
			Txn:                 &delta.Txn{AppID: appID, Version: version},
		}, nil
	})
	if err != nil && !errors.Is(err, delta.ErrAlreadyCommitted) {
		return fmt.Errorf("record %s=%d: %w", appID, version, err)
	}
	return nil
}
