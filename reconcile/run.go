package reconcile

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"math"
	"slices"
	"time"

	"tidemark"
	"tidemark/batch"
	"tidemark/lake"
)

// run is one reconcile run's working state.
type run struct {
	cfg      Config
	lk       *lake.Lake
	rep      *Report
	log      *slog.Logger
	clock    func() time.Time
	spec     tidemark.WindowSpec
	hasValue bool

	w        int64 // windows ending at or before w are closed
	aggs     tidemark.AggList
	rawNoted bool // newRawWindows has run
	rows     []lake.WindowRow
	logRows  []lake.ReconcileRow
}

// cellKey identifies a (window, key) by window start.
type cellKey struct {
	start int64
	key   tidemark.Key
}

func (r *run) do(ctx context.Context) error {
	if !r.cfg.DryRun {
		// A run killed between its corrections and their log rows left
		// the rows pending: commit them before anything else.
		n, err := r.lk.FinishReconcileLog(ctx, AppRun)
		if err != nil {
			return err
		}
		if n > 0 {
			r.log.Warn("reconcile_log rows of an interrupted run committed", "rows", n)
		}
	}
	p, err := readPriorRuns(ctx, r.lk)
	if err != nil {
		return err
	}
	rawTo, err := p.rawVersion(ctx)
	if err != nil {
		return err
	}
	w, hasW, err := p.closing(ctx)
	if err != nil {
		return err
	}
	if !hasW {
		w = tidemark.MinTime
	}
	r.w = w
	r.rep.RawFrom, r.rep.RawTo, r.rep.Watermark = p.raw, rawTo, w
	r.log.Info("reconcile start", "run_id", r.rep.RunID, "raw_version_from", p.raw, "raw_version_to", rawTo,
		"watermark", tidemark.FormatTime(w), "dry_run", r.cfg.DryRun)
	if r.lk.Config().SessionGap > 0 {
		return r.sessions(ctx, p, rawTo, hasW) // see session.go
	}

	late, err := r.lateWindows(ctx, p, rawTo)
	if err != nil {
		return err
	}
	partialsTo, err := r.shardWindows(ctx, p, late)
	if err != nil {
		return err
	}
	if err := r.estimatedWindows(ctx, p, late); err != nil {
		return err
	}
	rfrom, rto, hasRange, err := r.checkRange(ctx, p)
	if err != nil {
		return err
	}
	days := map[int64]bool{}
	for d := range late {
		days[d] = true
	}
	if hasRange {
		for d := dayOf(rfrom); d < rto; d += tidemark.MicrosPerDay {
			days[d] = true
		}
	}
	order := slices.Sorted(maps.Keys(days))
	r.log.Info("reconcile plan", "days", len(order), "late_days", len(late))
	for i, d := range order {
		var from, to int64
		if hasRange && rfrom < d+tidemark.MicrosPerDay && rto > d {
			from, to = max(rfrom, d), min(rto, d+tidemark.MicrosPerDay)
		}
		if err := r.day(ctx, d, late[d], from, to, rawTo); err != nil {
			return err
		}
		if r.cfg.Progress != nil {
			r.cfg.Progress(i+1, len(order))
		}
	}

	if r.cfg.DryRun {
		return nil
	}
	if len(r.rows) > 0 {
		if err := r.lk.Upsert(ctx, r.rows, AppRun, p.seq+1, r.logRows); err != nil {
			return err
		}
	}
	if rawTo > p.raw {
		if err := p.record(ctx, AppRaw, rawTo); err != nil {
			return err
		}
	}
	if hasW && (!p.hasWM || w > p.wm) {
		if err := p.record(ctx, AppWatermark, w); err != nil {
			return err
		}
	}
	if partialsTo > p.partials {
		if err := p.record(ctx, AppPartials, partialsTo); err != nil {
			return err
		}
	}
	return nil
}

// shardWindows adds, on a lake several streams write, the windows a merged
// value may be wrong in for a reason other than late rows to the windows to
// check (late, by day): those any shard emitted since the last run and
// those still open at it (from window_partials), and those holding any raw
// row committed since (a shard that crashed between its raw and window
// commits and never came back). It returns the window_partials version
// read, 0 on a lake one stream writes.
func (r *run) shardWindows(ctx context.Context, p *priorRuns, late map[int64]map[int64]bool) (int64, error) {
	if !p.shards {
		return 0, nil
	}
	from := lake.AllFrom
	if p.hasWM {
		from = tidemark.SubSat(p.wm, r.spec.Size)
	}
	starts, version, err := r.lk.PartialWindows(ctx, p.partials, from)
	if err != nil {
		return 0, err
	}
	for _, s := range starts {
		note(late, s)
	}
	if err := r.newRawWindows(ctx, p, late); err != nil {
		return 0, err
	}
	return version, nil
}

