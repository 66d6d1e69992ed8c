package main

import (
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/urfave/cli/v2"

	"tidemark/batch"
	"tidemark/lake"
)

// recomputeCommand prints exact window aggregates computed from raw_events
// alone (the batch layer), without touching window_results: what reconcile
// would converge to, and the side of the DuckDB benchmark.
func recomputeCommand() *cli.Command {
	return &cli.Command{
		Name:  "recompute",
		Usage: "print exact window aggregates recomputed from raw_events (reads only; window_results is not changed)",
		Flags: append(lakeFlags(),
			&cli.StringFlag{Name: "from", Usage: "windows starting at or after this time (RFC 3339 or date; default: all)", EnvVars: env("from")},
			&cli.StringFlag{Name: "to", Usage: "windows starting before this time", EnvVars: env("to")},
			&cli.StringFlag{Name: "format", Value: "table", Usage: "table, csv, json, or count (just the number of windows and rows read)", EnvVars: env("format")},
		),
		Action: func(c *cli.Context) error {
			from, to, err := timeRange(c)
			if err != nil {
				return err
			}
			format := c.String("format")
			var f *renderer
			if format != "count" {
				if f, err = newRenderer(format); err != nil {
					return err
				}
			}
			lk, err := openLake(c, true)
			if err != nil {
				return err
			}
			if g := lk.Config().Gap(); g > 0 {
				// A session lake: its exact windows are its sessions.
				return printSessions(c, lk, g, f)
			}
			// Default to the windows that can hold the lake's events.
			if from, to, err = fillRange(c, lk, from, to, batch.WindowStarts, "nothing to recompute"); err != nil {
				return err
			}
			began := time.Now()
			rows, st, err := batch.Recompute(c.Context, lk, batch.Query{From: from, To: to})
			if err != nil {
				return err
			}
			if f == nil {
				printCount(c.App.Writer, len(rows), st, time.Since(began))
				return nil
			}
			return printExact(c, f, lk.Config(), rows)
		},
	}
}

// printExact prints exact windows or sessions with their --agg
// aggregates and late rows, the columns named as the lake names them
// (cfg.Column).
func printExact(c *cli.Context, f *renderer, cfg lake.Config, rows []batch.Row) error {
	keys := cfg.KeyNames()
	header := append([]string{cfg.Column("window_start"), cfg.Column("window_end")}, keys...)
	for _, n := range []string{"count", "sum", "min", "max"} {
		header = append(header, cfg.Column(n))
	}
	header = append(append(header, cfg.Aggs.Columns()...), cfg.Column("late_rows"))
	f.header(header)
	for _, r := range rows {
		cells := windowCells(lake.WindowRow{Result: r.Result}, cfg)[:2+len(keys)+4]
		cells = append(cells, aggCells(r.Aggs)...)
		f.row(append(cells, numCell(strconv.FormatInt(r.Late, 10))))
	}
	return f.flush(c.App.Writer)
}

// printCount is `recompute --format count`: how many windows, and what
// computing them read.
func printCount(w io.Writer, windows int, st batch.Stats, took time.Duration) {
	fmt.Fprintf(w, `{"windows":%d,"rows_read":%d,"files_read":%d,"seconds":%.3f,"rows_per_second":%.0f}`+"\n",
		windows, st.RowsRead, st.FilesRead, took.Seconds(), float64(st.RowsRead)/took.Seconds())
}
