package lateness

import (
	"fmt"
	"html"
	"io"
	"math"
	"strconv"
	"strings"

	"tidemark"
)

// Plot geometry, in SVG user units.
const (
	plotWidth   = 900
	panelHeight = 400
	titleHeight = 50
	marginLeft  = 80
	marginRight = 30
	marginTop   = 40 // panel title above the axes
	marginBot   = 70
	plotMinUs   = 1000.0 // the axis starts at 1ms
)

// tick is a labelled position of the time axis, µs.
type tick struct {
	us    float64
	label string
}

var timeTicks = []tick{
	{1e3, "1ms"}, {1e4, "10ms"}, {1e5, "100ms"}, {1e6, "1s"}, {1e7, "10s"}, {6e7, "1m"},
	{6e8, "10m"}, {3.6e9, "1h"}, {2.16e10, "6h"}, {8.64e10, "1d"}, {6.048e11, "7d"},
	{2.592e12, "30d"}, {3.1536e13, "365d"},
}

// WritePlot draws the report as an SVG: one panel per group, each with
// the share of rows later than x (1 − CDF) for disorder and arrival lag on
// a log time axis and a log share axis (so the tail the budget is about is
// visible), the recommended budget as a vertical line and a 1% guide.
//
// With periods (Config.Period) each group gets a second panel: p50 and p99
// of both measures per period over time, the marked periods shaded, the
// recommendation and the normal periods' budget as horizontal lines.
func (r *Report) WritePlot(w io.Writer) error {
	height := titleHeight + panelHeight
	if len(r.Groups) > 0 {
		height = titleHeight
	}
	for i := range r.Groups {
		height += panelHeight
		if len(r.Groups[i].Periods) > 0 {
			height += panelHeight
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="Helvetica, Arial, sans-serif" font-size="13">`+"\n", plotWidth, height, plotWidth, height)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	fmt.Fprintf(&b, `<text x="%d" y="30" text-anchor="middle" font-size="18" font-weight="bold">How late events arrive: share of rows later than x</text>`+"\n", plotWidth/2)
	if len(r.Groups) == 0 {
		fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="middle">no raw events in the range</text>`+"\n", plotWidth/2, titleHeight+panelHeight/2)
	}
	top := titleHeight
	for i := range r.Groups {
		plotGroup(&b, &r.Groups[i], top)
		top += panelHeight
		if len(r.Groups[i].Periods) > 0 {
			plotPeriods(&b, &r.Groups[i], top)
			top += panelHeight
		}
	}
	b.WriteString("</svg>\n")
	if _, err := io.WriteString(w, b.String()); err != nil {
		return fmt.Errorf("write lateness plot: %w", err)
	}
	return nil
}

// axes maps values to panel coordinates.
type axes struct {
	x0, x1, y0, y1 float64 // plot area: x0 left, x1 right, y0 top, y1 bottom
	lxmin, lxmax   float64 // log10 µs range
	lymin          float64 // log10 of the smallest share shown (top is 0 = 100%)
}

func (a axes) x(us float64) float64 {
	l := math.Log10(math.Max(us, plotMinUs))
	return a.x0 + (l-a.lxmin)/(a.lxmax-a.lxmin)*(a.x1-a.x0)
}

func (a axes) y(share float64) float64 {
	l := math.Log10(math.Max(share, math.Pow(10, a.lymin)))
	return a.y0 + (0-l)/(0-a.lymin)*(a.y1-a.y0)
}

