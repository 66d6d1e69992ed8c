package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"

	"time"

	"github.com/urfave/cli/v2"

	"tidemark"
	"tidemark/lake"
	"tidemark/lake/store"
)

// lakeFlags are the flags every command that reads or maintains a lake has.
func lakeFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "lake", Value: "./tidemark-lake", Usage: "lake location: a directory or s3://bucket/prefix", EnvVars: env("lake")},
		&cli.StringFlag{Name: "s3-endpoint", Usage: "S3 endpoint URL (default: AWS_ENDPOINT_URL, else AWS)", EnvVars: append(env("s3-endpoint"), "AWS_ENDPOINT_URL")},
	}
}

// openLake opens an existing lake, adopting the keys and windows it
// remembers. readOnly skips the S3 put-if-absent probe, so commands that
// only read need no write access.
func openLake(c *cli.Context, readOnly bool) (*lake.Lake, error) {
	loc := c.String("lake")
	if err := lakeExists(loc); err != nil {
		return nil, err
	}
	st, err := store.Open(c.Context, loc, store.S3Config{Endpoint: c.String("s3-endpoint"), SkipProbe: readOnly})
	if err != nil {
		return nil, fmt.Errorf("open lake %s: %w", loc, err)
	}
	return lake.Open(c.Context, st, lake.Config{}) // its errors name the lake
}

// lakeExists refuses a local lake directory that is not there: opening a
// directory store creates it, and for a command that works on an existing
// lake a missing one is a mistake (a typo) to report, not a directory to make.
func lakeExists(loc string) error {
	if strings.HasPrefix(loc, "s3://") {
		return nil
	}
	if _, err := os.Stat(loc); err != nil {
		return fmt.Errorf("open lake %s: %w", loc, err)
	}
	return nil
}

// parseTime reads a --from/--to value: RFC 3339, or a date (midnight UTC).
func parseTime(flag, s string) (int64, error) {
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04:05", "2006-01-02 15:04:05", "2006-01-02"} {
		if t, err := time.Parse(layout, s); err == nil {
			return t.UnixMicro(), nil
		}
	}
	return 0, fmt.Errorf("--%s %q: want RFC 3339 (2026-03-01T10:00:00Z) or a date (2026-03-01)", flag, s)
}

// timeRange reads --from/--to, or --since (the last D up to now) on the
// commands that have it; unset bounds are -infinity and +infinity.
func timeRange(c *cli.Context) (from, to int64, err error) {
	from, to = tidemark.MinTime, tidemark.MaxTime
	if c.IsSet("since") {
		d := c.Duration("since")
		switch {
		case c.IsSet("from") || c.IsSet("to"):
			return from, to, fmt.Errorf("--since and --from/--to exclude each other")
		case d <= 0:
			return from, to, fmt.Errorf("--since must be positive, got %s", d)
		}
		return time.Now().Add(-d).UnixMicro(), to, nil
	}
	if s := c.String("from"); s != "" {
		if from, err = parseTime("from", s); err != nil {
			return
		}
	}
	if s := c.String("to"); s != "" {
		if to, err = parseTime("to", s); err != nil {
			return
		}
	}
	if from >= to {
		err = fmt.Errorf("--from must be before --to")
	}
	return
}

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
			header := append([]string{"window_start", "window_end"}, cfg.Keys...)
			header = append(header, "count", "sum", "min", "max", "final", "origin", "revision", "computed_at", "watermark")
			f.header(header)
			for _, r := range rows {
				f.row(windowCells(r, len(cfg.Keys)))
			}
			return f.flush(c.App.Writer)
		},
	}
}

