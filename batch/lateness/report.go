// Package lateness measures how late events reach the lake (SPEC §6) and
// recommends a lateness budget: per group, arrival lag (arrival_time −
// event_time) and disorder (disorder_us: how far behind the source's
// maximum event time a row arrived, what the watermark actually needs) as
// percentiles; the share of rows by how late they were (by disorder); a
// recommended --lateness, the disorder p99 rounded up to a readable
// duration; and a what-if table of the rows the stream would drop under
// several budgets, found by replaying the rows through the stream engine
// itself (through the Replayer interface, which cmd wires to engine.Engine;
// this package never imports the stream): once, through one engine, for
// every budget and rule when the Replayer reports its watermark
// (Watermarker, see replayOnce), else one engine per budget and rule.
//
// Measures. Percentiles come from Sketch (relative error at most Alpha =
// 0.5%; min and max exact). The late-by buckets and the recommendation are
// by disorder, counted exactly: the recommendation is the exact
// nearest-rank p99 of disorder rounded up to the next of 0, 1s, 2s, 5s,
// 10s, 15s, 30s, 1m, 2m, 5m, 10m, 15m, 30m, 1h, 2h, 3h, 6h, 12h, 1d, ...
// Its drop fraction is what the replay drops with it under the default
// --late-rule window.
//
// Bad timestamps. Rows whose arrival lag or disorder is at least
// Config.BadAfter (30 days) are not late, they are wrong (epoch zero, a
// mistyped year): they are counted per group and kept out of every measure,
// the recommendation and the replay, so no such row can move the budget;
// the report points to the stream's time floor and --max-future.
//
// Periods. With Config.Period (hour or day) rows are counted per (group,
// period of event time) cell, and groups are the cells' sums. Periods far
// from the usual are marked by MarkRule; the budget the unmarked periods
// need is reported beside the recommendation, with what it drops.
//
// Costs. Each what-if budget also says how long windows wait before they
// are final and the open-window state it implies (open windows per key
// times the keys per window, counted in the scan).
//
// Memory. One scan of raw_events feeds per-group sketches (a few thousand
// counters each) and an external sort of rows into arrival order: at most
// Config.ChunkRows rows in memory, packed (about 10 bytes a row when the
// lake's files are in arrival order, as the stream writes them; at most
// 56), the rest in temporary files of 44-byte rows, merged with a
// 32 KiB buffer per file. The replay
// holds one micro-batch of records and one engine (or one per budget and
// rule), whose state is one slot per open window (the replay gives records
// no key). Nothing is sampled: every row is replayed. Groups and periods are held
// in memory, at most Config.MaxGroups cells of them; the keys-per-window
// count holds at most Config.MaxKeyWindows hashes.
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
	ByNone = "none" // one group, named "all"
	// BySource is one group per source: tidemark's own source column,
	// named so in a lake unless a key takes the name; there the key is
	// "source" and this column lake.Config.Column(lake.ColSource)
	// ("_tm_source"), and By must name it so.
	BySource = "source"
	// ByKeyPrefix before a key field's name names that key whatever it is
	// called: "key:none", "key:hour" and "key:day" group by keys with those
	// names, which the bare words mean something else for.
	ByKeyPrefix = "key:"
)

// Config selects the rows and the grouping. The zero value of every field
// means the documented default.
type Config struct {
	// Time bounds event time; the zero TimeRange is every time (no time
	// value stands for "no bound", so events at and before the epoch are
	// ordinary).
	Time lake.TimeRange
	// Since, when positive, sets From to Clock() − Since (the last Since
	// up to now); 0 means unset, as for reconcile. It excludes From and To.
	Since time.Duration
	// Clock is the wall clock Since counts back from; nil means time.Now.
	Clock func() time.Time
	// By is "none" (or ""), BySource, or one of the lake's key fields, by
	// the column names of the lake's raw_events (see BySource).
	By string
	// Replay makes one stream engine per (budget, late rule) for the
	// what-if; required.
	Replay NewReplayer
	// Budgets are the what-if lateness budgets besides each group's
	// recommendation; nil means 10s, 1m, 5m, 10m, 1h.
	Budgets []time.Duration
	// ChunkRows bounds the rows held in memory for the arrival-order sort
	// (more are spilled to TempDir); 0 means 1<<20 (10-56 MiB).
	ChunkRows int
	// MaxBatchRows splits a replayed micro-batch longer than this; 0 means
	// 1<<20.
	MaxBatchRows int
	// MaxGroups refuses a --by with more groups (each holds two sketches);
	// 0 means 10,000.
	MaxGroups int
	// TempDir holds the sort's spill files; "" means os.TempDir().
	TempDir string
	// Period splits each group by hour or day of event time (UTC):
	// PeriodHour, PeriodDay, or 0 for none.
	Period time.Duration
	// StateRowBytes is what one open (window, key) aggregate costs the
	// stream, for the what-if's state bytes; 0 means DefaultStateRowBytes.
	StateRowBytes int64
	// MaxKeyWindows bounds the distinct (window, key) pairs counted for the
	// keys per window; 0 means 1<<20.
	MaxKeyWindows int
	// BadAfter is where lateness stops being plausible: rows whose arrival
	// lag or disorder is at least this are bad timestamps, left out of
	// the measures; 0 means DefaultBadAfter.
	BadAfter time.Duration
}

