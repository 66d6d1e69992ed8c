package reconcile

import (
	"context"
	"fmt"

	"tidemark/lake"
)

// priorRuns is what earlier runs recorded (see AppRaw, AppWatermark), read
// from the lake's txns.
type priorRuns struct {
	seq   int64 // last run sequence that wrote corrections
	raw   int64 // raw_events version consumed; 0: none
	wm    int64 // stream watermark seen
	hasWM bool
	// partials is the window_partials version consumed (see AppPartials).
	partials int64
	// shards: more than one stream writes to the lake (see lake/shard.go).
	shards bool
	lk     *lake.Lake
}

// AppPartials is the txn appId, in reconcile_log, of the window_partials
// version a run consumed: on a lake several streams write, the next run
// checks every window a shard emitted since (its merged value may have been
// committed without another shard's partial, or over a correction).
const AppPartials = "tidemark-reconcile.partials-version"

func readPriorRuns(ctx context.Context, lk *lake.Lake) (*priorRuns, error) {
	p := &priorRuns{lk: lk}
	txns, err := lk.Txns(ctx, lake.TableReconcileLog)
	if err != nil {
		return nil, fmt.Errorf("read reconcile progress: %w", err)
	}
	p.seq = txns[AppRun]
	p.raw = txns[AppRaw]
	p.wm, p.hasWM = txns[AppWatermark]
	p.partials = txns[AppPartials]
	if p.shards, err = lk.MultiShard(ctx); err != nil {
		return nil, fmt.Errorf("read reconcile progress: %w", err)
	}
	wtxns, err := lk.Txns(ctx, lake.TableWindowResults)
	if err != nil {
		return nil, fmt.Errorf("read reconcile progress: %w", err)
	}
	if v, ok := wtxns[AppRun]; ok && v > p.seq {
		p.seq = v
	}
	return p, nil
}

// rawVersion returns the latest raw_events version.
func (p *priorRuns) rawVersion(ctx context.Context) (int64, error) {
	return p.lk.Version(ctx, lake.TableRawEvents)
}

// streamWatermark returns the highest watermark the streams recorded: in
// window_results (from the files' stats, so it may be up to 1 ms low:
// windows ending in that millisecond wait for a later run), and with every
// raw_events commit, which covers windows the stream closed without emitting
// anything (only late rows reached them).
//
// On a lake several streams write it is the lake's combined watermark
// instead: the lowest of the active shards' (lake.ShardWatermark), since a
// window is closed only when every shard still writing has passed it.
func (p *priorRuns) streamWatermark(ctx context.Context) (int64, bool, error) {
	if p.shards {
		return p.lk.ShardWatermark(ctx)
	}
	w, has, err := p.lk.WindowsWatermark(ctx)
	if err != nil {
		return 0, false, err
	}
	if rw, ok, err := p.lk.StreamWatermark(ctx); err != nil {
		return 0, false, err
	} else if ok && (!has || rw > w) {
		w, has = rw, true
	}
	return w, has, nil
}

// closing returns the watermark that closes windows for a run after p: the
// streams' (streamWatermark), never below the one an earlier run saw (W
// never decreases; batch rows carry none). ok is false when neither is
// known.
func (p *priorRuns) closing(ctx context.Context) (w int64, ok bool, err error) {
	w, ok, err = p.streamWatermark(ctx)
	if err != nil {
		return 0, false, err
	}
	if p.hasWM && (!ok || p.wm > w) {
		w, ok = p.wm, true
	}
	return w, ok, nil
}

// record commits a txn-only version to reconcile_log: appID reaches version.
// A lower or equal version already there is fine (nothing to record).
func (p *priorRuns) record(ctx context.Context, appID string, version int64) error {
	return p.lk.RecordTxn(ctx, lake.TableReconcileLog, appID, version)
}
