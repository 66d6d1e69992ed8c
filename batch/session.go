package batch

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"tidemark"
	"tidemark/lake"
)

// SessionQuery says which sessions to compute exactly: every session of a
// key (all keys, or the listed Keys) that overlaps [From, To) of event time.
type SessionQuery struct {
	Gap      time.Duration // the session gap; required, whole microseconds
	From, To int64         // event time, µs; To > From, both bounded
	// Keys restricts the result to these keys; nil means every key.
	Keys []tidemark.Key
	// Version is the raw_events version to read; <= 0 means the latest.
	Version int64
}

// SessionStats says what a sessionization read: the rows and the
// raw_events partitions (event hours) it scanned, and the event-time range
// it widened to.
type SessionStats struct {
	Stats
	ScannedFrom, ScannedTo int64
}

// Sessionize returns the exact sessions of the query from every raw_events
// row (ok and late), sorted by window start, end and key; each Row's Late
// counts the rows of the session the stream marked late.
//
// A session can cross hour and day partitions and start long before From
// or end long after To, so the scan widens: it first reads [From-gap, To)
// (every row whose [t, t+gap) overlaps the range), then, for the keys whose
// first wanted session starts within a gap of the scanned range's start,
// the partitions before it, and symmetrically after its end, until every
// wanted session has a gap of event time without rows of its key on both
// sides or the table has no rows further out. Only the widening keys'
// rows are folded in, and memory holds sessions and a bounded buffer of
// rows (flush), never all the rows.
func Sessionize(ctx context.Context, lk *lake.Lake, q SessionQuery) ([]Row, SessionStats, error) {
	if q.Gap <= 0 || q.Gap%time.Microsecond != 0 {
		return nil, SessionStats{}, fmt.Errorf("sessionize: gap %s: want a positive whole number of microseconds", q.Gap)
	}
	if q.To <= q.From || q.From < lake.AllFrom/2 || q.To > lake.AllTo/2 {
		return nil, SessionStats{}, fmt.Errorf("sessionize: range [%d, %d): want a bounded, non-empty range", q.From, q.To)
	}
	ex := newExactPlan(lk.Config().Aggs)
	layout, err := lk.RawLayout(ctx, q.Version)
	if err != nil {
		return nil, SessionStats{}, fmt.Errorf("sessionize: %w", err)
	}
	s := &sessionizer{
		lk:       lk,
		gap:      q.Gap.Microseconds(),
		from:     q.From,
		to:       q.To,
		layout:   layout,
		sessions: map[tidemark.Key][]tidemark.Session{},
		pending:  map[tidemark.Key][]tidemark.Session{},
		counted:  map[int64]bool{},
	}
	if q.Keys != nil {
		s.keys = make(map[tidemark.Key]bool, len(q.Keys))
		for _, k := range q.Keys {
			s.keys[k] = true
		}
	}
	lo, hi := q.From-s.gap, q.To
	if !layout.Partitioned {
		lo, hi = lake.AllFrom, lake.AllTo // no partitions to widen by: read it all once
	}
	if err := s.scan(ctx, lo, hi, s.keys); err != nil {
		return nil, s.stats, err
	}
	for {
		left, right := s.unsettled(lo, hi)
		if len(left) == 0 && len(right) == 0 {
			break
		}
		if len(left) > 0 {
			next := hourFloor(lo - s.gap)
			if err := s.scan(ctx, next, lo, left); err != nil {
				return nil, s.stats, err
			}
			lo = next
		}
		if len(right) > 0 {
			next := hourFloor(hi+s.gap-1) + tidemark.MicrosPerHour
			if err := s.scan(ctx, hi, next, right); err != nil {
				return nil, s.stats, err
			}
			hi = next
		}
	}
	s.stats.ScannedFrom, s.stats.ScannedTo = lo, hi
	var out []Row
	for key, ss := range s.sessions {
		for _, x := range s.wanted(ss) {
			out = append(out, Row{Result: tidemark.Result{Window: x.Window, Key: key, Agg: x.Agg, Final: true}, Late: x.Late})
		}
	}
	slices.SortFunc(out, func(a, b Row) int { return tidemark.CompareResults(a.Result, b.Result) })
	if ex != nil {
		if err := s.exact(ctx, ex, out); err != nil {
			return nil, s.stats, err
		}
	}
	return out, s.stats, nil
}