// note adds the window starting at start to the windows to check, by day.
func note(wins map[int64]map[int64]bool, start int64) {
	d := dayOf(start)
	if wins[d] == nil {
		wins[d] = map[int64]bool{}
	}
	wins[d][start] = true
}

// newRawWindows adds the windows holding a raw row committed since the
// last run (ok or late) to the windows to check.
func (r *run) newRawWindows(ctx context.Context, p *priorRuns, wins map[int64]map[int64]bool) error {
	rawTo := r.rep.RawTo
	if rawTo <= p.raw || r.rawNoted {
		return nil
	}
	r.rawNoted = true
	var buf []tidemark.Window
	q := lake.RawQuery{MinCommitVersion: p.raw, Columns: []string{lake.ColEventTime}, Version: rawTo}
	err := r.lk.ScanRaw(ctx, q, func(b lake.RawBatch) error {
		for _, t := range b.EventTime[:b.N] {
			buf = r.spec.Assign(buf[:0], t)
			for _, win := range buf {
				note(wins, win.Start)
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("find the windows of raw rows since the last run: %w", err)
	}
	return nil
}

// lateWindows returns the windows holding late rows, by day: in files
// committed since the last run, and (pending) in windows that were still
// open at the last run.
func (r *run) lateWindows(ctx context.Context, p *priorRuns, rawTo int64) (map[int64]map[int64]bool, error) {
	late := map[int64]map[int64]bool{} // day -> window starts
	scanLate := func(q lake.RawQuery) error {
		q.Status, q.Columns, q.Version = "late", []string{lake.ColEventTime}, rawTo
		var buf []tidemark.Window
		return r.lk.ScanRaw(ctx, q, func(b lake.RawBatch) error {
			for _, t := range b.EventTime[:b.N] {
				buf = r.spec.Assign(buf[:0], t)
				for _, win := range buf {
					d := dayOf(win.Start)
					if late[d] == nil {
						late[d] = map[int64]bool{}
					}
					late[d][win.Start] = true
				}
			}
			return nil
		})
	}
	if rawTo > p.raw {
		if err := scanLate(lake.RawQuery{MinCommitVersion: p.raw}); err != nil {
			return nil, fmt.Errorf("find late rows: %w", err)
		}
	}
	if p.raw > 0 {
		from := lake.AllFrom
		if p.hasWM {
			from = tidemark.SubSat(p.wm, r.spec.Size)
		}
		if err := scanLate(lake.RawQuery{Time: lake.Between(from, lake.AllTo)}); err != nil {
			return nil, fmt.Errorf("find late rows of windows open at the last run: %w", err)
		}
	}
	return late, nil
}

// checkRange returns the window starts the flags ask to check, clamped to
// the days that can hold windows of the lake's events, so that a wide
// --since on a young lake costs nothing.
func (r *run) checkRange(ctx context.Context, p *priorRuns) (from, to int64, ok bool, err error) {
	from, to, ok = r.cfg.rangeBounds(r.clock())
	if !r.aggs.Empty() && !p.hasWM {
		// The first run on a lake with aggregates: every window the
		// stream has closed holds estimates (see estimatedWindows).
		from, to, ok = lake.AllFrom, tidemark.AddSat(r.w, 1), true
	}
	if !ok {
		return 0, 0, false, nil
	}
	// Window starts that can hold the lake's events, widened to the
	// windows window_results holds: a window whose raw rows were all lost
	// (removed by repair) is then checked, and reported as orphaned, even
	// at either end of the lake.
	lo, hi, has, err := batch.WindowStarts(ctx, r.lk)
	if err != nil {
		return 0, 0, false, err
	}
	wlo, whi, whas, err := r.lk.WindowStartRange(ctx)
	if err != nil {
		return 0, 0, false, err
	}
	switch {
	case has && whas:
		lo, hi = min(lo, wlo), max(hi, whi)
	case whas:
		lo, hi = wlo, whi
	case !has:
		return 0, 0, false, nil
	}
	from, to = max(from, lo), min(to, hi)
	return from, to, from < to, nil
}

// day checks one window_date: the late windows starting that day and the
// windows with a start in [from, to) (none when from == to).
func (r *run) day(ctx context.Context, d int64, late map[int64]bool, from, to, rawTo int64) error {
	existing, err := r.lk.Windows(ctx, d, d+tidemark.MicrosPerDay, 0)
	if err != nil {
		return err
	}
	old := make(map[cellKey]*lake.WindowRow, len(existing))
	final := map[int64]bool{}
	for i := range existing {
		e := &existing[i]
		old[cellKey{e.Window.Start, e.Key}] = e
		if e.Final {
			final[e.Window.Start] = true
		}
	}
	closed := func(start int64) bool { return start+r.spec.Size <= r.w || final[start] }
	inRange := func(start int64) bool { return start >= from && start < to }

	var queries []batch.Query
	if to > from {
		queries = append(queries, batch.Query{From: from, To: to, Version: rawTo, Workers: r.cfg.Workers})
	}
	var wins []tidemark.Window
	for start := range late {
		switch {
		case inRange(start):
		case !closed(start):
			r.rep.Pending++
		default:
			wins = append(wins, tidemark.Window{Start: start, End: start + r.spec.Size})
		}
	}
	if len(wins) > 0 {
		queries = append(queries, batch.Query{Windows: wins, Version: rawTo, Workers: r.cfg.Workers})
	}
	checked := map[int64]bool{} // closed windows recomputed
	for _, win := range wins {
		checked[win.Start] = true
	}
	seen := map[cellKey]bool{}
	for _, q := range queries {
		got, st, err := batch.Recompute(ctx, r.lk, q)
		if err != nil {
			return err
		}
		r.rep.RowsRead += st.RowsRead
		r.rep.FilesRead += st.FilesRead
		r.rep.PartitionsRead += st.PartitionsRead
		for i := range got {
			b := &got[i]
			if !closed(b.Window.Start) {
				continue
			}
			k := cellKey{b.Window.Start, b.Key}
			seen[k] = true
			r.compare(b, old[k])
		}
	}
	// Rows of checked windows that the recomputation did not produce.
	for i := range existing {
		e := &existing[i]
		s := e.Window.Start
		if (checked[s] || (inRange(s) && closed(s))) && !seen[cellKey{s, e.Key}] {
			r.rep.Orphans++
			r.log.Warn("window row without raw rows", "window", e.Window.String(), "key", e.Key.String())
		}
	}
	return nil
}

// compare checks one recomputed aggregate against window_results and queues
// a correction when they differ.
func (r *run) compare(b *batch.Row, old *lake.WindowRow) {
	r.rep.Checked++
	if old != nil && sameAgg(b.Agg, old.Agg) && r.sameExact(b, old) {
		r.rep.Unchanged++
		return
	}
	now := r.clock().UnixMicro()
	row := lake.WindowRow{
		Result:     tidemark.Result{Window: b.Window, Key: b.Key, Agg: b.Agg, Final: true},
		Origin:     lake.OriginBatch,
		Revision:   1,
		ComputedAt: now,
	}
	r.setExact(&row, b)
	lr := lake.ReconcileRow{RunID: r.rep.RunID, Window: b.Window, Key: b.Key, New: b.Agg, LateRows: b.Late, CorrectedAt: now}
	if old != nil {
		row.Revision = old.Revision + 1
		o := old.Agg
		lr.Old = &o
		r.rep.Corrected++
		r.noteDelta(b, old)
	} else {
		r.rep.Inserted++
	}
	r.rep.LateRowsAbsorbed += b.Late
	r.rows = append(r.rows, row)
	r.logRows = append(r.logRows, lr)
}

// sameAgg compares exactly but for the sum (see SumTolerance). Values is
// compared only as "has values": window_results does not store it.
func sameAgg(a, b tidemark.Agg) bool {
	if a.Count != b.Count || (a.Values > 0) != (b.Values > 0) {
		return false
	}
	if a.Values == 0 {
		return true
	}
	if a.Min != b.Min || a.Max != b.Max {
		return false
	}
	// Scale by the magnitudes involved: a sum that cancels to ~0 still
	// carries the rounding error of its largest terms.
	sa, sb := a.Total(), b.Total()
	scale := max(math.Abs(sa), math.Abs(sb), math.Abs(a.Min), math.Abs(a.Max))
	return math.Abs(sa-sb) <= SumTolerance*scale
}

func (r *run) noteDelta(b *batch.Row, old *lake.WindowRow) {
	d := Change{Window: b.Window, Key: b.Key, Field: "count", Old: float64(old.Agg.Count), New: float64(b.Agg.Count)}
	if r.hasValue && b.Agg.Values > 0 && old.Agg.Values > 0 {
		d.Field, d.Old, d.New = "sum", old.Agg.Total(), b.Agg.Total()
	}
	d.Abs = math.Abs(d.New - d.Old)
	if d.Old != 0 {
		d.Relative = d.Abs / math.Abs(d.Old)
	}
	if r.rep.LargestAbs == nil || d.Abs > r.rep.LargestAbs.Abs {
		c := d
		r.rep.LargestAbs = &c
	}
	if d.Old != 0 && (r.rep.LargestRel == nil || d.Relative > r.rep.LargestRel.Relative) {
		c := d
		r.rep.LargestRel = &c
	}
}
