package stream

import (
	"slices"
	"strings"
	"time"

	"tidemark"
)

// sourceMark is one source's part of the watermark after a batch: what the
// status page and the progress line show per source.
type sourceMark struct {
	Name         string
	MaxEventTime int64 // µs; meaningful when HasEventTime
	Watermark    int64 // MaxEventTime (capped at the frontier) − the source's lateness budget, µs; meaningful when HasWatermark
	HasEventTime bool  // false while the source has sent only quarantined lines
	HasWatermark bool  // the source has a level (see source.level)
	Idle         bool  // silent for IdleTimeout at now: not holding W back
	LastSeen     int64 // unix ns of the last batch holding a line of the source; 0 for none
}

// sourceWatermarks returns the watermark of every source that has one, by
// name (µs).
func (e *Engine) sourceWatermarks() map[string]int64 {
	out := make(map[string]int64, len(e.sources))
	for name, s := range e.sources {
		if lvl, ok := s.level(); ok {
			out[name] = tidemark.SubSat(lvl, e.cfg.lateness(name))
		}
	}
	return out
}

// sourceMarks returns each source's max event time, watermark and idleness
// at now (the last batch's now), sorted by name. It reads the same fields
// advance does, so the figures are the ones W was computed from.
func (e *Engine) sourceMarks(now time.Time) []sourceMark {
	nowNs := now.UnixNano()
	idle := int64(e.cfg.IdleTimeout)
	out := make([]sourceMark, 0, len(e.sources))
	for name, s := range e.sources {
		m := sourceMark{Name: name, MaxEventTime: s.max, HasEventTime: s.hasMax, LastSeen: s.lastSeen}
		if lvl, ok := s.level(); ok {
			m.Watermark, m.HasWatermark = tidemark.SubSat(lvl, e.cfg.lateness(name)), true
		}
		m.Idle = idle > 0 && nowNs-s.lastSeen >= idle
		out = append(out, m)
	}
	slices.SortFunc(out, func(a, b sourceMark) int { return strings.Compare(a.Name, b.Name) })
	return out
}
