package lateness

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"tidemark"
)

// WriteJSON writes the report as one JSON document (the --format json
// output): durations in seconds as numbers.
func (r *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(r); err != nil {
		return fmt.Errorf("write lateness json: %w", err)
	}
	return nil
}

// WriteTable writes the report for people: one block per group.
func (r *Report) WriteTable(w io.Writer) error {
	ew := &errWriter{w: w}
	if len(r.Groups) == 0 {
		fmt.Fprintln(ew, "no raw events in the range")
		return ew.err
	}
	for i := range r.Groups {
		if i > 0 {
			fmt.Fprintln(ew)
		}
		writeGroup(ew, &r.Groups[i], r.badAfter, r.rowBytes)
	}
	return ew.err
}

func writeGroup(w io.Writer, g *Group, badAfter time.Duration, rowBytes int64) {
	fmt.Fprintf(w, "group %s: %s rows\n", g.Group, tidemark.FormatCount(g.Rows))
	if a := g.BadTimestamps.advice(badAfter); a != "" {
		fmt.Fprintln(w, a)
	}
	if g.Rows == 0 {
		return
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "\tmin\tp50\tp90\tp95\tp99\tp99.9\tmax\t")
	for _, m := range []struct {
		name string
		p    Percentiles
	}{{"arrival lag", g.ArrivalLag}, {"disorder", g.Disorder}} {
		fmt.Fprintf(tw, "%s\t", m.name)
		for _, v := range []float64{m.p.Min, m.p.P50, m.p.P90, m.p.P95, m.p.P99, m.p.P999, m.p.Max} {
			fmt.Fprintf(tw, "%s\t", FormatDuration(v))
		}
		fmt.Fprintln(tw)
	}
	tw.Flush()
	b := g.Buckets
	fmt.Fprintf(w, "late by (disorder): <1m %s   1m-10m %s   10m-1h %s   >=1h %s\n",
		share(b.Lt1m, g.Rows), share(b.M1m10m, g.Rows), share(b.M10m1h, g.Rows), share(b.Ge1h, g.Rows))
	if len(g.Periods) > 0 {
		writePeriods(w, g)
	}
	fmt.Fprintf(w, "recommended --lateness %s (disorder p99 rounded up): drops %s of rows with --late-rule window\n",
		FormatDuration(g.RecommendedLateness), percent(g.RecommendedDropFraction))
	if g.Outages == nil && g.RecommendedLateness >= 3600 {
		fmt.Fprintln(w, "  (an hours-long budget: --by hour or --by day tells whether outage periods drive it)")
	}
	if o := g.Outages; o != nil {
		switch {
		case o.DrivesRecommendation:
			fmt.Fprintf(w, "  driven by %d marked period(s): the other periods need --lateness %s (their disorder p99), which drops %s of their rows and %s of all rows\n",
				o.MarkedPeriods, FormatDuration(o.NormalLateness), percent(o.NormalPeriodsDropFraction), percent(o.NormalDropFraction))
		case o.MarkedPeriods > 0:
			fmt.Fprintf(w, "  not driven by the %d marked period(s): the other periods need %s as well\n", o.MarkedPeriods, FormatDuration(o.NormalLateness))
		default:
			fmt.Fprintln(w, "  no period is far from the usual: the recommendation covers normal periods")
		}
	}
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "what-if --lateness\tdropped, --late-rule event\tdropped, --late-rule window\tfinal after window end\topen windows per key\tstate\t")
	for _, wi := range g.WhatIf {
		mark := ""
		if g.isRecommended(wi) {
			mark = " (recommended)"
		}
		if o := g.Outages; o != nil && o.DrivesRecommendation && math.Abs(wi.Lateness-o.NormalLateness) < 1e-9 {
			mark += " (normal periods)"
		}
		fmt.Fprintf(tw, "%s%s\t%s\t%s\t~%s\t%d\t~%s rows, %s\t\n", FormatDuration(wi.Lateness), mark, share(wi.DroppedEvent, g.Rows), share(wi.DroppedWindow, g.Rows),
			FormatDuration(wi.FinalWait), wi.OpenWindowsPerKey, tidemark.FormatCount(wi.StateRows), bytesString(wi.StateBytes))
	}
	tw.Flush()
	fmt.Fprintf(w, "(state: open windows per key × %s keys per window, ~%d bytes each)\n", strconv.FormatFloat(g.KeysPerWindow, 'f', -1, 64), rowBytes)
}

// writePeriods writes one line per period, the marked ones flagged.
func writePeriods(w io.Writer, g *Group) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "period\trows\tlag p50\tlag p99\tdisorder p50\tdisorder p99\tdisorder max\tlate\t")
	for _, p := range g.Periods {
		mark := ""
		if p.Marked {
			mark = "  << far from the usual (" + p.Why + ")"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", p.Start, tidemark.FormatCount(p.Rows),
			FormatDuration(p.ArrivalLag.P50), FormatDuration(p.ArrivalLag.P99), FormatDuration(p.Disorder.P50),
			FormatDuration(p.Disorder.P99), FormatDuration(p.Disorder.Max), percent(p.LateShare), mark)
	}
	tw.Flush()
	if g.Outages != nil {
		fmt.Fprintf(w, "(late: share --lateness %s, the normal periods' budget, drops; %s)\n", FormatDuration(g.Outages.NormalLateness), g.Outages.Rule)
	}
}

