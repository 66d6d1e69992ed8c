package batch

import (
	"cmp"
	"slices"

	"tidemark"
	"tidemark/lake"
)

// SessionPlan is how reconcile corrects the sessions of window_results
// from an exact sessionization: the decision only, no I/O, so the upsert
// that carries it out (one commit per run) stays with reconcile and the
// lake.
type SessionPlan struct {
	// Corrections to write: each replaces every stored session its exact
	// session covers.
	Corrections []SessionCorrection
	// Unchanged counts exact, closed sessions already stored as they are.
	Unchanged int
	// Deferred are exact sessions that differ from what is stored but end
	// after the watermark: the stream may still hold an open session
	// inside them, so they are left for a run after it closes. So are
	// those that end past every stored session they cover (a late row
	// extended them) less than a gap before the watermark: under the
	// window rule the stream may still take a row there, after its last
	// session of the key, and emit a session overlapping them.
	Deferred []Row
	// Orphans are stored sessions that overlap no exact session of their
	// key (their raw rows are gone): reported, not touched.
	Orphans []lake.WindowRow
}

// SessionCorrection is one exact session and the stored rows it replaces.
// Written as one Delta commit with the others of the run: Replaced removed,
// Row added, so no two rows of a key overlap at any version.
type SessionCorrection struct {
	Row      lake.WindowRow   // origin batch; revision = max of Replaced + 1, or 1
	Replaced []lake.WindowRow // stored rows of the key overlapping Row's session
	Log      []SessionLogRow  // one per replaced row, or one when none
}

// SessionLogRow is one reconcile_log row of a session correction. A late
// row that bridged n emitted sessions gives n rows, each naming the
// session it replaced and the one it was merged into.
type SessionLogRow struct {
	Key      tidemark.Key
	Window   tidemark.Window  // the exact session written
	Replaced *tidemark.Window // the stored session replaced; nil when none was stored
	Old      *tidemark.Agg    // its aggregate; nil when none was stored
	New      tidemark.Agg
	LateRows int64 // late rows in the exact session
}

// PlanSessions compares stored sessions (window_results rows) with exact
// ones (Sessionize, with gap in µs) and says what to write. stored must
// hold every stored row of the keys overlapping the exact sessions; exact
// sessions ending after watermark (the stream's W) are never written, nor
// those ending past the stored sessions they cover within a gap of it (see
// SessionPlan.Deferred). same decides when a stored session already holds
// the exact one's aggregates (reconcile passes its own comparison,
// tolerant of sum rounding, and on a lake with --agg requiring exact
// values); now stamps computed_at. A correction carries the exact
// session's --agg values, marked exact.
//
// A second plan over the result of the first changes nothing: each exact
// session is then stored once, as it is.
func PlanSessions(stored []lake.WindowRow, exact []Row, gap, watermark int64, same func(exact Row, stored lake.WindowRow) bool, now int64) SessionPlan {
	var p SessionPlan
	byKey := map[tidemark.Key][]lake.WindowRow{}
	for _, r := range stored {
		byKey[r.Key] = append(byKey[r.Key], r)
	}
	for _, rows := range byKey {
		slices.SortFunc(rows, func(a, b lake.WindowRow) int { return cmp.Compare(a.Window.Start, b.Window.Start) })
	}
	exact = slices.Clone(exact)
	slices.SortFunc(exact, func(a, b Row) int { return tidemark.CompareResults(a.Result, b.Result) })
	touched := map[*lake.WindowRow]bool{}
	for i := range exact {
		e := &exact[i]
		rows := byKey[e.Key]
		var covered []lake.WindowRow
		for j := range rows {
			s := &rows[j]
			if s.Window.Start < e.Window.End && e.Window.Start < s.Window.End {
				covered = append(covered, *s)
				touched[s] = true
			}
		}
		if len(covered) == 1 && covered[0].Window == e.Window && same(*e, covered[0]) {
			p.Unchanged++
			continue
		}
		if e.Window.End > watermark || (!endsAtStored(e, covered) && tidemark.AddSat(e.Window.End, gap) > watermark) {
			p.Deferred = append(p.Deferred, *e)
			continue
		}
		p.Corrections = append(p.Corrections, correction(*e, covered, now))
	}
	for _, rows := range byKey {
		for j := range rows {
			if !touched[&rows[j]] {
				p.Orphans = append(p.Orphans, rows[j])
			}
		}
	}
	slices.SortFunc(p.Orphans, func(a, b lake.WindowRow) int { return tidemark.CompareResults(a.Result, b.Result) })
	return p
}

// endsAtStored reports whether e ends where one of the stored sessions it
// covers ends: the stream then knows that end (a row before it is late
// under either rule), so nothing it emits later can overlap e.
func endsAtStored(e *Row, covered []lake.WindowRow) bool {
	for _, s := range covered {
		if s.Window.End == e.Window.End {
			return true
		}
	}
	return false
}

// correction builds the row and log of one exact session replacing covered.
func correction(e Row, covered []lake.WindowRow, now int64) SessionCorrection {
	c := SessionCorrection{
		Row: lake.WindowRow{
			Result:     tidemark.Result{Window: e.Window, Key: e.Key, Agg: e.Agg, Final: true},
			Origin:     lake.OriginBatch,
			Revision:   1,
			ComputedAt: now,
			Aggs:       e.Aggs,
			Exact:      e.Aggs != nil,
		},
		Replaced: covered,
	}
	for _, s := range covered {
		c.Row.Revision = max(c.Row.Revision, s.Revision+1)
		win, agg := s.Window, s.Agg
		c.Log = append(c.Log, SessionLogRow{Key: e.Key, Window: e.Window, Replaced: &win, Old: &agg, New: e.Agg, LateRows: e.Late})
	}
	if len(covered) == 0 {
		c.Log = append(c.Log, SessionLogRow{Key: e.Key, Window: e.Window, New: e.Agg, LateRows: e.Late})
	}
	return c
}
