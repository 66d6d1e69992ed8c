package reconcile

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	"tidemark"
	"tidemark/batch"
	"tidemark/lake"
)

// maxMerges bounds the merges a report lists (Report.Merged counts all;
// reconcile_log holds every one).
const maxMerges = 20

// sessions reconciles a session lake (the run's do, from the same prior
// runs and watermark): the exact sessions around the late rows committed
// since the last run, plus those of the sessions the stream still held
// open then, plus every session of --since or --from/--to, are planned
// against window_results by batch.PlanSessions and written by one
// lake.UpsertSessions (the replaced sessions removed in the same commit),
// with a reconcile_log row per replaced session.
func (r *run) sessions(ctx context.Context, p *priorRuns, rawTo int64, hasW bool) error {
	gap := r.lk.Config().Gap()
	r.rep.Sessions = true
	exact := map[sessionID]batch.Row{}
	add := func(rows []batch.Row, st batch.SessionStats) {
		r.rep.RowsRead += st.RowsRead
		r.rep.FilesRead += st.FilesRead
		r.rep.PartitionsRead += st.PartitionsRead
		for _, e := range rows {
			exact[sessionID{e.Window, e.Key}] = e
		}
	}
	if rawTo > p.raw {
		rows, st, err := batch.LateSessions(ctx, r.lk, batch.LateSessionQuery{Gap: gap, SinceVersion: p.raw, Version: rawTo})
		if err != nil {
			return fmt.Errorf("find late rows: %w", err)
		}
		add(rows, st)
	}
	if p.raw > 0 {
		from, err := r.openAtLastRun(ctx, p, gap)
		if err != nil {
			return err
		}
		rows, st, err := batch.LateSessions(ctx, r.lk, batch.LateSessionQuery{Gap: gap, Time: lake.Between(from, lake.AllTo), Version: rawTo})
		if err != nil {
			return fmt.Errorf("find late rows of sessions open at the last run: %w", err)
		}
		add(rows, st)
	}
	if err := r.estimatedSessions(ctx, p, rawTo, gap, add); err != nil {
		return err
	}
	from, to, hasRange := r.cfg.rangeBounds(r.clock())
	if hasRange {
		rows, st, err := batch.Sessionize(ctx, r.lk, batch.SessionQuery{Gap: gap, From: from, To: to, Version: rawTo})
		if err != nil {
			return err
		}
		add(rows, st)
	}
	rows := slices.SortedFunc(maps.Values(exact), func(a, b batch.Row) int { return tidemark.CompareResults(a.Result, b.Result) })
	stored, err := r.storedSessions(ctx, rows, from, to, hasRange)
	if err != nil {
		return err
	}
	r.log.Info("reconcile plan", "sessions", len(rows), "stored", len(stored))
	same := func(e batch.Row, s lake.WindowRow) bool { return sameAgg(e.Agg, s.Agg) && r.sameExact(&e, &s) }
	plan := batch.PlanSessions(stored, rows, gap.Microseconds(), r.w, same, r.clock().UnixMicro())
	r.report(plan, len(rows))
	if r.cfg.Progress != nil {
		r.cfg.Progress(1, 1)
	}
	if r.cfg.DryRun {
		return nil
	}
	if len(plan.Corrections) > 0 {
		var adds, removed []lake.WindowRow
		var logRows []lake.ReconcileRow
		for _, c := range plan.Corrections {
			adds = append(adds, c.Row)
			removed = append(removed, c.Replaced...)
			for _, l := range c.Log {
				logRows = append(logRows, lake.ReconcileRow{RunID: r.rep.RunID, Window: l.Window, Key: l.Key, Old: l.Old, New: l.New,
					LateRows: l.LateRows, CorrectedAt: c.Row.ComputedAt, Replaced: l.Replaced})
			}
		}
		if err := r.lk.UpsertSessions(ctx, adds, removed, AppRun, p.seq+1, logRows); err != nil {
			return err
		}
	}
	if rawTo > p.raw {
		if err := p.record(ctx, AppRaw, rawTo); err != nil {
			return err
		}
	}
	if hasW && (!p.hasWM || r.w > p.wm) {
		if err := p.record(ctx, AppWatermark, r.w); err != nil {
			return err
		}
	}
	return nil
}

