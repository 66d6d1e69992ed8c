package engine

import (
	"container/heap"
	"errors"
	"fmt"
	"slices"
	"time"

	"tidemark"
)

// SessionEngine groups records per key into session windows (SPEC §2,
// --session-gap): a session is the half-open interval [first event, last
// event + gap), and two events of a key share a session when less than the
// gap separates them, directly or through events between them. Each event
// stands for its own interval [t, t+gap); a session is the union of the
// overlapping intervals of its events, so a row that bridges two open
// sessions merges them. Intervals that only touch (t+gap == next event) do
// not merge: the gap to the previous event is then exactly the gap, which
// starts a new session.
//
// A session closes, final, when W >= its end. Late rows:
//   - LateEvent: a row is late iff t < W.
//   - LateWindow: a row is late iff the session it would form or join could
//     already have been emitted: its own [t, t+gap) ends at or before W, or
//     t falls before the end of a closed session of its key (so it would
//     touch, and reopen, a session already emitted). This second clause is
//     what keeps the stream from ever emitting two overlapping sessions of
//     one key (the trap of Beam issue #18677).
//
// State per key is its open sessions, disjoint and sorted, and, under the
// window rule, the end of its latest closed session for as long as a row
// that is not late by the first clause could still touch it (until W >=
// that end + gap). Like Engine it is pure: no I/O, no clock, not safe for
// concurrent use; the same batches give the same output.
//
// Only append output is supported: in update mode a session's start can
// move as rows arrive before it, which would leave earlier non-final rows
// keyed by a start that no longer exists.
type SessionEngine struct {
	watermarks // sources, W and the rule that advances it (watermark.go)

	gap  int64
	keys map[tidemark.Key]*sessionKey
	due  sessionHeap // keys with open sessions or a closed horizon, soonest first

	open     int   // open sessions
	keyBytes int64 // bytes of the keys in keys

	changed []*sessionKey // keys the current batch added rows to (Changes)
}

// sessionKey is the state of one key.
type sessionKey struct {
	key  tidemark.Key
	open []tidemark.Session // disjoint, ascending
	// closedEnd is the end of the key's latest closed session while a row
	// could still touch it (window rule only).
	closedEnd int64
	hasClosed bool
	pos       int  // index in SessionEngine.due; -1 when not in it
	changed   bool // listed in SessionEngine.changed
}

// dueAt is the watermark at which the key next needs attention: its first
// open session closes, or its closed horizon can be forgotten.
func (k *sessionKey) dueAt(gap int64) int64 {
	d := tidemark.MaxTime
	if len(k.open) > 0 {
		d = k.open[0].Window.End
	}
	if k.hasClosed {
		d = min(d, tidemark.AddSat(k.closedEnd, gap))
	}
	return d
}

// ErrSessionAggs refuses --agg with session windows: sessions merge and
// split as rows arrive, and their aggregate states do not follow yet.
var ErrSessionAggs = errors.New("stream config: --agg works with tumbling and sliding windows (--window, --slide), not yet with session windows (--session-gap); use --value for a session's sum, min and max, or window the stream")

// NewSessionEngine returns a session engine with the given gap, resuming
// from st when it is not nil. cfg.Window is ignored; cfg.OutputMode must
// be Append and cfg.Aggs empty.

func NewSessionEngine(gap time.Duration, cfg Config, st *SessionState) (*SessionEngine, error) {
	g, err := sessionGap(gap)
	if err != nil {
		return nil, err
	}
	if cfg.OutputMode != Append {
		return nil, errors.New("stream config: session windows support only append output (--output-mode append)")
	}
	if !cfg.Aggs.Empty() {
		return nil, ErrSessionAggs
	}
	cfg.Window = tidemark.WindowSpec{Size: g}
	if cfg, err = cfg.validate(); err != nil {
		return nil, err
	}
	e := &SessionEngine{
		watermarks: newWatermarks(cfg),
		gap:        g,
		keys:       make(map[tidemark.Key]*sessionKey),
	}
	e.due.gap = g
	if st != nil {
		if err := e.load(st); err != nil {
			return nil, fmt.Errorf("stream: resume session state: %w", err)
		}
	}
	return e, nil
}

