package engine

import (
	"slices"
	"strings"
	"time"

	"tidemark"
)

// watermarks is the one watermark mechanism of SPEC §2, embedded by every
// engine (Engine for windows, SessionEngine for sessions): the sources,
// what each has seen, the frontiers that cap them, and the rule that
// advances W at the end of a batch. An engine adds only what it folds
// records into and what W closes. Changing the watermark rule means
// changing advance, here, and nothing else.
type watermarks struct {
	cfg Config

	w    int64 // the global watermark; tidemark.MinTime while there is none
	hasW bool

	sources map[string]*source
}

func newWatermarks(cfg Config) watermarks {
	return watermarks{cfg: cfg, w: tidemark.MinTime, sources: make(map[string]*source)}
}

type source struct {
	max      int64 // max valid event time seen, µs
	hasMax   bool
	lastSeen int64 // now (unix ns) of the last batch with any line of the source
	// frontier caps the source's max in advance (SetFrontier): the event
	// time of its input that lags, so no file runs the watermark ahead of
	// another that still has data.
	frontier int64
	capped   bool
}

// SetFrontier caps the watermark of a source at the end of the next
// Process calls: wm_s = min(max event time, frontier) - lateness, until it
// is set again; held false removes the cap. The runner sets it from the
// source's Position after each read (ingest.Position.Frontier), so a file
// whose events lag holds back those read ahead of it. The cap is not part
// of State: it is logged with the batch's input and set again on replay.
func (m *watermarks) SetFrontier(name string, frontier int64, held bool) {
	s := m.source(name)
	s.frontier, s.capped = frontier, held
}

// source returns the state of the named source, creating it.
func (m *watermarks) source(name string) *source {
	s := m.sources[name]
	if s == nil {
		s = &source{}
		m.sources[name] = s
	}
	return s
}

// batch is the front half of one Process call that every engine shares:
// the result being built, the event-time figures and the source of the
// last record seen (records of one source come in runs).
type batch struct {
	res   BatchResult
	stats eventStats
	now   int64 // unix ns
	src   *source
	name  string
}

func (m *watermarks) begin(now time.Time) batch { return batch{now: now.UnixNano()} }

// observe is the per-record front half of a batch: it marks the record's
// source active, counts a quarantined record (Reason != ReasonNone, which
// never moves the watermark) and reports false for it; for a valid one it
// adds its event time to the batch figures, sets its Disorder against its
// source's max event time, raises that max, sets Status OK and reports
// true. The engine then folds the record in, or marks it late.
func (m *watermarks) observe(b *batch, r *tidemark.Record) bool {
	if b.src == nil || r.Source != b.name {
		b.src, b.name = m.source(r.Source), r.Source
	}
	s := b.src
	s.lastSeen = b.now
	if r.Reason != tidemark.ReasonNone {
		b.res.Quarantined++
		return false
	}
	t := r.EventTime
	b.stats.add(t)
	r.Disorder = 0
	switch {
	case !s.hasMax:
		s.max, s.hasMax = t, true
	case s.max > t:
		r.Disorder = s.max - t
	default:
		s.max = t
	}
	r.Status = tidemark.StatusOK
	return true
}

// end closes the front half of a batch: the event-time figures go into
// the result and W advances.
func (m *watermarks) end(b *batch) {
	b.res.Rows = b.stats.n
	b.res.MinEventTime, b.res.MaxEventTime, b.res.AvgEventTime = b.stats.result()
	m.advance(b.now)
}

// advance is the watermark rule of SPEC §2: W is, over the sources that
// take part, the policy's combination (min, or max with PolicyMax) of each
// source's level (its max event time capped at its frontier, see level)
// minus its lateness. Sources without a valid event yet, and sources idle
// for IdleTimeout, take no part unless their frontier holds them; when
// none takes part W stays. W never decreases.
func (m *watermarks) advance(nowNs int64) {
	idle := int64(m.cfg.IdleTimeout)
	var w int64
	found := false
	for name, s := range m.sources {
		lvl, ok := s.level()
		if !ok || (!s.capped && idle > 0 && nowNs-s.lastSeen >= idle) {
			continue
		}
		wm := tidemark.SubSat(lvl, m.cfg.lateness(name))
		switch {
		case !found:
			w, found = wm, true
		case m.cfg.Policy == PolicyMax:
			w = max(w, wm)
		default:
			w = min(w, wm)
		}
	}
	if found && (!m.hasW || w > m.w) {
		m.w, m.hasW = w, true
	}
}

