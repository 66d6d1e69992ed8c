package tidemark

import "slices"

// Session is the aggregate of one session window of one key: the window
// [first event, last event + gap) and its rows.
type Session struct {
	Window Window
	Agg    Agg
	Late   int64 // rows among Agg that the stream marked late (counted by the batch layer)
}

// InsertSession folds s into ss, one key's sessions (disjoint and
// ascending), and returns the new list and the position of the session s
// ended in. Every session of ss overlapping s merges with it into one: a
// session is the union of the intervals [t, t+gap) of its events, so an
// event's interval that overlaps two sessions bridges them. Sessions that
// only touch stay apart (the gap to the previous event is then exactly the
// gap, which starts a new session). The result does not depend on the
// order of insertion, which is why the stream (arrival order) and the
// batch layer (file order) both build sessions with it.
func InsertSession(ss []Session, s Session) ([]Session, int) {
	// i: the first session ending after s starts; j: past the last one
	// starting before s ends. Sessions i..j-1 overlap s.
	i, _ := slices.BinarySearchFunc(ss, s.Window.Start, func(o Session, t int64) int {
		if o.Window.End <= t {
			return -1
		}
		return 1
	})
	j := i
	for j < len(ss) && ss[j].Window.Start < s.Window.End {
		o := &ss[j]
		s.Window.Start = min(s.Window.Start, o.Window.Start)
		s.Window.End = max(s.Window.End, o.Window.End)
		o.Agg.Merge(s.Agg)
		s.Agg = o.Agg
		s.Late += o.Late
		j++
	}
	return slices.Replace(ss, i, j, s), i
}

// EventSession is the session of one event alone: [t, t+gap), saturating
// at MaxTime.
func EventSession(t, gap int64, v float64, hasValue bool) Session {
	s := Session{Window: Window{Start: t, End: AddSat(t, gap)}}
	s.Agg.Add(v, hasValue)
	return s
}

// AddSat returns a+b for b >= 0, saturating at MaxTime instead of wrapping
// (a session's end near the end of time, a horizon plus the gap).
func AddSat(a, b int64) int64 {
	if a > MaxTime-b {
		return MaxTime
	}
	return a + b
}

// MergeSessions returns the sessions of one key made of two lists: a,
// disjoint and ascending as InsertSession keeps them, and b, any sessions
// sorted by start (they may overlap each other). Sessions that overlap
// merge, as InsertSession merges them. It costs O(len(a) + len(b)), so the
// batch layer folds rows that come in no particular order by sorting a
// chunk of them and merging it in, instead of inserting one by one.
func MergeSessions(a, b []Session) []Session {
	out := make([]Session, 0, len(a)+len(b))
	i, j := 0, 0
	for i < len(a) || j < len(b) {
		var next Session
		if j == len(b) || (i < len(a) && a[i].Window.Start <= b[j].Window.Start) {
			next, i = a[i], i+1
		} else {
			next, j = b[j], j+1
		}
		if n := len(out); n > 0 && next.Window.Start < out[n-1].Window.End {
			last := &out[n-1]
			last.Window.End = max(last.Window.End, next.Window.End)
			last.Agg.Merge(next.Agg)
			last.Late += next.Late
			continue
		}
		out = append(out, next)
	}
	return out
}
