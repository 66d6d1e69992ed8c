package lateness

import (
	"fmt"
	"math"
	"strings"
	"time"
)

// plotPeriods draws a group's periods over time: p50 and p99 of disorder
// and of arrival lag per period on a log axis, marked periods shaded red,
// the recommendation and (when outages drive it) the normal periods'
// budget as horizontal lines.
func plotPeriods(b *strings.Builder, g *Group, top int) {
	ps := g.Periods
	x0, x1 := float64(marginLeft), float64(plotWidth-marginRight)
	y0, y1 := float64(top+marginTop), float64(top+panelHeight-marginBot)
	// x: period index (periods are contiguous where there is data; a gap
	// in the data is a gap in the labels, not in the axis)
	n := len(ps)
	slot := (x1 - x0) / float64(n)
	xc := func(i int) float64 { return x0 + (float64(i)+0.5)*slot }
	// y: log seconds from 1ms up to the largest value shown
	hi := math.Max(g.RecommendedLateness, 1)
	for _, p := range ps {
		hi = math.Max(hi, math.Max(p.Disorder.P99, p.ArrivalLag.P99))
	}
	lmin := math.Log10(plotMinUs / 1e6)
	lmax := math.Log10(hi) + 0.4
	yv := func(sec float64) float64 {
		l := math.Log10(math.Max(sec, plotMinUs/1e6))
		return y1 - (l-lmin)/(lmax-lmin)*(y1-y0)
	}
	fmt.Fprintf(b, `<text x="%g" y="%d" font-size="15" font-weight="bold">group %s over time — p50 and p99 per %s (event time, UTC)</text>`+"\n",
		x0, top+25, esc(g.Group), periodWord(ps))
	for i, p := range ps {
		if p.Marked {
			fmt.Fprintf(b, `<rect class="marked" x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="#c0392b" fill-opacity="0.12"/>`+"\n", x0+float64(i)*slot, y0, slot, y1-y0)
		}
	}
	for _, t := range timeTicks {
		sec := t.us / 1e6
		if math.Log10(sec) > lmax {
			break
		}
		y := yv(sec)
		fmt.Fprintf(b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#e3e3e3"/>`+"\n", x0, y, x1, y)
		fmt.Fprintf(b, `<text x="%.1f" y="%.1f" text-anchor="end" fill="#333">%s</text>`+"\n", x0-6, y+4, t.label)
	}
	every := max(1, n/12)
	for i, p := range ps {
		if i%every != 0 {
			continue
		}
		fmt.Fprintf(b, `<text x="%.1f" y="%.1f" text-anchor="middle" fill="#333">%s</text>`+"\n", xc(i), y1+18, periodLabel(p, ps))
	}
	fmt.Fprintf(b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="none" stroke="#888"/>`+"\n", x0, y0, x1-x0, y1-y0)
	fmt.Fprintf(b, `<text transform="translate(%.1f %.1f) rotate(-90)" text-anchor="middle" fill="#333">how late (log scale)</text>`+"\n", x0-58, (y0+y1)/2)
	series := []struct {
		name, color, dash string
		v                 func(Period) float64
	}{
		{"disorder p99", "#1f5fa8", "", func(p Period) float64 { return p.Disorder.P99 }},
		{"disorder p50", "#1f5fa8", "4 3", func(p Period) float64 { return p.Disorder.P50 }},
		{"arrival lag p99", "#e67e22", "", func(p Period) float64 { return p.ArrivalLag.P99 }},
		{"arrival lag p50", "#e67e22", "4 3", func(p Period) float64 { return p.ArrivalLag.P50 }},
	}
	for _, s := range series {
		var d strings.Builder
		for i, p := range ps {
			op := "L"
			if i == 0 {
				op = "M"
			}
			fmt.Fprintf(&d, "%s%.1f %.1f ", op, xc(i), yv(s.v(p)))
		}
		fmt.Fprintf(b, `<path class="period-series" d="%s" fill="none" stroke="%s" stroke-width="2" stroke-dasharray="%s"/>`+"\n", strings.TrimSpace(d.String()), s.color, s.dash)
		for i, p := range ps {
			fmt.Fprintf(b, `<circle cx="%.1f" cy="%.1f" r="2.5" fill="%s"/>`+"\n", xc(i), yv(s.v(p)), s.color)
		}
	}
	hline := func(sec float64, color, label string) {
		y := yv(sec)
		fmt.Fprintf(b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" stroke-width="1.5" stroke-dasharray="6 4"/>`+"\n", x0, y, x1, y, color)
		fmt.Fprintf(b, `<text x="%.1f" y="%.1f" text-anchor="end" fill="%s" font-weight="bold">%s</text>`+"\n", x1-6, y-5, color, esc(label))
	}
	hline(g.RecommendedLateness, "#c0392b", "recommended --lateness "+FormatDuration(g.RecommendedLateness))
	if o := g.Outages; o != nil && o.DrivesRecommendation {
		hline(o.NormalLateness, "#2e7d32", "normal periods need "+FormatDuration(o.NormalLateness))
	}
	// legend under the axis, so it never hides a line
	for i, s := range series {
		x := x0 + float64(i)*150
		y := y1 + 38
		fmt.Fprintf(b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" stroke-width="2.5" stroke-dasharray="%s"/>`+"\n", x, y-4, x+28, y-4, s.color, s.dash)
		fmt.Fprintf(b, `<text x="%.1f" y="%.1f">%s</text>`+"\n", x+34, y, s.name)
	}
	if o := g.Outages; o != nil && o.MarkedPeriods > 0 {
		fmt.Fprintf(b, `<text x="%.1f" y="%.1f" fill="#c0392b">shaded: %d period(s) far from the usual (p99 > %d× the median p99 and %s above it)</text>`+"\n",
			x0, y1+56, o.MarkedPeriods, markFactor, FormatDuration(float64(markMin)/1e6))
	}
}

// periodWord is "hour" or "day", from the spacing of the periods.
func periodWord(ps []Period) string {
	if len(ps) > 1 {
		a, _ := time.Parse(time.RFC3339, ps[0].Start)
		c, _ := time.Parse(time.RFC3339, ps[1].Start)
		if c.Sub(a)%(24*time.Hour) != 0 {
			return "hour"
		}
		return "day"
	}
	return "period"
}

// periodLabel renders a period's start briefly: the hour, with the date
// where it changes (and always for days).
func periodLabel(p Period, ps []Period) string {
	t, err := time.Parse(time.RFC3339, p.Start)
	if err != nil {
		return p.Start
	}
	if periodWord(ps) == "hour" {
		if t.Hour() == 0 || p.Start == ps[0].Start {
			return t.Format("01-02 15h")
		}
		return t.Format("15h")
	}
	return t.Format("2006-01-02")
}