// sessionID identifies an exact session.
type sessionID struct {
	window tidemark.Window
	key    tidemark.Key
}

// openAtLastRun returns the event time from which late rows may lie in a
// session the last run deferred. One that ended after that run's
// watermark W holds a late row less than a gap before W, or one that
// bridged into a session the stream held open at W and has emitted since
// (a row of window_results ending after W), so less than a gap before that
// session's start. One deferred because a late row extended it less than
// a gap before W (batch.SessionPlan.Deferred) ends with that late row,
// less than two gaps before W. Nothing earlier can be in one.
func (r *run) openAtLastRun(ctx context.Context, p *priorRuns, gap time.Duration) (int64, error) {
	if !p.hasWM {
		return lake.AllFrom, nil
	}
	from := tidemark.SubSat(p.wm, 2*gap.Microseconds())
	first, ok, err := r.lk.FirstStartEndingAfter(ctx, p.wm)
	if err != nil {
		return 0, fmt.Errorf("find the sessions open at the last run: %w", err)
	}
	if ok {
		from = min(from, tidemark.SubSat(first, gap.Microseconds()))
	}
	return cmp.Or(from, 1), nil // 0 would mean no bound to LateSessions
}

// storedSessions returns the window_results rows the plan needs: those of
// the exact sessions' keys overlapping them, and, with a range, every
// closed row overlapping [from, to) (so a row without raw rows shows as
// an orphan). A stored session's rows are raw rows of the exact session
// holding them, so it starts within the exact session: only the
// window_date partitions of the exact sessions (and the range) are read.
func (r *run) storedSessions(ctx context.Context, exact []batch.Row, from, to int64, hasRange bool) ([]lake.WindowRow, error) {
	days := map[int64]bool{}
	byKey := map[tidemark.Key][]tidemark.Window{}
	for _, e := range exact {
		for d := dayOf(e.Window.Start); d < e.Window.End; d += tidemark.MicrosPerDay {
			days[d] = true
		}
		byKey[e.Key] = append(byKey[e.Key], e.Window)
	}
	if hasRange {
		for d := dayOf(from); d < to; d += tidemark.MicrosPerDay {
			days[d] = true
		}
	}
	var out []lake.WindowRow
	for _, d := range slices.Sorted(maps.Keys(days)) {
		rows, err := r.lk.Windows(ctx, d, d+tidemark.MicrosPerDay, 0)
		if err != nil {
			return nil, err
		}
		for _, s := range rows {
			keep := hasRange && s.Window.End <= r.w && s.Window.Start < to && s.Window.End > from
			for _, w := range byKey[s.Key] {
				keep = keep || (s.Window.Start < w.End && w.Start < s.Window.End)
			}
			if keep {
				out = append(out, s)
			}
		}
	}
	return out, nil
}

// report counts a session plan into the run's report.
func (r *run) report(plan batch.SessionPlan, checked int) {
	r.rep.Checked += int64(checked)
	r.rep.Unchanged += int64(plan.Unchanged)
	r.rep.Pending += int64(len(plan.Deferred))
	r.rep.Orphans += int64(len(plan.Orphans))
	for _, o := range plan.Orphans {
		r.log.Warn("session row without raw rows", "window", o.Window.String(), "key", o.Key.String())
	}
	for _, c := range plan.Corrections {
		b := batch.Row{Result: c.Row.Result}
		r.rep.LateRowsAbsorbed += c.Log[0].LateRows
		if len(c.Replaced) == 0 {
			r.rep.Inserted++
			continue
		}
		r.rep.Corrected++
		old := c.Replaced[0]
		for _, s := range c.Replaced[1:] {
			old.Agg.Merge(s.Agg)
		}
		r.noteDelta(&b, &old)
		if len(c.Replaced) < 2 {
			continue
		}
		r.rep.Merged += int64(len(c.Replaced))
		if len(r.rep.Merges) < maxMerges {
			m := Merge{Window: c.Row.Window, Key: c.Row.Key}
			for _, s := range c.Replaced {
				m.Replaced = append(m.Replaced, s.Window)
			}
			r.rep.Merges = append(r.rep.Merges, m)
		}
	}
}