// since turns Since into From, by Clock; it runs after defaults.
func (c *Config) since() error {
	switch {
	case c.Since == 0:
		return nil
	case c.Since < 0:
		return fmt.Errorf("lateness: --since must not be negative, got %s", c.Since)
	case c.Time.Bounded:
		return errors.New("lateness: give --since or --from/--to, not both")
	}
	clock := c.Clock
	if clock == nil {
		clock = time.Now
	}
	c.Time = lake.Between(clock().Add(-c.Since).UnixMicro(), lake.AllTo)
	return nil
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
	if c.StateRowBytes <= 0 {
		c.StateRowBytes = DefaultStateRowBytes
	}
	if c.MaxKeyWindows <= 0 {
		c.MaxKeyWindows = 1 << 20
	}
	if c.BadAfter <= 0 {
		c.BadAfter = DefaultBadAfter
	}
	if c.TempDir == "" {
		c.TempDir = os.TempDir()
	}
}

// Report is the result of Run; its JSON form is the --format json output.
type Report struct {
	Groups []Group `json:"groups"`

	asked    []float64 // the what-if budgets every group has, seconds
	badAfter time.Duration
	rowBytes int64 // Config.StateRowBytes
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
	// KeysPerWindow is the mean number of distinct keys in a window (of the
	// lake's window length) holding rows of the group: what turns open
	// windows into state rows.
	KeysPerWindow float64 `json:"keys_per_window"`
	// BadTimestamps are the group's rows left out of all of the above.
	BadTimestamps BadTimestamps `json:"bad_timestamps"`
	// Periods (with Config.Period) are the group's hours or days, sorted;
	// Outages sums up the marked ones.
	Periods []Period `json:"periods,omitempty"`
	Outages *Outages `json:"outages,omitempty"`

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
	// What the budget costs. FinalWait: about how long after its end a
	// window waits before it is final, seconds (the budget, plus the
	// arrival lag p50 of the events that move the watermark past it).
	// OpenWindowsPerKey: windows of one key open at once, (budget + window)
	// / slide rounded up; the stream's state rows are this times the keys
	// active in that span (about 100 bytes each, see state_bytes in the
	// progress lines).
	FinalWait         float64 `json:"final_wait_s"`
	OpenWindowsPerKey int64   `json:"open_windows_per_key"`
	// StateRows is OpenWindowsPerKey times the group's KeysPerWindow: the
	// open (window, key) aggregates the stream holds; StateBytes that times
	// Config.StateRowBytes. Estimates, from the rows' keys.
	StateRows  int64 `json:"state_rows"`
	StateBytes int64 `json:"state_bytes"`
}

// groupAcc accumulates one cell (a group, or a group's period) during the
// scan, and then the group's sum.
type groupAcc struct {
	group  int   // index into the grouper's names
	period int64 // period start, µs; 0 without periods
	lag    Sketch
	dis    Sketch
	bucket Buckets
	ladder ladderCounts
	first  int64 // earliest event time
	rec    int64 // recommended lateness, µs
}