func plotGroup(b *strings.Builder, g *Group, top int) {
	rec := g.RecommendedLateness * 1e6
	hi := math.Max(math.Max(float64(g.lag.Max()), float64(g.dis.Max())), rec)
	xmax := 6e7 // at least 1m
	for _, t := range timeTicks {
		if t.us >= hi*1.05 || t == timeTicks[len(timeTicks)-1] {
			xmax = math.Max(xmax, t.us)
			break
		}
	}
	// the share axis goes down to one row in the group, at most 1e-6
	lymin := -math.Min(math.Max(math.Ceil(math.Log10(float64(max(g.Rows, 10)))), 2), 6)
	a := axes{
		x0: marginLeft, x1: plotWidth - marginRight,
		y0: float64(top + marginTop), y1: float64(top + panelHeight - marginBot),
		lxmin: math.Log10(plotMinUs), lxmax: math.Log10(xmax), lymin: lymin,
	}
	fmt.Fprintf(b, `<text x="%g" y="%d" font-size="15" font-weight="bold">group %s — %s rows</text>`+"\n", a.x0, top+25, esc(g.Group), tidemark.FormatCount(g.Rows))
	// grid and ticks
	for _, t := range timeTicks {
		if t.us > xmax*1.0001 {
			break
		}
		x := a.x(t.us)
		fmt.Fprintf(b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#e3e3e3"/>`+"\n", x, a.y0, x, a.y1)
		fmt.Fprintf(b, `<text x="%.1f" y="%.1f" text-anchor="middle" fill="#333">%s</text>`+"\n", x, a.y1+18, t.label)
	}
	for e := 0.0; e >= lymin; e-- {
		y := a.y(math.Pow(10, e))
		fmt.Fprintf(b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#e3e3e3"/>`+"\n", a.x0, y, a.x1, y)
		fmt.Fprintf(b, `<text x="%.1f" y="%.1f" text-anchor="end" fill="#333">%s</text>`+"\n", a.x0-6, y+4, shareLabel(e))
	}
	fmt.Fprintf(b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="none" stroke="#888"/>`+"\n", a.x0, a.y0, a.x1-a.x0, a.y1-a.y0)
	fmt.Fprintf(b, `<text x="%.1f" y="%.1f" text-anchor="middle" fill="#333">how late (log scale; values under 1ms, zero and negative count at the left edge)</text>`+"\n", (a.x0+a.x1)/2, a.y1+42)
	fmt.Fprintf(b, `<text transform="translate(%.1f %.1f) rotate(-90)" text-anchor="middle" fill="#333">share of rows later than x</text>`+"\n", a.x0-58, (a.y0+a.y1)/2)
	// 1% guide: the recommendation is the disorder p99
	y1pc := a.y(0.01)
	fmt.Fprintf(b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#999" stroke-dasharray="2 3"/>`+"\n", a.x0, y1pc, a.x1, y1pc)
	// curves
	curve(b, a, g.lag, "#e67e22")
	curve(b, a, g.dis, "#1f5fa8")
	// recommendation
	xr := a.x(math.Max(rec, plotMinUs))
	fmt.Fprintf(b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#c0392b" stroke-width="2" stroke-dasharray="6 4"/>`+"\n", xr, a.y0, xr, a.y1)
	label := fmt.Sprintf("recommended --lateness %s (drops %s)", FormatDuration(g.RecommendedLateness), percent(g.RecommendedDropFraction))
	anchor, lx := "start", xr+6
	if xr > (a.x0+a.x1)/2 {
		anchor, lx = "end", xr-6
	}
	fmt.Fprintf(b, `<text x="%.1f" y="%.1f" text-anchor="%s" fill="#c0392b" font-weight="bold">%s</text>`+"\n", lx, a.y1-10, anchor, esc(label))
	// legend, top right
	lx0, ly0 := a.x1-190, a.y0+10
	fmt.Fprintf(b, `<rect x="%.1f" y="%.1f" width="180" height="50" fill="white" fill-opacity="0.9" stroke="#bbb"/>`+"\n", lx0, ly0)
	for i, it := range []struct{ name, color string }{{"disorder", "#1f5fa8"}, {"arrival lag", "#e67e22"}} {
		y := ly0 + 18 + float64(i)*20
		fmt.Fprintf(b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" stroke-width="2.5"/>`+"\n", lx0+10, y-4, lx0+40, y-4, it.color)
		fmt.Fprintf(b, `<text x="%.1f" y="%.1f">%s</text>`+"\n", lx0+48, y, it.name)
	}
}

// curve draws 1 − CDF of s as a step line.
func curve(b *strings.Builder, a axes, s *Sketch, color string) {
	n := float64(s.Count())
	if n == 0 {
		return
	}
	pts := s.CDF()
	share := 1.0
	i := 0
	for ; i < len(pts) && pts[i].Value <= plotMinUs; i++ {
		share = 1 - float64(pts[i].Count)/n
	}
	var p strings.Builder
	fmt.Fprintf(&p, "M%.1f %.1f", a.x0, a.y(share))
	for ; i < len(pts) && share > 0; i++ {
		x := a.x(pts[i].Value)
		fmt.Fprintf(&p, " H%.1f", x)
		share = 1 - float64(pts[i].Count)/n
		fmt.Fprintf(&p, " V%.1f", a.y(share))
	}
	fmt.Fprintf(b, `<path d="%s" fill="none" stroke="%s" stroke-width="2.5" stroke-linejoin="round"/>`+"\n", p.String(), color)
}

// shareLabel renders 10^e as a percentage: 100%, 10%, 1%, 0.1%, ...
func shareLabel(e float64) string {
	return strconv.FormatFloat(math.Pow(10, e)*100, 'f', int(math.Max(0, -e-2)), 64) + "%"
}

func esc(s string) string { return html.EscapeString(s) }