// CheckSessionGap checks a session gap: positive, whole microseconds.
func CheckSessionGap(gap time.Duration) error {
	_, err := sessionGap(gap)
	return err
}

// sessionGap checks a session gap and returns it in µs.
func sessionGap(gap time.Duration) (int64, error) {
	if gap <= 0 {
		return 0, fmt.Errorf("stream config: session gap must be positive, got %s", gap)
	}
	if gap%time.Microsecond != 0 {
		return 0, fmt.Errorf("stream config: session gap %s must be whole microseconds", gap)
	}
	return gap.Microseconds(), nil
}

// Gap returns the session gap.
func (e *SessionEngine) Gap() time.Duration { return time.Duration(e.gap) * time.Microsecond }

// Process runs one micro-batch as Engine.Process does: rows are classified
// with the watermark from the end of the previous batch, folded into their
// key's sessions (merging the sessions they bridge), then W is updated and
// every session with end <= W is emitted, final.
func (e *SessionEngine) Process(recs []tidemark.Record, now time.Time) BatchResult {
	e.resetChanged()
	b := e.begin(now)
	for i := range recs {
		r := &recs[i]
		if !e.observe(&b, r) {
			continue
		}
		if !e.add(r) {
			r.Status = tidemark.StatusLate
			b.res.Dropped++
		}
	}
	e.end(&b)
	res := b.res
	if e.hasW {
		res.Emitted = e.closeUpTo(e.w, res.Emitted)
	}
	e.finish(&res)
	return res
}

// Drain moves W to +infinity and emits every open session, final.
func (e *SessionEngine) Drain() BatchResult {
	e.resetChanged()
	e.w, e.hasW = tidemark.MaxTime, true
	var res BatchResult
	res.Emitted = e.closeUpTo(e.w, nil)
	e.finish(&res)
	return res
}

func (e *SessionEngine) finish(res *BatchResult) {
	slices.SortFunc(res.Emitted, tidemark.CompareResults)
	res.Watermark, res.HasWatermark = e.w, e.hasW
	res.OpenWindows = e.open
	res.StateBytes = e.StateBytes()
}

// Late reports whether a valid row at event time t for key would be late
// now, by the engine's rule (see SessionEngine). It changes nothing.
func (e *SessionEngine) Late(t int64, key tidemark.Key) bool {
	return e.late(t, e.keys[key])
}

// late is Late for the state k of the row's key (nil: none).
func (e *SessionEngine) late(t int64, k *sessionKey) bool {
	if !e.hasW {
		return false
	}
	if e.cfg.LateRule == LateEvent {
		return t < e.w
	}
	if tidemark.AddSat(t, e.gap) <= e.w {
		return true
	}
	return k != nil && k.hasClosed && t < k.closedEnd
}

// add folds a valid record into its key's sessions; false means it is late
// and was left out.
func (e *SessionEngine) add(r *tidemark.Record) bool {
	k := e.keys[r.Key]
	if e.late(r.EventTime, k) {
		return false
	}
	if k == nil {
		k = &sessionKey{key: r.Key, pos: -1}
		e.keys[r.Key] = k
		e.keyBytes += int64(len(r.Key))
	}
	e.merge(k, tidemark.EventSession(r.EventTime, e.gap, r.Value, r.HasValue))
	if !k.changed {
		k.changed = true
		e.changed = append(e.changed, k)
	}
	return true
}

// resetChanged starts a batch for change tracking.
func (e *SessionEngine) resetChanged() {
	for _, k := range e.changed {
		k.changed = false
	}
	e.changed = e.changed[:0]
}

// merge folds s into k's open sessions: every open session overlapping s
// joins it, and the union replaces them.
func (e *SessionEngine) merge(k *sessionKey, s tidemark.Session) {
	n := len(k.open)
	if n > 0 {
		// The common case: the row falls inside the key's last session, so
		// it overlaps that one only and extends it. Its end grows, which
		// never makes the key due sooner: no heap work.
		if last := &k.open[n-1]; s.Window.Start >= last.Window.Start && s.Window.Start < last.Window.End {
			last.Window.End = max(last.Window.End, s.Window.End)
			last.Agg.Merge(s.Agg)
			last.Late += s.Late
			return
		}
	}
	var i int
	k.open, i = tidemark.InsertSession(k.open, s)
	e.open += len(k.open) - n
	if i == 0 {
		e.due.update(k)
	}
}