func (g *groupAcc) add(lag, disorder, event int64) {
	if g.dis.Count() == 0 || event < g.first {
		g.first = event
	}
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

// merge adds cell o to g.
func (g *groupAcc) merge(o *groupAcc) {
	if o.dis.Count() == 0 {
		return
	}
	if g.dis.Count() == 0 || o.first < g.first {
		g.first = o.first
	}
	g.lag.Merge(&o.lag)
	g.dis.Merge(&o.dis)
	for i, c := range o.ladder {
		g.ladder[i] += c
	}
	g.bucket.Lt1m += o.bucket.Lt1m
	g.bucket.M1m10m += o.bucket.M1m10m
	g.bucket.M10m1h += o.bucket.M10m1h
	g.bucket.Ge1h += o.bucket.Ge1h
}

// Run reads raw_events (ok and late rows alike, so the measure is not
// biased by what the stream dropped) in one scan and replays the rows in
// arrival order through cfg.Replay. Groups come out sorted by name.
//
// Rows with a bad timestamp (arrival lag or disorder of at least
// cfg.BadAfter) are counted per group and left out of everything else,
// the replay included: the what-if answers for a stream whose time floor
// and --max-future keep them out.
func Run(ctx context.Context, lk *lake.Lake, cfg Config) (*Report, error) {
	cfg.defaults()
	if cfg.Replay == nil {
		return nil, errors.New("lateness: Config.Replay is required")
	}
	if err := cfg.since(); err != nil {
		return nil, err
	}
	if cfg.Time.Bounded && cfg.Time.From >= cfg.Time.To {
		return nil, fmt.Errorf("lateness: empty time range [%s, %s)", tidemark.FormatTime(cfg.Time.From), tidemark.FormatTime(cfg.Time.To))
	}
	if cfg.Period != 0 && cfg.Period != PeriodHour && cfg.Period != PeriodDay {
		return nil, fmt.Errorf("lateness: period %s: want an hour or a day", cfg.Period)
	}
	grouper, err := newGrouper(lk.Config(), cfg.By, cfg.MaxGroups)
	if err != nil {
		return nil, err
	}
	cells := newCells(cfg.Period, cfg.MaxGroups)
	bad := badAcc{after: cfg.BadAfter.Microseconds()}
	var bads []BadTimestamps // per group
	srt := newSorter(cfg.TempDir, cfg.ChunkRows)
	defer srt.close()
	cols := []string{lake.ColEventTime, lake.ColArrivalTime, lake.ColDisorder, lake.ColSource, lake.ColFile, lake.ColOffset, lake.ColBatchID}
	withKeys := len(lk.Config().Keys) > 0
	if withKeys {
		cols = append(cols, lake.ColKey)
	}
	kw := newKeyWindows(lk.Config().Window.Size, cfg.MaxKeyWindows)
	q := lake.RawQuery{Time: cfg.Time, Columns: cols}
	err = lk.ScanRaw(ctx, q, func(b lake.RawBatch) error {
		for i := range b.N {
			g, err := grouper.group(b, i)
			if err != nil {
				return err
			}
			ev, lag, dis := b.EventTime[i], b.ArrivalTime[i]-b.EventTime[i], b.Disorder[i]
			if k := bad.kind(lag, dis); k != 0 {
				for len(bads) <= g {
					bads = append(bads, BadTimestamps{})
				}
				bads[g].add(k, ev)
				continue
			}
			c, err := cells.cell(g, ev)
			if err != nil {
				return err
			}
			cells.accs[c].add(lag, dis, ev)
			if withKeys {
				kw.add(g, ev, b.Key[i])
			}
			err = srt.add(row{
				arrival: b.ArrivalTime[i], event: ev, offset: b.Offset[i], batch: b.BatchID[i],
				source: srt.id(0, b.Source[i]), file: srt.id(1, b.File[i]), group: uint32(c),
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
	for len(bads) < len(grouper.names) {
		bads = append(bads, BadTimestamps{})
	}
	groups := rollUp(grouper.names, cells.accs, bads)
	for _, g := range groups {
		g.keysPerWindow = kw.perWindow(g.index)
	}
	budgets := make([]int64, 0, len(cfg.Budgets)+2*len(groups))
	for _, b := range cfg.Budgets {
		budgets = append(budgets, b.Microseconds())
	}
	for _, g := range groups {
		budgets = append(budgets, g.acc.rec)
		if cfg.Period > 0 {
			g.markPeriods()
			budgets = append(budgets, g.normal)
		}
	}
	slices.Sort(budgets)
	budgets = slices.Compact(budgets)
	drops, err := replay(ctx, srt, cfg, lk.Config().Window, budgets, len(cells.accs))
	if err != nil {
		return nil, err
	}
	if err := srt.close(); err != nil {
		return nil, fmt.Errorf("lateness: %w", err)
	}
	return assemble(groups, cfg, lk.Config().Window, budgets, drops), nil
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