// exact computes the aggregates of the sessions in out, once their
// windows are known: a second scan over their event time reads the input
// columns of their keys' rows and folds each into the session holding it
// (a key's sessions are disjoint). Lakes without aggregates never pay it.
func (s *sessionizer) exact(ctx context.Context, ex *exactPlan, out []Row) error {
	if len(out) == 0 {
		return nil
	}
	byKey := map[tidemark.Key][]int{} // indexes into out, by start
	cells := make([]*exactCell, len(out))
	lo, hi := out[0].Window.Start, out[0].Window.End
	for i, r := range out {
		byKey[r.Key] = append(byKey[r.Key], i)
		cells[i] = ex.newCell()
		lo, hi = min(lo, r.Window.Start), max(hi, r.Window.End)
	}
	q := lake.RawQuery{Time: lake.Between(lo, hi), Columns: []string{lake.ColEventTime, lake.ColKey, lake.ColFields}, Version: s.layout.Version}
	err := s.lk.ScanRaw(ctx, q, func(b lake.RawBatch) error {
		for i := range b.N {
			idx := byKey[b.Key[i]]
			if idx == nil {
				continue
			}
			t := b.EventTime[i]
			j, _ := slices.BinarySearchFunc(idx, t, func(x int, t int64) int {
				if out[x].Window.End <= t {
					return -1
				}
				return 1
			})
			if j == len(idx) || out[idx[j]].Window.Start > t {
				continue
			}
			ex.add(cells[idx[j]], b.Fields, i)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("sessionize: %w", err)
	}
	for i := range out {
		out[i].Aggs = ex.out(cells[i])
	}
	return nil
}

// sessionizer is the state of one Sessionize call.
type sessionizer struct {
	lk        *lake.Lake
	gap       int64
	from, to  int64
	layout    *lake.RawLayout
	keys      map[tidemark.Key]bool // nil: every key
	sessions  map[tidemark.Key][]tidemark.Session
	pending   map[tidemark.Key][]tidemark.Session // rows not yet merged into sessions
	npending  int
	nsessions int
	stats     SessionStats
	counted   map[int64]bool // event hours already counted in stats
}

// scan folds the rows with event time in [from, to) of the keys in only
// (nil: every key) into their sessions.
func (s *sessionizer) scan(ctx context.Context, from, to int64, only map[tidemark.Key]bool) error {
	s.count(from, to)
	// Not the --agg inputs: exact reads them once the sessions are known.
	q := lake.RawQuery{Time: lake.Between(from, to), Columns: []string{lake.ColEventTime, lake.ColKey, lake.ColValue, lake.ColStatus}, Version: s.layout.Version}
	err := s.lk.ScanRaw(ctx, q, func(b lake.RawBatch) error {
		s.stats.RowsRead += int64(b.N)
		for i := range b.N {
			key := b.Key[i]
			if only != nil && !only[key] {
				continue
			}
			x := tidemark.EventSession(b.EventTime[i], s.gap, b.Value[i], b.HasValue[i])
			if b.Status[i] == tidemark.StatusLate {
				x.Late = 1
			}
			s.pending[key] = append(s.pending[key], x)
			if s.npending++; s.npending >= max(flushRows, s.nsessions) {
				s.flush()
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("sessionize: %w", err)
	}
	s.flush()
	return nil
}

// flushRows is the fewest buffered rows flush waits for.
const flushRows = 1 << 16

// flush folds the buffered rows into their keys' sessions: sorted, then
// merged in one pass per key. Rows come in file order, not event time, and
// inserting each into a long list of sessions would shift the list every
// time; flushing when the buffer holds as many rows as there are sessions
// keeps the merging O(n log n) overall.
func (s *sessionizer) flush() {
	for key, rows := range s.pending {
		slices.SortFunc(rows, func(a, b tidemark.Session) int { return cmp.Compare(a.Window.Start, b.Window.Start) })
		before := len(s.sessions[key])
		s.sessions[key] = tidemark.MergeSessions(s.sessions[key], rows)
		s.nsessions += len(s.sessions[key]) - before
		s.pending[key] = rows[:0]
	}
	s.npending = 0
}

// count adds the event hours of [from, to) that hold files to the stats.
func (s *sessionizer) count(from, to int64) {
	if !s.layout.Partitioned {
		s.stats.FilesRead, s.stats.BytesRead, s.stats.PartitionsRead = s.layout.Files, s.layout.Bytes, s.layout.Partitions
		return
	}
	for _, h := range s.layout.Hours {
		if h.Start+tidemark.MicrosPerHour > from && h.Start < to && !s.counted[h.Start] {
			s.counted[h.Start] = true
			s.stats.PartitionsRead++
			s.stats.FilesRead += h.Files
			s.stats.BytesRead += h.Bytes
		}
	}
}

// wanted returns the sessions of ss that overlap the query's range.
func (s *sessionizer) wanted(ss []tidemark.Session) []tidemark.Session {
	i, _ := slices.BinarySearchFunc(ss, s.from, func(x tidemark.Session, t int64) int {
		if x.Window.End <= t {
			return -1
		}
		return 1
	})
	j := i
	for j < len(ss) && ss[j].Window.Start < s.to {
		j++
	}
	return ss[i:j]
}

// unsettled returns the keys whose wanted sessions might still grow by
// rows before lo (left) or from hi on (right): the first wanted session
// starts less than a gap after lo, or the last ends after hi (its last
// row is less than a gap before hi). A side with no partition beyond the
// scanned range has nothing left to read.
func (s *sessionizer) unsettled(lo, hi int64) (left, right map[tidemark.Key]bool) {
	if !s.layout.Partitioned {
		return nil, nil
	}
	hours := s.layout.Hours
	moreLeft := len(hours) > 0 && hours[0].Start < lo
	moreRight := len(hours) > 0 && hours[len(hours)-1].Start+tidemark.MicrosPerHour > hi
	left, right = map[tidemark.Key]bool{}, map[tidemark.Key]bool{}
	for key, ss := range s.sessions {
		w := s.wanted(ss)
		if len(w) == 0 {
			continue
		}
		if moreLeft && w[0].Window.Start-s.gap < lo {
			left[key] = true
		}
		if moreRight && w[len(w)-1].Window.End > hi {
			right[key] = true
		}
	}
	return left, right
}

// hourFloor is the start of the event hour (raw_events partition) of t.
func hourFloor(t int64) int64 {
	return tidemark.FloorDiv(t, tidemark.MicrosPerHour) * tidemark.MicrosPerHour
}

// LateSessionQuery asks for the sessions late rows changed: those holding
// a late row in a raw_events file added after SinceVersion.
type LateSessionQuery struct {
	Gap          time.Duration
	SinceVersion int64 // 0: every late row
	// Time keeps only the late rows with event times in it (the zero
	// TimeRange: all): reconcile's second look at the sessions still open
	// at its previous run.
	Time    lake.TimeRange
	Version int64 // the raw_events version to read; <= 0 means the latest
}

// LateSessions returns the exact sessions (as Sessionize computes them)
// that hold a late row committed after q.SinceVersion (with event times in q.Time): the sessions a
// reconcile run has to check, each whole. It reads the late rows' event
// times and keys from the new files, then sessionizes only those keys
// over the late rows' range (widening as Sessionize does).
func LateSessions(ctx context.Context, lk *lake.Lake, q LateSessionQuery) ([]Row, SessionStats, error) {
	layout, err := lk.RawLayout(ctx, q.Version)
	if err != nil {
		return nil, SessionStats{}, fmt.Errorf("late sessions: %w", err)
	}
	late := map[tidemark.Key][]int64{}
	lo, hi := tidemark.MaxTime, tidemark.MinTime
	rq := lake.RawQuery{Time: q.Time, Columns: []string{lake.ColEventTime, lake.ColKey},
		Status: "late", MinCommitVersion: q.SinceVersion, Version: layout.Version}
	err = lk.ScanRaw(ctx, rq, func(b lake.RawBatch) error {
		for i := range b.N {
			t := b.EventTime[i]
			late[b.Key[i]] = append(late[b.Key[i]], t)
			lo, hi = min(lo, t), max(hi, t)
		}
		return nil
	})
	if err != nil {
		return nil, SessionStats{}, fmt.Errorf("late sessions: %w", err)
	}
	if len(late) == 0 {
		return nil, SessionStats{}, nil
	}
	keys := make([]tidemark.Key, 0, len(late))
	for k, ts := range late {
		keys = append(keys, k)
		slices.Sort(ts)
	}
	rows, st, err := Sessionize(ctx, lk, SessionQuery{Gap: q.Gap, From: lo, To: hi + 1, Keys: keys, Version: layout.Version})
	if err != nil {
		return nil, st, err
	}
	// Keep the sessions holding one of the new late rows.
	return slices.DeleteFunc(rows, func(r Row) bool {
		ts := late[r.Key]
		i, _ := slices.BinarySearch(ts, r.Window.Start)
		return i == len(ts) || ts[i] >= r.Window.End
	}), st, nil
}
