package lateness

import (
	"fmt"
	"slices"
	"time"
)

// Periods of Config.Period.
const (
	PeriodHour = time.Hour
	PeriodDay  = 24 * time.Hour
)

// The rule that marks a period as far from the usual: its p99 of disorder
// (or of arrival lag) is more than markFactor times the median over the
// group's periods of that p99, and at least markMin above it. The median
// is robust: up to half the periods can be outages without moving it. With
// fewer than markMinPeriods periods nothing is marked (no usual to compare
// with).
const (
	markFactor     = 4
	markMin        = usMinute
	markMinPeriods = 3
)

// MarkRule states the rule in words, for the report.
var MarkRule = fmt.Sprintf("a period is marked when its p99 (of disorder or of arrival lag) is more than %d× the median of the periods' p99 and at least %s above it (needs %d periods)",
	markFactor, FormatDuration(float64(markMin)/1e6), markMinPeriods)

// Period is one hour or day (of event time, UTC) of a group.
type Period struct {
	Start      string      `json:"start"`
	Rows       int64       `json:"rows"`
	ArrivalLag Percentiles `json:"arrival_lag_s"`
	Disorder   Percentiles `json:"disorder_s"`
	// LateShare is the share of the period's rows the stream drops with
	// the budget that covers the group's normal periods (Outages.
	// NormalLateness; --late-rule window, replayed): where an outage hurts.
	LateShare float64 `json:"late_share"`
	// Marked by MarkRule; Why names the measure(s): "disorder", "arrival
	// lag" or both.
	Marked bool   `json:"marked"`
	Why    string `json:"why,omitempty"`
}

// Outages sums up a group's marked periods and what budget the others need.
type Outages struct {
	Rule          string `json:"rule"`
	MarkedPeriods int    `json:"marked_periods"`
	// NormalLateness is the exact disorder p99 of the rows in unmarked
	// periods rounded up, as the recommendation is for all rows.
	NormalLateness float64 `json:"normal_lateness_s"`
	// NormalDropFraction is the share of all the group's rows the stream
	// drops with NormalLateness (--late-rule window, replayed);
	// NormalPeriodsDropFraction the share of the unmarked periods' rows.
	NormalDropFraction        float64 `json:"normal_drop_fraction"`
	NormalPeriodsDropFraction float64 `json:"normal_periods_drop_fraction"`
	// DrivesRecommendation is true when the marked periods push the
	// recommendation above NormalLateness.
	DrivesRecommendation bool `json:"drives_recommendation"`
}

// cellKey is one (group, period start) cell; period is 0 without periods.
type cellKey struct {
	group  int
	period int64
}

// cells assigns rows to (group, period) cells, the unit the scan and the
// replay count in; groups are their sums.
type cells struct {
	period int64 // µs; 0: one cell per group
	max    int
	accs   []*groupAcc
	ids    map[cellKey]int
	last   cellKey
	lastID int
}

func newCells(period time.Duration, maxCells int) *cells {
	return &cells{period: period.Microseconds(), max: maxCells, ids: map[cellKey]int{}, lastID: -1}
}

// cell returns the cell of a row of group g with event time t.
func (c *cells) cell(g int, t int64) (int, error) {
	k := cellKey{group: g}
	if c.period > 0 {
		k.period = t - mod(t, c.period)
	}
	if c.lastID >= 0 && k == c.last {
		return c.lastID, nil
	}
	id, ok := c.ids[k]
	if !ok {
		if len(c.accs) >= c.max {
			return 0, fmt.Errorf("lateness: more than %d groups and periods (use --by day, a shorter range, or fewer groups)", c.max)
		}
		id = len(c.accs)
		c.ids[k] = id
		c.accs = append(c.accs, &groupAcc{group: g, period: k.period, ladder: newLadderCounts()})
	}
	c.last, c.lastID = k, id
	return id, nil
}

// markPeriods applies MarkRule to a group's periods.
func markPeriods(ps []Period) int {
	if len(ps) < markMinPeriods {
		return 0
	}
	marked := 0
	for _, m := range []struct {
		name string
		p99  func(*Period) float64
	}{
		{"disorder", func(p *Period) float64 { return p.Disorder.P99 }},
		{"arrival lag", func(p *Period) float64 { return p.ArrivalLag.P99 }},
	} {
		vals := make([]float64, len(ps))
		for i := range ps {
			vals[i] = m.p99(&ps[i])
		}
		med := median(vals)
		for i := range ps {
			v := vals[i]
			if v > markFactor*med && v-med >= float64(markMin)/1e6 {
				if ps[i].Why != "" {
					ps[i].Why += ", "
				}
				ps[i].Why += m.name
				ps[i].Marked = true
			}
		}
	}
	for i := range ps {
		if ps[i].Marked {
			marked++
		}
	}
	return marked
}

// median of vals (the lower middle of an even count: conservative, so a
// group half made of outages still compares with its normal half).
func median(vals []float64) float64 {
	s := slices.Clone(vals)
	slices.Sort(s)
	return s[(len(s)-1)/2]
}
