package stream

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"time"

	"tidemark"
	"tidemark/ingest"
	"tidemark/stream/engine"
)

// A stalled watermark (seed 001, ch. 5) is the commonest streaming trouble:
// windows stop closing and state grows. tidemark names what holds it. The
// runner watches W after every batch; once W has not moved for
// RunnerConfig.StallAfter of the batches' read time although lines
// arrived, the watermark is stalled, and the input holding it is named on
// the progress line ("stalled"), the status page and, rate-limited, in the
// log: the source whose watermark W is (the lowest active one, under the
// min policy), and within it the file at its frontier
// (ingest.Position.Holder), how long that file (or the whole source) has
// had no new line, and the --idle-timeout that would release it.

// DefaultStallAfter is RunnerConfig.StallAfter's zero value.
const DefaultStallAfter = time.Minute

// stallWarnEvery is how often the log repeats a stall that goes on with
// the same holder.
const stallWarnEvery = 10 * time.Minute

// Stall is what holds a stalled watermark back: the progress line's
// "stalled" field.
type Stall struct {
	Source string `json:"source"`
	// File is the file or object at the source's frontier; "" when no file
	// holds it (the whole source is silent).
	File string `json:"file,omitempty"`
	// Since is the read time of the batch after which W last moved; For
	// how long ago that is.
	Since string `json:"watermark_since"`
	For   string `json:"stalled_for"`
	// Silent is how long the file (or source) has had no new line; "" when
	// it is still read (its lines' event times just do not advance).
	Silent string `json:"silent_for,omitempty"`
	// HeldAt is the event time the source's watermark follows (before the
	// lateness budget).
	HeldAt string `json:"held_at,omitempty"`
	// IdleTimeout is --idle-timeout as configured ("0s": off); Release the
	// flag that would release the holder, "" when none would (it is not
	// silent).
	IdleTimeout string `json:"idle_timeout"`
	Release     string `json:"release_with,omitempty"`
}

// Message is the stall as one sentence, for the log and the terminal.
func (s *Stall) Message() string {
	what := "source " + s.Source
	if s.File != "" {
		what = "file " + s.File + " of source " + s.Source
	}
	msg := fmt.Sprintf("the watermark has not moved for %s: %s holds it", s.For, what)
	if s.HeldAt != "" {
		msg += " at " + s.HeldAt
	}
	switch {
	case s.Silent == "":
		msg += " (it is read, but its event times do not advance)"
	case s.Release != "":
		msg += fmt.Sprintf(" (no new line for %s; %s would release it)", s.Silent, s.Release)
	default:
		msg += fmt.Sprintf(" (no new line for %s)", s.Silent)
	}
	return msg
}

// stallWatch follows W from batch to batch (report.go calls observe).
type stallWatch struct {
	after   time.Duration
	idle    time.Duration
	policy  engine.Policy
	logger  *slog.Logger
	hasW    bool
	w       int64
	movedAt int64 // read time (µs) of the batch W last moved in
	rows    int64 // lines read since
	warned  int64 // read time of the last warning; 0 for none
	holder  string
}

func newStallWatch(cfg RunnerConfig) *stallWatch {
	after := cfg.StallAfter
	if after <= 0 {
		after = DefaultStallAfter
	}
	return &stallWatch{after: after, idle: cfg.Engine.IdleTimeout, policy: cfg.Engine.Policy, logger: cfg.Logger}
}

// observe takes one committed batch (read at now, µs, with rows lines and
// ending at W) and returns the stall, nil while W moves. end is the batch's
// logged end positions, marks the sources after it.
func (s *stallWatch) observe(now int64, rows int, w int64, hasW bool, end map[string]json.RawMessage, marks []engine.SourceMark) *Stall {
	if hasW != s.hasW || w != s.w || !hasW || w == tidemark.MaxTime {
		s.hasW, s.w, s.movedAt, s.rows, s.holder = hasW, w, now, 0, ""
		return nil
	}
	s.rows += int64(rows)
	if s.rows == 0 || now-s.movedAt < s.after.Microseconds() {
		return nil
	}
	st := s.diagnose(now, end, marks)
	if st == nil {
		return nil
	}
	key := st.Source + "\x00" + st.File
	if key != s.holder || s.warned == 0 || now-s.warned >= stallWarnEvery.Microseconds() {
		s.holder, s.warned = key, now
		s.logger.Warn("watermark stalled: "+st.Message(), "source", st.Source, "file", st.File, "silent_for", st.Silent,
			"stalled_for", st.For, "idle_timeout", st.IdleTimeout, "release_with", st.Release)
	}
	return st
}

// diagnose names what holds W: the source whose watermark it follows, and
// the file at that source's frontier.
func (s *stallWatch) diagnose(now int64, end map[string]json.RawMessage, marks []engine.SourceMark) *Stall {
	var src *engine.SourceMark
	for i := range marks {
		m := &marks[i]
		if !m.HasWatermark || m.Idle {
			continue
		}
		lower := src == nil || m.Watermark < src.Watermark
		if s.policy == engine.PolicyMax {
			lower = src == nil || m.Watermark > src.Watermark // under max, W follows the highest
		}
		if lower {
			src = m
		}
	}
	if src == nil {
		return nil
	}
	st := &Stall{Source: src.Name, Since: tidemark.FormatTime(s.movedAt), For: dur(now - s.movedAt), IdleTimeout: s.idle.String()}
	silent := int64(-1)
	if src.LastSeen > 0 {
		silent = now - src.LastSeen/1000
	}
	var pos ingest.Position
	if raw, ok := end[src.Name]; ok && json.Unmarshal(raw, &pos) == nil {
		if f, ok := pos.Holder(); ok {
			st.File = f.Path
			if t, ok := f.Standing(); ok {
				st.HeldAt = tidemark.FormatTime(t)
			}
			silent = -1
			if f.LastLine > 0 {
				silent = now - f.LastLine
			}
		}
	}
	if st.HeldAt == "" && src.HasEventTime {
		st.HeldAt = tidemark.FormatTime(src.MaxEventTime)
	}
	if silent >= time.Second.Microseconds() {
		st.Silent = dur(silent)
		if s.idle == 0 || s.idle.Microseconds() > silent {
			st.Release = "--idle-timeout " + releaseAfter(time.Duration(silent)*time.Microsecond).String()
		}
	}
	return st
}

// releaseAfter is the roundest idle timeout not over silent: one that
// would have released an input silent that long.
func releaseAfter(silent time.Duration) time.Duration {
	steps := []time.Duration{time.Second, 5 * time.Second, 10 * time.Second, 30 * time.Second, time.Minute, 2 * time.Minute,
		5 * time.Minute, 10 * time.Minute, 15 * time.Minute, 30 * time.Minute, time.Hour, 2 * time.Hour, 6 * time.Hour, 12 * time.Hour, 24 * time.Hour}
	out := steps[0]
	for _, d := range steps {
		if d <= silent {
			out = d
		}
	}
	return out
}

// dur formats µs as a duration rounded to the second (to the ms under one).
func dur(us int64) string {
	d := time.Duration(us) * time.Microsecond
	if d >= time.Second {
		return d.Round(time.Second).String()
	}
	return d.Round(time.Millisecond).String()
}
