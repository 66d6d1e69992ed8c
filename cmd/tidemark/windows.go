package main

import (
	"strconv"

	"github.com/urfave/cli/v2"

	"tidemark"
	"tidemark/lake"
)

func windowsCommand() *cli.Command {
	return &cli.Command{
		Name:  "windows",
		Usage: "print the current window results of a lake",
		Flags: append(lakeFlags(),
			&cli.StringFlag{Name: "from", Usage: "only windows starting at or after this time (RFC 3339 or date)", EnvVars: env("from")},
			&cli.StringFlag{Name: "to", Usage: "only windows starting before this time", EnvVars: env("to")},
			&cli.Int64Flag{Name: "version", Value: -1, Usage: "read window_results as of this Delta version (time travel); -1 = latest", EnvVars: env("version")},
			&cli.StringFlag{Name: "format", Value: "table", Usage: "table, csv or json (one object per line)", EnvVars: env("format")},
		),
		Action: func(c *cli.Context) error {
			from, to, err := timeRange(c)
			if err != nil {
				return err
			}
			f, err := newRenderer(c.String("format"))
			if err != nil {
				return err
			}
			lk, err := openLake(c, true)
			if err != nil {
				return err
			}
			rows, err := lk.Windows(c.Context, from, to, c.Int64("version"))
			if err != nil {
				return err
			}
			cfg := lk.Config()
			header := append([]string{cfg.Column("window_start"), cfg.Column("window_end")}, cfg.KeyNames()...)
			for _, n := range []string{"count", "sum", "min", "max", "final", "origin", "revision", "computed_at", "watermark"} {
				header = append(header, cfg.Column(n))
			}
			if !cfg.Aggs.Empty() {
				header = append(append(header, cfg.Aggs.Columns()...), cfg.Column(lake.ColExact))
			}
			f.header(header)
			for _, r := range rows {
				f.row(windowCells(r, cfg))
			}
			return f.flush(c.App.Writer)
		},
	}
}

// windowCells renders one window_results row; nil cells are nulls. Keys
// of a number or boolean column (cfg.KeyType) are numbers, unquoted.
func windowCells(r lake.WindowRow, cfg lake.Config) []cell {
	cells := []cell{timeCell(r.Window.Start), timeCell(r.Window.End)}
	parts := r.Key.Parts()
	for i := range len(cfg.Keys) {
		if i < len(parts) && !parts[i].Null {
			if cfg.KeyType(i) != lake.KeyString {
				cells = append(cells, numCell(parts[i].Value))
			} else {
				cells = append(cells, strCell(parts[i].Value))
			}
		} else {
			cells = append(cells, nullCell())
		}
	}
	cells = append(cells, numCell(strconv.FormatInt(r.Agg.Count, 10)))
	for _, v := range []float64{r.Agg.Total(), r.Agg.Min, r.Agg.Max} {
		if r.Agg.Values == 0 {
			cells = append(cells, nullCell())
		} else {
			cells = append(cells, numCell(strconv.FormatFloat(v, 'g', -1, 64)))
		}
	}
	cells = append(cells, numCell(strconv.FormatBool(r.Final)), strCell(r.Origin),
		numCell(strconv.FormatInt(r.Revision, 10)), timeCell(r.ComputedAt))
	if r.Watermark != nil {
		cells = append(cells, timeCell(*r.Watermark))
	} else {
		cells = append(cells, nullCell())
	}
	if !cfg.Aggs.Empty() {
		vals := r.Aggs
		if vals == nil {
			vals = cfg.Aggs.Values(r.State)
		}
		cells = append(append(cells, aggCells(vals)...), numCell(strconv.FormatBool(r.Exact)))
	}
	return cells
}

// aggCells renders the --agg aggregates' values; nulls where not Valid.
func aggCells(vals []tidemark.AggOut) []cell {
	cells := make([]cell, 0, len(vals))
	for _, v := range vals {
		if v.Valid {
			cells = append(cells, numCell(strconv.FormatFloat(v.V, 'g', -1, 64)))
		} else {
			cells = append(cells, nullCell())
		}
	}
	return cells
}