// level is the event time the source's watermark follows: its max event
// time, capped at its frontier while its input holds it back (files with
// unread data or live ones not idle; such a source takes part even before
// its first event). ok is false for a source with no valid event that its
// input does not hold.
func (s *source) level() (m int64, ok bool) {
	switch {
	case s.capped && s.hasMax:
		return min(s.frontier, s.max), true
	case s.capped:
		return s.frontier, true
	case s.hasMax:
		return s.max, true
	}
	return 0, false
}

// setState replaces W and the sources with those of a snapshot or
// changelog entry. dup names a source listed twice (nothing is replaced
// then).
func (m *watermarks) setState(w int64, hasW bool, states []SourceState) (dup string, ok bool) {
	sources := make(map[string]*source, len(states))
	for _, s := range states {
		if _, twice := sources[s.Name]; twice {
			return s.Name, false
		}
		sources[s.Name] = &source{max: s.MaxEventTime, hasMax: s.HasEventTime, lastSeen: s.LastSeen}
	}
	m.sources = sources
	m.w, m.hasW = tidemark.MinTime, hasW
	if hasW {
		m.w = w
	}
	return "", true
}

// sourceStates appends every source's state to dst, sorted by name.
func (m *watermarks) sourceStates(dst []SourceState) []SourceState {
	from := len(dst)
	for name, s := range m.sources {
		dst = append(dst, SourceState{Name: name, MaxEventTime: s.max, HasEventTime: s.hasMax, LastSeen: s.lastSeen})
	}
	slices.SortFunc(dst[from:], func(a, b SourceState) int { return strings.Compare(a.Name, b.Name) })
	return dst
}

// SourceMark is one source's part of the watermark after a batch: what the
// status page and the progress line show per source.
type SourceMark struct {
	Name         string
	MaxEventTime int64 // µs; meaningful when HasEventTime
	Watermark    int64 // MaxEventTime (capped at the frontier) − the source's lateness budget, µs; meaningful when HasWatermark
	HasEventTime bool  // false while the source has sent only quarantined lines
	HasWatermark bool  // the source has a level (see source.level)
	Idle         bool  // silent for IdleTimeout at now: not holding W back
	LastSeen     int64 // unix ns of the last batch holding a line of the source; 0 for none
}

// SourceWatermarks returns the watermark of every source that has one, by
// name (µs).
func (m *watermarks) SourceWatermarks() map[string]int64 {
	out := make(map[string]int64, len(m.sources))
	for name, s := range m.sources {
		if lvl, ok := s.level(); ok {
			out[name] = tidemark.SubSat(lvl, m.cfg.lateness(name))
		}
	}
	return out
}

// SourceMarks returns each source's max event time, watermark and idleness
// at now (the last batch's now), sorted by name. It reads the same fields
// advance does, so the figures are the ones W was computed from.
func (m *watermarks) SourceMarks(now time.Time) []SourceMark {
	nowNs := now.UnixNano()
	idle := int64(m.cfg.IdleTimeout)
	out := make([]SourceMark, 0, len(m.sources))
	for name, s := range m.sources {
		sm := SourceMark{Name: name, MaxEventTime: s.max, HasEventTime: s.hasMax, LastSeen: s.lastSeen}
		if lvl, ok := s.level(); ok {
			sm.Watermark, sm.HasWatermark = tidemark.SubSat(lvl, m.cfg.lateness(name)), true
		}
		sm.Idle = idle > 0 && nowNs-s.lastSeen >= idle
		out = append(out, sm)
	}
	slices.SortFunc(out, func(a, b SourceMark) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// eventStats accumulates min, max and mean event time without overflow.
type eventStats struct {
	n        int64
	min, max int64
	base     int64
	sum      float64 // sum of t - base
}

func (s *eventStats) add(t int64) {
	if s.n == 0 {
		s.min, s.max, s.base = t, t, t
	}
	s.n++
	s.min = min(s.min, t)
	s.max = max(s.max, t)
	s.sum += float64(t - s.base)
}

func (s *eventStats) result() (lo, hi, avg int64) {
	if s.n == 0 {
		return 0, 0, 0
	}
	return s.min, s.max, s.base + int64(s.sum/float64(s.n))
}
