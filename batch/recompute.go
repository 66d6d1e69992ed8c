// Package batch is tidemark's exact layer: it recomputes window aggregates
// from every raw_events row (ok and late) of the lake, reading only the
// partitions and columns the requested windows need. Window assignment is
// tidemark.WindowSpec.Assign, the same function the stream uses, so a
// recomputation differs from the stream only by the rows the stream's
// watermark dropped.
package batch

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"

	"tidemark"
	"tidemark/lake"
)

// Query says which windows to recompute: the listed Windows, or, when
// Windows is nil, every window with a start in [From, To).
type Query struct {
	// Windows to recompute, every key of each. Duplicates are fine.
	Windows []tidemark.Window
	// From and To bound window starts when Windows is nil; To must be
	// greater than From.
	From, To int64
	// Version is the raw_events version to read; <= 0 means the latest.
	Version int64
	// Workers scan event-time slices in parallel; 0 means GOMAXPROCS.
	Workers int
}

// Row is one recomputed (window, key): its exact aggregate over every row
// of raw_events, and how many of those rows the stream marked late.
type Row struct {
	tidemark.Result
	Late int64
	// Aggs are the exact values of the lake's --agg aggregates
	// (Config.Aggs), in its list order; nil on a lake without them.
	Aggs []tidemark.AggOut
}

// Stats says what a recomputation read. FilesRead, PartitionsRead and
// BytesRead count the raw_events files in the event hours the query
// touched (from the Delta log: the bytes are the files' sizes, an upper
// bound on what the column projection actually fetched).
type Stats struct {
	RowsRead       int64
	FilesRead      int64
	PartitionsRead int64
	BytesRead      int64
}

// slice is one event-time range [from, to) scanned by one ScanRaw call.
type slice struct{ from, to int64 }

// cellKey identifies an aggregate: a window (by start; the size is fixed)
// and a key.
type cellKey struct {
	start int64
	key   tidemark.Key
}

type cell struct {
	agg   tidemark.Agg
	late  int64
	exact *exactCell // nil without aggregates
}

// WindowStarts returns the window starts [from, to) whose windows can hold
// raw_events' rows: from the earliest event time less one window size
// (saturating), to the latest (exclusive). It is the range recompute and
// reconcile check when none is given. ok is false when raw_events is empty.
func WindowStarts(ctx context.Context, lk *lake.Lake) (from, to int64, ok bool, err error) {
	lo, hi, ok, err := lk.EventTimeRange(ctx)
	if err != nil || !ok {
		return 0, 0, false, err
	}
	return tidemark.SubSat(lo, lk.Config().Window.Size), hi, true, nil
}

// EventSpan returns raw_events' event times as a half-open range [first,
// last+1): what sessions overlap by default. ok is false when raw_events is
// empty.
func EventSpan(ctx context.Context, lk *lake.Lake) (from, to int64, ok bool, err error) {
	lo, hi, ok, err := lk.EventTimeRange(ctx)
	if err != nil || !ok {
		return 0, 0, false, err
	}
	return lo, tidemark.AddSat(hi, 1), true, nil
}

// Recompute returns the exact aggregates of the query's windows, sorted by
// window start and key (keys in byte order of their encoding). A window
// without rows has no Row. Memory holds one aggregate per (window, key) of
// the requested windows, never the rows.
func Recompute(ctx context.Context, lk *lake.Lake, q Query) ([]Row, Stats, error) {
	spec := lk.Config().Window
	p, err := newPlan(ctx, lk, spec, q)
	if err != nil {
		return nil, Stats{}, fmt.Errorf("recompute: %w", err)
	}
	ex := newExactPlan(lk.Config().Aggs)
	st := p.stats
	work := p.slices
	if len(work) == 0 {
		return nil, st, nil
	}
	workers := q.Workers
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	workers = min(workers, len(work))
	parts := make([]map[cellKey]*cell, workers)
	rows := make([]int64, workers)
	errs := make([]error, workers)
	next := make(chan slice)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	for w := range workers {
		parts[w] = map[cellKey]*cell{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			a := aggregator{spec: spec, want: p.want, cells: parts[w], exact: ex, block: cellBlock{p: ex}}
			for s := range next {
				if errs[w] != nil {
					continue // drain
				}
				err := lk.ScanRaw(ctx, lake.RawQuery{Time: lake.Between(s.from, s.to), Columns: lake.WindowColumns, Version: p.version}, a.add)
				if err != nil {
					errs[w] = err
					cancel()
				}
			}
			rows[w] = a.rows
		}()
	}
feed:
	for _, s := range work {
		select {
		case next <- s:
		case <-ctx.Done():
			break feed
		}
	}
	close(next)
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, st, fmt.Errorf("recompute: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return nil, st, fmt.Errorf("recompute: %w", err)
	}
	merged := parts[0]
	for _, p := range parts[1:] {
		for k, c := range p {
			if m, ok := merged[k]; ok {
				m.agg.Merge(c.agg)
				m.late += c.late
				if m.exact != nil {
					m.exact.merge(c.exact)
				}
			} else {
				merged[k] = c
			}
		}
	}
	for _, r := range rows {
		st.RowsRead += r
	}
	out := make([]Row, 0, len(merged))
	for k, c := range merged {
		r := Row{
			Result: tidemark.Result{Window: tidemark.Window{Start: k.start, End: k.start + spec.Size}, Key: k.key, Agg: c.agg, Final: true},
			Late:   c.late,
		}
		if c.exact != nil {
			r.Aggs = ex.out(c.exact)
		}
		out = append(out, r)
	}
	// All windows here have the lake's size, so the end never decides: the
	// order is by start, then key.
	slices.SortFunc(out, func(a, b Row) int { return tidemark.CompareResults(a.Result, b.Result) })
	return out, st, nil
}

// aggregator folds raw rows into the cells of the wanted windows. want nil
// means every window in [lo, hi) of starts.
type aggregator struct {
	spec  tidemark.WindowSpec
	want  *windowSet
	cells map[cellKey]*cell
	rows  int64
	buf   []tidemark.Window
	// exact computes the aggregates beyond count/sum/min/max; nil
	// without them.
	exact *exactPlan
	block cellBlock
	// last cell looked up: raw rows come in runs of one key and window.
	lastKey  cellKey
	lastCell *cell
}

func (a *aggregator) add(b lake.RawBatch) error {
	a.rows += int64(b.N)
	for i := range b.N {
		t := b.EventTime[i]
		a.buf = a.spec.Assign(a.buf[:0], t)
		for _, w := range a.buf {
			if !a.want.has(w.Start) {
				continue
			}
			k := cellKey{w.Start, b.Key[i]}
			c := a.lastCell
			if c == nil || k != a.lastKey {
				var ok bool
				c, ok = a.cells[k]
				if !ok {
					c = &cell{}
					if a.exact != nil {
						c.exact = a.block.next()
					}
					a.cells[k] = c
				}
				a.lastKey, a.lastCell = k, c
			}
			c.agg.Add(b.Value[i], b.HasValue[i])
			if c.exact != nil {
				a.exact.add(c.exact, b.Fields, i)
			}
			if b.Status[i] == tidemark.StatusLate {
				c.late++
			}
		}
	}
	return nil
}
