package main

import (
	"encoding/json"
	"fmt"
	"io"

	"github.com/urfave/cli/v2"

	"tidemark"
	"tidemark/lake"
)

func repairCommand() *cli.Command {
	return &cli.Command{
		Name:  "repair",
		Usage: "find data files a table references that are gone, report what they held, and (with --commit) remove the references",
		Flags: append(lakeFlags(),
			&cli.StringSliceFlag{Name: "table", Usage: "table to check; repeatable (default: all)", EnvVars: env("table")},
			&cli.BoolFlag{Name: "commit", Usage: "commit the removal of the lost files (default: a dry run that only reports)", EnvVars: env("commit")},
			&cli.StringFlag{Name: "format", Value: "text", Usage: "text or json", EnvVars: env("format")},
		),
		Action: func(c *cli.Context) error {
			format := c.String("format")
			if format != "text" && format != "json" {
				return fmt.Errorf("--format %q: want text or json", format)
			}
			lk, err := openLake(c, !c.Bool("commit"))
			if err != nil {
				return err
			}
			reps, err := lk.Repair(c.Context, lake.RepairOptions{Tables: c.StringSlice("table"), DryRun: !c.Bool("commit")})
			if err != nil {
				return err
			}
			if format == "json" {
				return writeRepairJSON(c.App.Writer, reps)
			}
			writeRepairText(c.App.Writer, reps)
			return nil
		},
	}
}

// writeRepairText prints, per table, each lost file with its rows and time
// range, then the totals and what was (or would be) committed.
func writeRepairText(w io.Writer, reps []lake.RepairReport) {
	for _, r := range reps {
		if len(r.Lost) == 0 {
			fmt.Fprintf(w, "%s: %d files checked, none missing\n", r.Table, r.Checked)
			continue
		}
		fmt.Fprintf(w, "%s: %d of %d files missing or damaged\n", r.Table, len(r.Lost), r.Checked)
		for _, f := range r.Lost {
			state := "missing"
			if f.Found >= 0 {
				state = fmt.Sprintf("%d bytes, want %d", f.Found, f.Size)
			}
			fmt.Fprintf(w, "  %s (%s): %s, %s %s\n", f.Path, state, rowsText(f.Rows), r.TimeColumn, rangeText(f.HasTime, f.MinTime, f.MaxTime))
		}
		rows := rowsText(r.Rows)
		if r.NoStats > 0 {
			rows += fmt.Sprintf(" (+ %d files without stats)", r.NoStats)
		}
		fmt.Fprintf(w, "  lost: %s, %s %s\n", rows, r.TimeColumn, rangeText(r.HasTime, r.MinTime, r.MaxTime))
		if r.DryRun {
			fmt.Fprintf(w, "  dry run: nothing changed; rerun with --commit to remove these %d references (re-ingest the rows above to get them back)\n", len(r.Lost))
		} else {
			fmt.Fprintf(w, "  removed the %d references in version %d (FSCK)\n", len(r.Lost), r.Version)
		}
	}
}

func rowsText(n int64) string {
	if n < 0 {
		return "rows unknown"
	}
	return fmt.Sprintf("%d rows", n)
}

func rangeText(ok bool, lo, hi int64) string {
	if !ok {
		return "range unknown"
	}
	return tidemark.FormatTime(lo) + " .. " + tidemark.FormatTime(hi)
}

// repairJSON is one table's report for --format json.
type repairJSON struct {
	Table      string         `json:"table"`
	Checked    int            `json:"files_checked"`
	Lost       []lostFileJSON `json:"lost_files"`
	Rows       int64          `json:"lost_rows"`
	NoStats    int            `json:"lost_files_without_stats"`
	TimeColumn string         `json:"time_column"`
	MinTime    *string        `json:"min_time"`
	MaxTime    *string        `json:"max_time"`
	DryRun     bool           `json:"dry_run"`
	Version    *int64         `json:"version"` // the FSCK commit; null for none
}

type lostFileJSON struct {
	Path      string            `json:"path"`
	Partition map[string]string `json:"partition"`
	Size      int64             `json:"size"`
	Found     *int64            `json:"found_size"` // null: missing
	Rows      *int64            `json:"rows"`
	MinTime   *string           `json:"min_time"`
	MaxTime   *string           `json:"max_time"`
}

func writeRepairJSON(w io.Writer, reps []lake.RepairReport) error {
	timeOf := func(ok bool, us int64) *string {
		if !ok {
			return nil
		}
		s := tidemark.FormatTime(us)
		return &s
	}
	enc := json.NewEncoder(w)
	for _, r := range reps {
		out := repairJSON{Table: r.Table, Checked: r.Checked, Lost: []lostFileJSON{}, Rows: r.Rows, NoStats: r.NoStats,
			TimeColumn: r.TimeColumn, MinTime: timeOf(r.HasTime, r.MinTime), MaxTime: timeOf(r.HasTime, r.MaxTime), DryRun: r.DryRun}
		if r.Version >= 0 {
			v := r.Version
			out.Version = &v
		}
		for _, f := range r.Lost {
			lf := lostFileJSON{Path: f.Path, Partition: f.Partition, Size: f.Size,
				MinTime: timeOf(f.HasTime, f.MinTime), MaxTime: timeOf(f.HasTime, f.MaxTime)}
			if f.Found >= 0 {
				n := f.Found
				lf.Found = &n
			}
			if f.Rows >= 0 {
				n := f.Rows
				lf.Rows = &n
			}
			out.Lost = append(out.Lost, lf)
		}
		if err := enc.Encode(out); err != nil {
			return err
		}
	}
	return nil
}