// windowCells renders one window_results row; nil cells are nulls.
func windowCells(r lake.WindowRow, nkeys int) []cell {
	cells := []cell{timeCell(r.Window.Start), timeCell(r.Window.End)}
	parts := r.Key.Parts()
	for i := range nkeys {
		if i < len(parts) && !parts[i].Null {
			cells = append(cells, strCell(parts[i].Value))
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
	return cells
}

func tablesCommand() *cli.Command {
	return &cli.Command{
		Name:  "tables",
		Usage: "show each table of a lake: Delta version, files, rows and bytes",
		Flags: append(lakeFlags(),
			&cli.StringFlag{Name: "format", Value: "table", Usage: "table, csv or json", EnvVars: env("format")},
		),
		Action: func(c *cli.Context) error {
			f, err := newRenderer(c.String("format"))
			if err != nil {
				return err
			}
			lk, err := openLake(c, true)
			if err != nil {
				return err
			}
			infos, err := lk.Tables(c.Context)
			if err != nil {
				return err
			}
			f.header([]string{"table", "version", "files", "rows", "bytes"})
			for _, t := range infos {
				f.row([]cell{strCell(t.Name), numCell(strconv.FormatInt(t.Version, 10)), numCell(strconv.Itoa(t.Files)),
					numCell(strconv.FormatInt(t.Rows, 10)), numCell(strconv.FormatInt(t.Bytes, 10))})
			}
			return f.flush(c.App.Writer)
		},
	}
}

func compactCommand() *cli.Command {
	return &cli.Command{
		Name:  "compact",
		Usage: "merge small files of each partition (a dataChange=false commit; readers see the same rows)",
		Flags: append(lakeFlags(),
			&cli.StringSliceFlag{Name: "table", Usage: "table to compact; repeatable (default: all)", EnvVars: env("table")},
			&cli.Int64Flag{Name: "target-file-bytes", Value: 128 << 20, Usage: "files smaller than this are merged, up to about this size", EnvVars: env("target-file-bytes")},
		),
		Action: func(c *cli.Context) error {
			lk, err := openLake(c, false)
			if err != nil {
				return err
			}
			tables := c.StringSlice("table")
			if len(tables) == 0 {
				tables = []string{lake.TableRawEvents, lake.TableQuarantine, lake.TableWindowResults, lake.TableReconcileLog}
			}
			for _, t := range tables {
				rep, err := lk.Compact(c.Context, t, c.Int64("target-file-bytes"))
				if err != nil {
					return err
				}
				fmt.Fprintf(c.App.Writer, "%s: merged %d files (%d rows, %d bytes) into %d files (%d bytes)%s\n",
					t, rep.FilesRemoved, rep.Rows, rep.BytesRemoved, rep.FilesAdded, rep.BytesAdded, versionNote(rep.Version))
			}
			return nil
		},
	}
}

func versionNote(v int64) string {
	if v < 0 {
		return "; nothing to do"
	}
	return fmt.Sprintf("; version %d", v)
}

func vacuumCommand() *cli.Command {
	return &cli.Command{
		Name:  "vacuum",
		Usage: "delete data files that no table version within the retention references",
		Flags: append(lakeFlags(),
			&cli.DurationFlag{Name: "retain", Value: lake.SafeRetention, Usage: "keep files needed by versions newer than this (time travel window)", EnvVars: env("retain")},
			&cli.BoolFlag{Name: "force", Usage: "accept a --retain under 168h (files younger than the 1h writer grace are kept even then)", EnvVars: env("force")},
			&cli.BoolFlag{Name: "dry-run", Usage: "list what would be deleted, delete nothing", EnvVars: env("dry-run")},
		),
		Action: func(c *cli.Context) error {
			if c.Duration("retain") < 0 {
				return fmt.Errorf("--retain must not be negative")
			}
			lk, err := openLake(c, false)
			if err != nil {
				return err
			}
			rep, err := lk.Vacuum(c.Context, lake.VacuumOptions{Retain: c.Duration("retain"), Force: c.Bool("force"), DryRun: c.Bool("dry-run")})
			if err != nil {
				return err
			}
			verb := "deleted"
			if rep.DryRun {
				verb = "would delete"
			}
			for _, k := range rep.Deleted {
				fmt.Fprintf(c.App.Writer, "%s %s\n", verb, k)
			}
			fmt.Fprintf(c.App.Writer, "%s %d files, %d bytes\n", verb, rep.FilesRemoved, rep.BytesRemoved)
			if rep.InFlight > 0 {
				fmt.Fprintf(c.App.Writer, "kept %d files no version references yet: younger than the %s writer grace, they may belong to a writer in flight\n", rep.InFlight, lake.DefaultWriterGrace)
			}
			return nil
		},
	}
}