// closeUpTo emits, final, every open session with end <= w and forgets the
// closed horizons w has passed.
func (e *SessionEngine) closeUpTo(w int64, out []tidemark.Result) []tidemark.Result {
	for len(e.due.entries) > 0 && e.due.entries[0].due <= w {
		k := e.due.entries[0].k
		if k.dueAt(e.gap) > w {
			e.due.reset(k) // popped early: the key grew since its entry was set
			continue
		}
		n := 0
		for ; n < len(k.open) && k.open[n].Window.End <= w; n++ {
			s := &k.open[n]
			out = append(out, tidemark.Result{Window: s.Window, Key: k.key, Agg: s.Agg, Final: true})
			if e.cfg.LateRule == LateWindow {
				k.closedEnd, k.hasClosed = s.Window.End, true
			}
		}
		if n > 0 {
			k.open = slices.Delete(k.open, 0, n)
			e.open -= n
		}
		if k.hasClosed && tidemark.AddSat(k.closedEnd, e.gap) <= w {
			k.hasClosed = false
		}
		if len(k.open) == 0 && !k.hasClosed {
			e.due.remove(k)
			delete(e.keys, k.key)
			e.keyBytes -= int64(len(k.key))
			continue
		}
		e.due.reset(k)
	}
	return out
}

// Approximate memory per open session (window 16 B, aggregate 48 B and
// late count 8 B in the key's slice, with size-class slack) and per key with state (its
// struct, map entry and heap slot), plus the key bytes.
// BenchmarkSessionStateBytes measures the real figure: 204 B per open
// session with one session per 12-byte key.
const (
	bytesPerSession    = 80
	bytesPerSessionKey = 112
)

// StateBytes estimates the memory the open sessions hold.
func (e *SessionEngine) StateBytes() int64 {
	return int64(e.open)*bytesPerSession + int64(len(e.keys))*bytesPerSessionKey + e.keyBytes
}

// sessionHeap orders keys by when they are due, so closing touches only
// the keys whose first session closes. An entry's due may be below the
// key's dueAt (it is lowered at once, never raised): a row extending a
// key's first session, the common case, then costs no heap work, and a
// key popped early is put back at its real due.
type sessionHeap struct {
	gap     int64
	entries []dueEntry
}

type dueEntry struct {
	due int64 // <= k.dueAt(gap)
	k   *sessionKey
}

func (h *sessionHeap) Len() int           { return len(h.entries) }
func (h *sessionHeap) Less(i, j int) bool { return h.entries[i].due < h.entries[j].due }
func (h *sessionHeap) Swap(i, j int) {
	h.entries[i], h.entries[j] = h.entries[j], h.entries[i]
	h.entries[i].k.pos, h.entries[j].k.pos = i, j
}
func (h *sessionHeap) Push(x any) {
	en := x.(dueEntry)
	en.k.pos = len(h.entries)
	h.entries = append(h.entries, en)
}
func (h *sessionHeap) Pop() any {
	n := len(h.entries) - 1
	en := h.entries[n]
	h.entries[n] = dueEntry{}
	h.entries = h.entries[:n]
	en.k.pos = -1
	return en
}

// remove takes k out of the heap.
func (h *sessionHeap) remove(k *sessionKey) { heap.Remove(h, k.pos) }

// update makes k due no later than its dueAt, adding it if absent.
func (h *sessionHeap) update(k *sessionKey) {
	d := k.dueAt(h.gap)
	if k.pos < 0 {
		heap.Push(h, dueEntry{due: d, k: k})
		return
	}
	if d < h.entries[k.pos].due {
		h.entries[k.pos].due = d
		heap.Fix(h, k.pos)
	}
}

// reset places k at exactly its dueAt.
func (h *sessionHeap) reset(k *sessionKey) {
	h.entries[k.pos].due = k.dueAt(h.gap)
	heap.Fix(h, k.pos)
}
