// Package lateness measures how late events reach the lake (SPEC §6) and
// recommends a lateness budget: per group, arrival lag (arrival_time −
// event_time) and disorder (disorder_us: how far behind the source's
// maximum event time a row arrived, what the watermark actually needs) as
// percentiles; the share of rows by how late they were (by disorder); a
// recommended --lateness, the disorder p99 rounded up to a readable
// duration; and a what-if table of the rows the stream would drop under
// several budgets, found by replaying the rows through the stream engine
// itself (through the Replayer interface, which cmd wires to stream.Engine;
// this package never imports the stream).
//
// Measures. Percentiles come from Sketch (relative error at most Alpha =
// 0.5%; min and max exact). The late-by buckets and the recommendation are
// by disorder, counted exactly: the recommendation is the exact
// nearest-rank p99 of disorder rounded up to the next of 0, 1s, 2s, 5s,
// 10s, 15s, 30s, 1m, 2m, 5m, 10m, 15m, 30m, 1h, 2h, 3h, 6h, 12h, 1d, ...
// Its drop fraction is what the replay drops with it under the default
// --late-rule window.
//
// Memory. One scan of raw_events feeds per-group sketches (a few thousand
// counters each) and an external sort of 44-byte rows into arrival order:
// at most Config.ChunkRows rows in memory, the rest in temporary files,
// merged with a 32 KiB buffer per file. The replay holds one micro-batch of
// records and one engine per (budget, rule), whose state is one slot per
// open window (the replay gives records no key). Groups are held in memory,
// at most Config.MaxGroups of them.
package lateness

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"slices"
	"time"

	"tidemark"
	"tidemark/lake"
)

// Group-by modes of Config.By besides a key field name.
const (
	ByNone   = "none"   // one group, named "all"
	BySource = "source" // one group per source
)

// Config selects the rows and the grouping. The zero value of every field
// means the documented default.
type Config struct {
	// From and To bound event time, [From, To); 0 means unbounded.
	From, To int64
	// By is "none" (or ""), "source", or one of the lake's key fields.
	By string
	// Replay makes one stream engine per (budget, late rule) for the
	// what-if; required.
	Replay NewReplayer
	// Budgets are the what-if lateness budgets besides each group's
	// recommendation; nil means 10s, 1m, 5m, 10m, 1h.
	Budgets []time.Duration
	// ChunkRows bounds the rows held in memory for the arrival-order sort
	// (more are spilled to TempDir); 0 means 1<<20 (48 MiB).
	ChunkRows int
	// MaxBatchRows splits a replayed micro-batch longer than this; 0 means
	// 1<<20.
	MaxBatchRows int
	// MaxGroups refuses a --by with more groups (each holds two sketches);
	// 0 means 10,000.
	MaxGroups int
	// TempDir holds the sort's spill files; "" means os.TempDir().
	TempDir string
}

func (c *Config) defaults() {
	if c.By == "" {
		c.By = ByNone
	}
	if c.Budgets == nil {
		for _, b := range defaultBudgets {
			c.Budgets = append(c.Budgets, time.Duration(b)*time.Microsecond)
		}
	}
	if c.ChunkRows <= 0 {
		c.ChunkRows = 1 << 20
	}
	if c.MaxBatchRows <= 0 {
		c.MaxBatchRows = 1 << 20
	}
	if c.MaxGroups <= 0 {
		c.MaxGroups = 10_000
	}
	if c.TempDir == "" {
		c.TempDir = os.TempDir()
	}
	if c.To == 0 {
		c.To = lake.AllTo
	}
	if c.From == 0 {
		c.From = lake.AllFrom
	}
}

// Report is the result of Run; its JSON form is the --format json output.
type Report struct {
	Groups []Group `json:"groups"`

	asked []float64 // the what-if budgets every group has, seconds
}

// Group is the measure of one group of rows. Durations are seconds.
type Group struct {
	Group      string      `json:"group"`
	Rows       int64       `json:"rows"`
	ArrivalLag Percentiles `json:"arrival_lag_s"`
	Disorder   Percentiles `json:"disorder_s"`
	Buckets    Buckets     `json:"buckets"`
	// RecommendedLateness is the exact disorder p99 rounded up to a
	// readable budget; RecommendedDropFraction the share of the group's
	// rows the stream drops with it under the default --late-rule window.
	RecommendedLateness     float64  `json:"recommended_lateness_s"`
	RecommendedDropFraction float64  `json:"recommended_drop_fraction"`
	WhatIf                  []WhatIf `json:"what_if"`

	lag, dis *Sketch // for the plot
}

// Percentiles of one measure, in seconds; within relative error Alpha of
// the exact nearest-rank value (min and max are exact).
type Percentiles struct {
	Min  float64 `json:"min"`
	P50  float64 `json:"p50"`
	P90  float64 `json:"p90"`
	P95  float64 `json:"p95"`
	P99  float64 `json:"p99"`
	P999 float64 `json:"p999"`
	Max  float64 `json:"max"`
}

// Buckets count rows by disorder (how far behind its source's max event
// time a row arrived; in-order rows have 0 and count under 1m). They sum
// to the group's rows.
type Buckets struct {
	Lt1m   int64 `json:"lt_1m"`
	M1m10m int64 `json:"1m_10m"`
	M10m1h int64 `json:"10m_1h"`
	Ge1h   int64 `json:"ge_1h"`
}

// WhatIf is the number of the group's rows the stream drops with one
// lateness budget, under each late rule.
type WhatIf struct {
	Lateness      float64 `json:"lateness_s"`
	DroppedEvent  int64   `json:"dropped_event_rule"`
	DroppedWindow int64   `json:"dropped_window_rule"`
}