// WriteCSV writes a header and one row per group: the what-if columns are
// the asked budgets' (dropped_event_rule_10s, ...) and the group's
// recommendation's.
//
// With periods (Config.Period) it writes one row per group and period
// instead (writePeriodsCSV); the JSON has both levels.
func (r *Report) WriteCSV(w io.Writer) error {
	cw := csv.NewWriter(w)
	if len(r.Groups) > 0 && r.Groups[0].Outages != nil {
		return writePeriodsCSV(cw, r)
	}
	head := []string{"group", "rows"}
	for _, m := range []string{"arrival_lag", "disorder"} {
		for _, p := range []string{"min", "p50", "p90", "p95", "p99", "p999", "max"} {
			head = append(head, m+"_"+p+"_s")
		}
	}
	head = append(head, "lt_1m", "1m_10m", "10m_1h", "ge_1h", "recommended_lateness_s", "recommended_drop_fraction")
	asked := r.asked
	for _, b := range asked {
		s := strings.ReplaceAll(FormatDuration(b), "µ", "u")
		head = append(head, "dropped_event_rule_"+s, "dropped_window_rule_"+s)
	}
	head = append(head, "dropped_event_rule_recommended", "dropped_window_rule_recommended")
	_ = cw.Write(head)
	for i := range r.Groups {
		g := &r.Groups[i]
		rec := []string{g.Group, strconv.FormatInt(g.Rows, 10)}
		for _, p := range []Percentiles{g.ArrivalLag, g.Disorder} {
			for _, v := range []float64{p.Min, p.P50, p.P90, p.P95, p.P99, p.P999, p.Max} {
				rec = append(rec, num(v))
			}
		}
		b := g.Buckets
		for _, n := range []int64{b.Lt1m, b.M1m10m, b.M10m1h, b.Ge1h} {
			rec = append(rec, strconv.FormatInt(n, 10))
		}
		rec = append(rec, num(g.RecommendedLateness), num(g.RecommendedDropFraction))
		for _, a := range asked {
			ev, win := "", ""
			for _, wi := range g.WhatIf {
				if wi.Lateness == a {
					ev, win = strconv.FormatInt(wi.DroppedEvent, 10), strconv.FormatInt(wi.DroppedWindow, 10)
				}
			}
			rec = append(rec, ev, win)
		}
		for _, wi := range g.WhatIf {
			if g.isRecommended(wi) {
				rec = append(rec, strconv.FormatInt(wi.DroppedEvent, 10), strconv.FormatInt(wi.DroppedWindow, 10))
			}
		}
		_ = cw.Write(rec)
	}
	cw.Flush()
	if err := cw.Error(); err != nil {
		return fmt.Errorf("write lateness csv: %w", err)
	}
	return nil
}

// writePeriodsCSV writes a header and one row per (group, period).
func writePeriodsCSV(cw *csv.Writer, r *Report) error {
	head := []string{"group", "period_start", "rows"}
	for _, m := range []string{"arrival_lag", "disorder"} {
		for _, p := range []string{"min", "p50", "p90", "p95", "p99", "p999", "max"} {
			head = append(head, m+"_"+p+"_s")
		}
	}
	head = append(head, "late_share", "marked", "why", "group_recommended_lateness_s", "group_normal_lateness_s")
	_ = cw.Write(head)
	for i := range r.Groups {
		g := &r.Groups[i]
		for _, p := range g.Periods {
			rec := []string{g.Group, p.Start, strconv.FormatInt(p.Rows, 10)}
			for _, pc := range []Percentiles{p.ArrivalLag, p.Disorder} {
				for _, v := range []float64{pc.Min, pc.P50, pc.P90, pc.P95, pc.P99, pc.P999, pc.Max} {
					rec = append(rec, num(v))
				}
			}
			rec = append(rec, num(p.LateShare), strconv.FormatBool(p.Marked), p.Why, num(g.RecommendedLateness), num(g.Outages.NormalLateness))
			_ = cw.Write(rec)
		}
	}
	cw.Flush()
	if err := cw.Error(); err != nil {
		return fmt.Errorf("write lateness csv: %w", err)
	}
	return nil
}

// bytesString renders a byte count in binary units: 512 B, 1.5 KiB, 3.2 MiB.
func bytesString(n int64) string {
	if n < 1024 {
		return strconv.FormatInt(n, 10) + " B"
	}
	v := float64(n)
	for _, u := range []string{"KiB", "MiB", "GiB", "TiB"} {
		v /= 1024
		if v < 1024 || u == "TiB" {
			return strconv.FormatFloat(v, 'f', 1, 64) + " " + u
		}
	}
	return ""
}

func num(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }

func share(n, of int64) string {
	if of == 0 {
		return tidemark.FormatCount(n)
	}
	return fmt.Sprintf("%s (%s)", tidemark.FormatCount(n), percent(float64(n)/float64(of)))
}

func percent(f float64) string {
	switch {
	case f == 0:
		return "0%"
	case f < 0.0001:
		return "<0.01%"
	}
	return strconv.FormatFloat(f*100, 'f', 2, 64) + "%"
}

// errWriter keeps the first write error, so formatting code stays linear.
type errWriter struct {
	w   io.Writer
	err error
}

func (e *errWriter) Write(p []byte) (int, error) {
	if e.err != nil {
		return 0, e.err
	}
	n, err := e.w.Write(p)
	e.err = err
	return n, err
}
