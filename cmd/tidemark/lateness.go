package main

import (
	"fmt"
	"os"
	"time"

	"github.com/urfave/cli/v2"

	"tidemark"
	"tidemark/batch/lateness"
	"tidemark/lake"
	"tidemark/stream/engine"
)

func latenessCommand() *cli.Command {
	return &cli.Command{
		Name:  "lateness",
		Usage: "measure how late events arrive and recommend a --lateness budget",
		Description: "Reads raw_events (ok and late rows) and prints, per group, arrival lag and disorder\n" +
			"percentiles, the share of rows by disorder, a recommended --lateness (disorder p99 rounded up)\n" +
			"and the rows the stream would drop under several budgets, replayed through the stream engine.",
		Flags: append(lakeFlags(),
			&cli.DurationFlag{Name: "since", Usage: "only events with event time in the last D, e.g. 24h (default: all)", EnvVars: env("since")},
			&cli.StringFlag{Name: "from", Usage: "only events at or after this event time (RFC 3339 or date)", EnvVars: env("from")},
			&cli.StringFlag{Name: "to", Usage: "only events before this event time", EnvVars: env("to")},
			&cli.StringSliceFlag{Name: "by", Usage: "group by none, source or a key field, and/or split by hour or day of event time (repeatable or comma-separated: --by source,hour); in a lake with a key named source, source is that key and _tm_source is tidemark's source; key:NAME always names a key field (for keys named none, hour or day)", EnvVars: env("by")},
			&cli.StringFlag{Name: "format", Value: "table", Usage: "table, json or csv", EnvVars: env("format")},
			&cli.StringFlag{Name: "plot", Usage: "also draw the distributions (and, with --by hour|day, p50/p99 over time) to this SVG file", EnvVars: env("plot")},
			&cli.DurationFlag{Name: "bad-after", Value: lateness.DefaultBadAfter, Usage: "rows with an arrival lag or disorder of at least this are bad timestamps, left out of the measures", EnvVars: env("bad-after")},
			&cli.StringFlag{Name: "watermark-policy", Value: "min", Usage: "the stream's --watermark-policy, for the what-if replay", EnvVars: env("watermark-policy")},
			&cli.DurationFlag{Name: "idle-timeout", Usage: "the stream's --idle-timeout, for the what-if replay (arrival time is the clock)", EnvVars: env("idle-timeout")},
		),
		Action: runLateness,
	}
}

// runLateness is the action of `tidemark lateness`.
func runLateness(c *cli.Context) error {
	var cfg lateness.Config
	var err error
	from, to, err := timeRange(c)
	if err != nil {
		return err
	}
	if c.IsSet("from") || c.IsSet("to") {
		cfg.Time = lake.Between(from, to)
	}
	format := c.String("format")
	if format != "table" && format != "json" && format != "csv" {
		return fmt.Errorf("--format %q: want table, json or csv", format)
	}
	policy, err := engine.ParsePolicy(c.String("watermark-policy"))
	if err != nil {
		return fmt.Errorf("--watermark-policy: %w", err)
	}
	lk, err := openLake(c, true)
	if err != nil {
		return err
	}
	if cfg.By, cfg.Period, err = parseBy(c.StringSlice("by")); err != nil {
		return err
	}
	cfg.Since = c.Duration("since")
	cfg.BadAfter = c.Duration("bad-after")
	cfg.Replay = engineReplayer(engine.Config{Window: lk.Config().Window, Policy: policy, IdleTimeout: c.Duration("idle-timeout")},
		lk.Config().Gap())
	rep, err := lateness.Run(c.Context, lk, cfg)
	if err != nil {
		return err
	}
	if p := c.String("plot"); p != "" {
		if err := writePlot(p, rep); err != nil {
			return err
		}
	}
	switch format {
	case "json":
		return rep.WriteJSON(c.App.Writer)
	case "csv":
		return rep.WriteCSV(c.App.Writer)
	}
	return rep.WriteTable(c.App.Writer)
}

// parseBy splits the --by values into a grouping and a period.
func parseBy(vals []string) (by string, period time.Duration, err error) {
	by = lateness.ByNone
	for _, v := range vals {
		switch v {
		case "hour", "day":
			if period != 0 {
				return "", 0, fmt.Errorf("--by %s: one of hour and day", v)
			}
			period = lateness.PeriodHour
			if v == "day" {
				period = lateness.PeriodDay
			}
		case "", lateness.ByNone:
		case lateness.ByKeyPrefix:
			return "", 0, fmt.Errorf("--by %s: name the key field after it, e.g. --by key:hour", v)
		default:
			if by != lateness.ByNone {
				return "", 0, fmt.Errorf("--by %s: one grouping (source or a key field) besides hour or day, got %s too", v, by)
			}
			by = v
		}
	}
	return by, period, nil
}

func writePlot(path string, rep *lateness.Report) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("--plot: %w", err)
	}
	if err := rep.WritePlot(f); err != nil {
		f.Close()
		return fmt.Errorf("--plot %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("--plot %s: %w", path, err)
	}
	return nil
}

// engineReplayer makes the what-if's replayers: the stream engine itself,
// with base's window, policy and idle timeout and the asked budget and rule.
func engineReplayer(base engine.Config, sessionGap time.Duration) lateness.NewReplayer {
	return func(budget int64, rule string) (lateness.Replayer, error) {
		cfg := base
		cfg.Lateness = time.Duration(budget) * time.Microsecond
		var err error
		if cfg.LateRule, err = engine.ParseLateRule(rule); err != nil {
			return nil, err
		}
		if sessionGap > 0 { // a session lake: replay its sessions
			e, err := engine.NewSessionEngine(sessionGap, cfg, nil)
			if err != nil {
				return nil, err
			}
			return engineAdapter{e}, nil
		}
		e, err := engine.New(cfg, nil)
		if err != nil {
			return nil, err
		}
		return &windowAdapter{engineAdapter: engineAdapter{e}}, nil
	}
}

// engineAdapter is a engine.Engine or engine.SessionEngine as a
// lateness.Replayer.
type engineAdapter struct {
	e interface {
		Process(recs []tidemark.Record, now time.Time) engine.BatchResult
	}
}

func (a engineAdapter) Process(recs []tidemark.Record, now time.Time) { a.e.Process(recs, now) }

// windowAdapter is a window engine's replayer: it also reports the
// watermark (lateness.Watermarker), so the what-if replays once for every
// budget. A session engine's late rule is not a shift of one watermark;
// its what-if runs one engine per budget.
type windowAdapter struct {
	engineAdapter
	w    int64
	hasW bool
}

func (a *windowAdapter) Process(recs []tidemark.Record, now time.Time) {
	res := a.e.Process(recs, now)
	a.w, a.hasW = res.Watermark, res.HasWatermark
}

// Watermark is W after the last Process.
func (a *windowAdapter) Watermark() (int64, bool) { return a.w, a.hasW }

// SetFrontier caps a source's watermark as the stream's aligned reading
// did (lateness.Frontier).
func (a engineAdapter) SetFrontier(source string, frontier int64, held bool) {
	if f, ok := a.e.(lateness.Frontier); ok {
		f.SetFrontier(source, frontier, held)
	}
}