// groupAcc accumulates one group during the scan.
type groupAcc struct {
	name   string
	lag    Sketch
	dis    Sketch
	bucket Buckets
	ladder ladderCounts
	rec    int64 // recommended lateness, µs
}

func (g *groupAcc) add(lag, disorder int64) {
	g.lag.Add(lag)
	g.dis.Add(disorder)
	g.ladder.add(disorder)
	switch {
	case disorder < usMinute:
		g.bucket.Lt1m++
	case disorder < 10*usMinute:
		g.bucket.M1m10m++
	case disorder < usHour:
		g.bucket.M10m1h++
	default:
		g.bucket.Ge1h++
	}
}

// Run reads raw_events (ok and late rows alike, so the measure is not
// biased by what the stream dropped) in one scan and replays the rows in
// arrival order through cfg.Replay. Groups come out sorted by name.
func Run(ctx context.Context, lk *lake.Lake, cfg Config) (*Report, error) {
	cfg.defaults()
	if cfg.Replay == nil {
		return nil, errors.New("lateness: Config.Replay is required")
	}
	if cfg.From >= cfg.To {
		return nil, fmt.Errorf("lateness: empty time range [%s, %s)", tidemark.FormatTime(cfg.From), tidemark.FormatTime(cfg.To))
	}
	grouper, err := newGrouper(lk.Config().Keys, cfg.By, cfg.MaxGroups)
	if err != nil {
		return nil, err
	}
	srt := newSorter(cfg.TempDir, cfg.ChunkRows)
	defer srt.close()
	cols := []string{lake.ColEventTime, lake.ColArrivalTime, lake.ColDisorder, lake.ColSource, lake.ColFile, lake.ColOffset, lake.ColBatchID}
	if grouper.keyPart >= 0 {
		cols = append(cols, lake.ColKey)
	}
	q := lake.RawQuery{From: cfg.From, To: cfg.To, Columns: cols}
	err = lk.ScanRaw(ctx, q, func(b lake.RawBatch) error {
		for i := range b.N {
			g, err := grouper.group(b, i)
			if err != nil {
				return err
			}
			grouper.accs[g].add(b.ArrivalTime[i]-b.EventTime[i], b.Disorder[i])
			err = srt.add(row{
				arrival: b.ArrivalTime[i], event: b.EventTime[i], offset: b.Offset[i], batch: b.BatchID[i],
				source: srt.id(0, b.Source[i]), file: srt.id(1, b.File[i]), group: uint32(g),
			})
			if err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("lateness: %w", err)
	}
	accs := grouper.accs
	budgets := make([]int64, 0, len(cfg.Budgets)+len(accs))
	for _, b := range cfg.Budgets {
		budgets = append(budgets, b.Microseconds())
	}
	for _, g := range accs {
		g.rec = g.ladder.recommend(0.99, g.dis.Count(), &g.dis)
		budgets = append(budgets, g.rec)
	}
	slices.Sort(budgets)
	budgets = slices.Compact(budgets)
	drops, err := replay(ctx, srt, cfg, budgets, len(accs))
	if err != nil {
		return nil, err
	}
	if err := srt.close(); err != nil {
		return nil, fmt.Errorf("lateness: %w", err)
	}
	return assemble(accs, cfg.Budgets, budgets, drops), nil
}

// assemble turns the accumulators and replay counts into the report.
func assemble(accs []*groupAcc, asked []time.Duration, budgets []int64, drops [][2][]int64) *Report {
	rep := &Report{Groups: []Group{}}
	for _, b := range asked {
		rep.asked = append(rep.asked, float64(b.Microseconds())/1e6)
	}
	for gi, a := range accs {
		g := Group{
			Group:      a.name,
			Rows:       a.dis.Count(),
			ArrivalLag: percentiles(&a.lag),
			Disorder:   percentiles(&a.dis),
			Buckets:    a.bucket,
			lag:        &a.lag,
			dis:        &a.dis,
		}
		g.RecommendedLateness = float64(a.rec) / 1e6
		for bi, b := range budgets {
			if b != a.rec && !slices.Contains(asked, time.Duration(b)*time.Microsecond) {
				continue
			}
			w := WhatIf{Lateness: float64(b) / 1e6, DroppedEvent: drops[bi][ruleEvent][gi], DroppedWindow: drops[bi][ruleWindow][gi]}
			g.WhatIf = append(g.WhatIf, w)
			if b == a.rec && g.Rows > 0 {
				g.RecommendedDropFraction = float64(w.DroppedWindow) / float64(g.Rows)
			}
		}
		rep.Groups = append(rep.Groups, g)
	}
	slices.SortFunc(rep.Groups, func(a, b Group) int {
		switch {
		case a.Group < b.Group:
			return -1
		case a.Group > b.Group:
			return 1
		}
		return 0
	})
	return rep
}

func percentiles(s *Sketch) Percentiles {
	sec := func(v float64) float64 { return math.Round(v) / 1e6 } // whole µs, as stored
	return Percentiles{
		Min:  sec(float64(s.Min())),
		P50:  sec(s.Quantile(0.5)),
		P90:  sec(s.Quantile(0.9)),
		P95:  sec(s.Quantile(0.95)),
		P99:  sec(s.Quantile(0.99)),
		P999: sec(s.Quantile(0.999)),
		Max:  sec(float64(s.Max())),
	}
}

// isRecommended reports whether a what-if row is the group's recommendation.
func (g *Group) isRecommended(w WhatIf) bool {
	return math.Abs(w.Lateness-g.RecommendedLateness) < 1e-9
}
