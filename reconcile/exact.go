package reconcile

import (
	"context"
	"fmt"
	"math"
	"time"

	"tidemark"
	"tidemark/batch"
	"tidemark/lake"
)

// A lake with aggregates beyond count/sum/min/max (--agg) holds live
// estimates: percentiles from DDSketches, distinct counts from
// HyperLogLogs, each row marked exact=false. Reconcile makes every closed
// window exact, not only those late rows touched: besides the late
// windows it checks the windows holding raw rows committed since the last
// run and those still open at it (checkRange), recomputes them with
// their aggregates (batch.Row.Aggs, from raw_events' input columns) and writes each one that differs or
// is not yet exact, as any correction: origin batch, revision+1, a
// reconcile_log row, one unit with it. A lake without aggregates takes
// none of this path.

// estimatedWindows adds, on a lake with aggregates, the windows the
// stream may have emitted as estimates since the last run to the windows
// to check: those holding a raw row committed since, and those still open
// at it that have closed since (start in [W_last − size, W − size], W the
// watermark). The first run checks every closed window (checkRange).
func (r *run) estimatedWindows(ctx context.Context, p *priorRuns, wins map[int64]map[int64]bool) error {
	if r.aggs.Empty() {
		return nil
	}
	if p.hasWM {
		slide := r.spec.Normalized().Slide
		first := tidemark.FloorDiv(tidemark.SubSat(p.wm, r.spec.Size), slide) * slide
		for start := first; start+r.spec.Size <= r.w; start += slide {
			note(wins, start)
		}
	}
	return r.newRawWindows(ctx, p, wins)
}

// sameExact reports whether a stored row already holds the exact values of
// the aggregates: marked exact, each value equal (sums and averages within
// SumTolerance, as sums are), nulls where the recomputation has none.
func (r *run) sameExact(b *batch.Row, old *lake.WindowRow) bool {
	if r.aggs.Empty() {
		return true
	}
	if !old.Exact || len(old.Aggs) != len(b.Aggs) {
		return false
	}
	for i, a := range r.aggs.Specs {
		x, y := b.Aggs[i], old.Aggs[i]
		if x.Valid != y.Valid {
			return false
		}
		if !x.Valid || x.V == y.V {
			continue
		}
		if a.Func != tidemark.AggSum && a.Func != tidemark.AggAvg {
			return false
		}
		if math.Abs(x.V-y.V) > SumTolerance*max(math.Abs(x.V), math.Abs(y.V)) {
			return false
		}
	}
	return true
}

// setExact puts the exact aggregates of b into the row written for it.
// Its agg_state stays null: the sketches of the stream's estimate would
// disagree with the exact values, and nothing merges a closed window's
// state again (a shard's later partial replaces the row with a new
// estimate, which the next run makes exact).
func (r *run) setExact(row *lake.WindowRow, b *batch.Row) {
	if r.aggs.Empty() {
		return
	}
	row.Aggs, row.Exact = b.Aggs, true
}

// estimatedSessions adds, on a session lake with aggregates, the exact
// sessions of every key over the event time that raw rows committed since
// the last run span and from where sessions open at it may lie
// (openAtLastRun): the stream emitted those sessions as estimates.
func (r *run) estimatedSessions(ctx context.Context, p *priorRuns, rawTo int64, gap time.Duration, add func([]batch.Row, batch.SessionStats)) error {
	if r.aggs.Empty() {
		return nil
	}
	lo, hi, ok, err := batch.EventSpan(ctx, r.lk)
	if err != nil || !ok {
		return err
	}
	from := lo
	if p.raw > 0 {
		if from, err = r.openAtLastRun(ctx, p, gap); err != nil {
			return err
		}
		if rawTo > p.raw {
			q := lake.RawQuery{MinCommitVersion: p.raw, Columns: []string{lake.ColEventTime}, Version: rawTo}
			err := r.lk.ScanRaw(ctx, q, func(b lake.RawBatch) error {
				for _, t := range b.EventTime[:b.N] {
					from = min(from, t)
				}
				return nil
			})
			if err != nil {
				return fmt.Errorf("find the raw rows since the last run: %w", err)
			}
		}
	}
	from = max(from, lo)
	if from >= hi {
		return nil
	}
	rows, st, err := batch.Sessionize(ctx, r.lk, batch.SessionQuery{Gap: gap, From: from, To: hi, Version: rawTo})
	if err != nil {
		return err
	}
	add(rows, st)
	return nil
}
