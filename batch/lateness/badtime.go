package lateness

import (
	"fmt"
	"strings"
	"time"

	"tidemark"
)

// DefaultBadAfter is Config.BadAfter's default: a row whose arrival lag or
// disorder is 30 days or more has a broken timestamp (a client clock at
// epoch zero, a year typed wrong), not a late arrival. No stream would
// hold windows open that long, and one such row in a hundred would
// otherwise make the disorder p99 the recommendation — 56 years for epoch
// zero.
const DefaultBadAfter = 30 * 24 * time.Hour

// BadTimestamps are a group's rows left out of every measure, the
// recommendation and the what-if replay, because their arrival lag or
// disorder is at least Config.BadAfter. The stream keeps such rows out with
// a time floor (old event times, quarantined) and --max-future (event times
// ahead of arrival, quarantined as future_time).
type BadTimestamps struct {
	// After is Config.BadAfter, seconds: the threshold applied.
	After float64 `json:"after_s"`
	Rows  int64   `json:"rows"`
	// Past rows have an event time at least BadAfter before their arrival;
	// Future rows one at least BadAfter after it (the stream's --max-future
	// let them in); Disorder rows arrived at a plausible lag but at least
	// BadAfter behind their source's maximum: behind an event from the
	// future.
	Past     int64 `json:"past"`
	Future   int64 `json:"future"`
	Disorder int64 `json:"disorder"`
	// Oldest and Newest are the bad rows' extreme event times (RFC 3339).
	Oldest string `json:"oldest_event_time,omitempty"`
	Newest string `json:"newest_event_time,omitempty"`
	// SuggestedMinEventTime is a time floor that quarantines the Past rows
	// and keeps every measured row: the start of the UTC day of the
	// earliest measured event.
	SuggestedMinEventTime string `json:"suggested_min_event_time,omitempty"`

	oldest, newest int64
}

// badAcc classifies rows as bad timestamps and counts them.
type badAcc struct {
	after int64 // µs
}

// kind returns 0 for a plausible row, else which kind of bad timestamp.
func (a badAcc) kind(lag, disorder int64) int {
	switch {
	case lag >= a.after:
		return badPast
	case lag <= -a.after:
		return badFuture
	case disorder >= a.after:
		return badDisorder
	}
	return 0
}

const (
	badPast = 1 + iota
	badFuture
	badDisorder
)

func (b *BadTimestamps) add(kind int, event int64) {
	if b.Rows == 0 || event < b.oldest {
		b.oldest = event
	}
	if b.Rows == 0 || event > b.newest {
		b.newest = event
	}
	b.Rows++
	switch kind {
	case badPast:
		b.Past++
	case badFuture:
		b.Future++
	default:
		b.Disorder++
	}
}

func (b *BadTimestamps) merge(o *BadTimestamps) {
	if o.Rows == 0 {
		return
	}
	if b.Rows == 0 || o.oldest < b.oldest {
		b.oldest = o.oldest
	}
	if b.Rows == 0 || o.newest > b.newest {
		b.newest = o.newest
	}
	b.Rows += o.Rows
	b.Past += o.Past
	b.Future += o.Future
	b.Disorder += o.Disorder
}

// finish fills in the rendered times; firstGood is the earliest measured
// event time (ok is false without measured rows).
func (b *BadTimestamps) finish(firstGood int64, ok bool) {
	if b.Rows == 0 {
		return
	}
	b.Oldest, b.Newest = fmtTime(b.oldest), fmtTime(b.newest)
	if b.Past > 0 && ok {
		b.SuggestedMinEventTime = fmtTime(firstGood - mod(firstGood, usDay))
	}
}

// advice is the report's sentence about the bad rows, naming the guards
// that keep them out of the stream.
func (b *BadTimestamps) advice(after time.Duration) string {
	if b.Rows == 0 {
		return ""
	}
	times := b.Oldest
	if b.Newest != b.Oldest {
		times += " .. " + b.Newest
	}
	s := fmt.Sprintf("bad timestamps: %s rows with arrival lag or disorder of %s or more (event time %s) are left out of the measures, the recommendation and the what-if:",
		tidemark.FormatCount(b.Rows), FormatDuration(after.Seconds()), times)
	var kinds []string
	if b.Past > 0 {
		kinds = append(kinds, fmt.Sprintf("%s far in the past", tidemark.FormatCount(b.Past)))
	}
	if b.Future > 0 {
		kinds = append(kinds, fmt.Sprintf("%s far ahead of their arrival", tidemark.FormatCount(b.Future)))
	}
	if b.Disorder > 0 {
		kinds = append(kinds, fmt.Sprintf("%s behind an event from the future that moved their source's maximum", tidemark.FormatCount(b.Disorder)))
	}
	s += " " + strings.Join(kinds, ", ") + ". Keep them out of the stream: a time floor quarantines old event times"
	if b.SuggestedMinEventTime != "" {
		s += " (stream --min-event-time " + b.SuggestedMinEventTime + ")"
	}
	s += ", --max-future (default 1h) those ahead of their arrival (future_time)"
	return s
}

func fmtTime(us int64) string { return tidemark.FormatTime(us) }

// mod is the non-negative remainder.
func mod(a, b int64) int64 {
	m := a % b
	if m < 0 {
		m += b
	}
	return m
}
