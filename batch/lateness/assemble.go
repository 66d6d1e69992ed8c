package lateness

import (
	"math"
	"slices"
	"time"

	"tidemark"
)

// groupSum is one group's cells and their sum.
type groupSum struct {
	name   string
	acc    *groupAcc
	cells  []*groupAcc // sorted by period
	ids    []int       // the cells' indexes
	bad    BadTimestamps
	marked []bool // per cell, with periods
	why    []string
	normal int64 // the budget covering the unmarked periods, µs

	index         int     // the group's index in the grouper
	keysPerWindow float64 // mean distinct keys in a window
}

// rollUp sums the cells of each group, groups sorted by name. Groups with
// only bad timestamps are kept: the report names them.
func rollUp(names []string, accs []*groupAcc, bads []BadTimestamps) []*groupSum {
	gs := make([]*groupSum, len(names))
	for i, n := range names {
		gs[i] = &groupSum{name: n, index: i, acc: &groupAcc{group: i, ladder: newLadderCounts()}, bad: bads[i]}
	}
	for id, c := range accs {
		g := gs[c.group]
		g.acc.merge(c)
		g.cells = append(g.cells, c)
		g.ids = append(g.ids, id)
	}
	for _, g := range gs {
		g.acc.rec = g.acc.ladder.recommend(0.99, g.acc.dis.Count(), &g.acc.dis)
		g.bad.finish(g.acc.first, g.acc.dis.Count() > 0)
		order := make([]int, len(g.cells))
		for i := range order {
			order[i] = i
		}
		slices.SortFunc(order, func(a, b int) int { return cmpInt(g.cells[a].period, g.cells[b].period) })
		cells, ids := make([]*groupAcc, len(order)), make([]int, len(order))
		for i, o := range order {
			cells[i], ids[i] = g.cells[o], g.ids[o]
		}
		g.cells, g.ids = cells, ids
	}
	slices.SortFunc(gs, func(a, b *groupSum) int {
		switch {
		case a.name < b.name:
			return -1
		case a.name > b.name:
			return 1
		}
		return 0
	})
	return gs
}

// markPeriods applies MarkRule to the group's periods and finds the budget
// the unmarked ones need.
func (g *groupSum) markPeriods() {
	ps := make([]Period, len(g.cells))
	for i, c := range g.cells {
		ps[i] = Period{ArrivalLag: percentiles(&c.lag), Disorder: percentiles(&c.dis)}
	}
	markPeriods(ps)
	normal := newLadderCounts()
	var n int64
	var normalDis Sketch
	g.marked, g.why = make([]bool, len(ps)), make([]string, len(ps))
	for i, c := range g.cells {
		g.marked[i], g.why[i] = ps[i].Marked, ps[i].Why
		if ps[i].Marked {
			continue
		}
		for j, k := range c.ladder {
			normal[j] += k
		}
		n += c.dis.Count()
		normalDis.Merge(&c.dis)
	}
	g.normal = normal.recommend(0.99, n, &normalDis)
}

func cmpInt(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// assemble turns the sums and replay counts into the report.
func assemble(groups []*groupSum, cfg Config, spec tidemark.WindowSpec, budgets []int64, drops [][2][]int64) *Report {
	rep := &Report{Groups: []Group{}}
	for _, b := range cfg.Budgets {
		rep.asked = append(rep.asked, float64(b.Microseconds())/1e6)
	}
	rep.badAfter, rep.rowBytes = cfg.BadAfter, cfg.StateRowBytes
	// dropped sums a budget's drops (window rule unless event) over cells.
	dropped := func(bi, rule int, ids []int) int64 {
		var n int64
		for _, id := range ids {
			n += drops[bi][rule][id]
		}
		return n
	}
	budgetIndex := func(b int64) int {
		i, _ := slices.BinarySearch(budgets, b)
		return i
	}
	for _, gs := range groups {
		a := gs.acc
		g := Group{
			Group:         gs.name,
			Rows:          a.dis.Count(),
			ArrivalLag:    percentiles(&a.lag),
			Disorder:      percentiles(&a.dis),
			Buckets:       a.bucket,
			BadTimestamps: gs.bad,
			lag:           &a.lag,
			dis:           &a.dis,
		}
		g.BadTimestamps.After = cfg.BadAfter.Seconds()
		g.KeysPerWindow = math.Round(gs.keysPerWindow*100) / 100
		g.RecommendedLateness = float64(a.rec) / 1e6
		lagP50 := math.Max(g.ArrivalLag.P50, 0)
		for bi, b := range budgets {
			if b != a.rec && !slices.Contains(cfg.Budgets, time.Duration(b)*time.Microsecond) {
				continue
			}
			w := WhatIf{
				Lateness:      float64(b) / 1e6,
				DroppedEvent:  dropped(bi, ruleEvent, gs.ids),
				DroppedWindow: dropped(bi, ruleWindow, gs.ids),
			}
			w.FinalWait, w.OpenWindowsPerKey = cost(spec, b, lagP50)
			w.StateRows = int64(math.Ceil(float64(w.OpenWindowsPerKey) * gs.keysPerWindow))
			w.StateBytes = w.StateRows * cfg.StateRowBytes
			g.WhatIf = append(g.WhatIf, w)
			if b == a.rec && g.Rows > 0 {
				g.RecommendedDropFraction = float64(w.DroppedWindow) / float64(g.Rows)
			}
		}
		if cfg.Period > 0 {
			ni := budgetIndex(gs.normal)
			o := &Outages{Rule: MarkRule, NormalLateness: float64(gs.normal) / 1e6, DrivesRecommendation: gs.normal < a.rec}
			var normalIDs []int
			var normalRows int64
			for i, c := range gs.cells {
				p := Period{
					Start: fmtTime(c.period), Rows: c.dis.Count(),
					ArrivalLag: percentiles(&c.lag), Disorder: percentiles(&c.dis),
					Marked: gs.marked[i], Why: gs.why[i],
				}
				if p.Rows > 0 {
					p.LateShare = float64(drops[ni][ruleWindow][gs.ids[i]]) / float64(p.Rows)
				}
				if p.Marked {
					o.MarkedPeriods++
				} else {
					normalIDs = append(normalIDs, gs.ids[i])
					normalRows += p.Rows
				}
				g.Periods = append(g.Periods, p)
			}
			if g.Rows > 0 {
				o.NormalDropFraction = float64(dropped(ni, ruleWindow, gs.ids)) / float64(g.Rows)
			}
			if normalRows > 0 {
				o.NormalPeriodsDropFraction = float64(dropped(ni, ruleWindow, normalIDs)) / float64(normalRows)
			}
			g.Outages = o
		}
		rep.Groups = append(rep.Groups, g)
	}
	return rep
}

// cost is what a budget costs a stream with these windows: how long after
// its end a window waits before it is final (the budget in event time, plus
// the typical arrival lag of the events that move the watermark there), and
// how many windows per key are open at once (those whose end is above
// W = max event time − budget: (budget + size) / slide of them).
func cost(spec tidemark.WindowSpec, budget int64, lagP50 float64) (wait float64, open int64) {
	size, slide := spec.Size, spec.Normalized().Slide
	if size <= 0 {
		return float64(budget)/1e6 + lagP50, 0
	}
	return float64(budget)/1e6 + lagP50, (budget + size + slide - 1) / slide
}
