package main

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	"github.com/urfave/cli/v2"

	"tidemark"
	"tidemark/lake"
	"tidemark/lake/store"
)

func repairCommand() *cli.Command {
	return &cli.Command{
		Name:  "repair",
		Usage: "check each table's Delta log and data files: set aside a damaged newest commit or checkpoint, and remove references to data files that are gone, reporting exactly what is lost (a dry run unless --commit)",
		Flags: append(lakeFlags(),
			&cli.StringSliceFlag{Name: "table", Usage: "table to check; repeatable (default: all)", EnvVars: env("table")},
			&cli.BoolFlag{Name: "commit", Usage: "apply the repair: set damaged log files aside under _delta_log/_damaged/ and commit the removal of the lost files (default: a dry run that only reports)", EnvVars: env("commit")},
			&cli.StringFlag{Name: "format", Value: "text", Usage: "text or json", EnvVars: env("format")},
		),
		Action: func(c *cli.Context) error {
			format := c.String("format")
			if format != "text" && format != "json" {
				return fmt.Errorf("--format %q: want text or json", format)
			}
			dry := !c.Bool("commit")
			loc := c.String("lake")
			if err := lakeExists(loc); err != nil {
				return err
			}
			st, err := store.Open(c.Context, loc, store.S3Config{Endpoint: c.String("s3-endpoint"), SkipProbe: dry})
			if err != nil {
				return fmt.Errorf("open lake %s: %w", loc, err)
			}
			logs, err := lake.RepairLogs(c.Context, st, c.StringSlice("table"), dry, nil)
			if err != nil {
				return err
			}
			damaged := slices.ContainsFunc(logs, func(r lake.LogRepairReport) bool { return r.NeedsRepair() })
			if format == "json" {
				if err := writeLogRepairJSON(c.App.Writer, logs); err != nil {
					return err
				}
			} else {
				writeLogRepairText(c.App.Writer, logs, dry)
			}
			lk, err := openLake(c, dry)
			if err != nil {
				if damaged && dry {
					fmt.Fprintf(c.App.ErrWriter, "data files not checked: %v (rerun with --commit to repair the log first)\n", err)
					return nil
				}
				return err
			}
			reps, err := lk.Repair(c.Context, lake.RepairOptions{Tables: c.StringSlice("table"), DryRun: dry})
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
			if in := f.Input; in != nil {
				fmt.Fprintf(w, "    lines from %s\n", inputText(in))
			}
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

// inputText names the input lines of a lost file: the one input they
// came from (its file_id, path and source) or "several inputs", with the
// offsets and batches they span.
func inputText(in *lake.LostInput) string {
	var b strings.Builder
	switch {
	case in.FileID != "":
		fmt.Fprintf(&b, "file_id %s", in.FileID)
		if in.File != "" {
			fmt.Fprintf(&b, " (read as %s", in.File)
			if in.Source != "" {
				fmt.Fprintf(&b, " in %s", in.Source)
			}
			b.WriteString(")")
		}
	case in.File != "":
		fmt.Fprintf(&b, "%s (no file_id)", in.File)
	default:
		b.WriteString("several inputs")
	}
	if in.HasOffset {
		fmt.Fprintf(&b, ", offsets %d..%d", in.MinOffset, in.MaxOffset)
	}
	if in.HasBatch {
		fmt.Fprintf(&b, ", batch %d", in.MinBatch)
		if in.MaxBatch != in.MinBatch {
			fmt.Fprintf(&b, "..%d", in.MaxBatch)
		}
	}
	return b.String()
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
	Input     *lostInputJSON    `json:"input,omitempty"` // raw_events and quarantine
}

// lostInputJSON is lake.LostInput: "" and null where the stats do not say.
type lostInputJSON struct {
	FileID    string `json:"file_id"`
	File      string `json:"file"`
	Source    string `json:"source"`
	MinOffset *int64 `json:"min_offset"`
	MaxOffset *int64 `json:"max_offset"`
	MinBatch  *int64 `json:"min_batch_id"`
	MaxBatch  *int64 `json:"max_batch_id"`
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
			if in := f.Input; in != nil {
				ij := &lostInputJSON{FileID: in.FileID, File: in.File, Source: in.Source}
				if in.HasOffset {
					ij.MinOffset, ij.MaxOffset = &in.MinOffset, &in.MaxOffset
				}
				if in.HasBatch {
					ij.MinBatch, ij.MaxBatch = &in.MinBatch, &in.MaxBatch
				}
				lf.Input = ij
			}
			out.Lost = append(out.Lost, lf)
		}
		if err := enc.Encode(out); err != nil {
			return err
		}
	}
	return nil
}

// writeLogRepairText prints what the log check of each table found: the
// version it reads at, the checkpoints and versions set aside and what the
// lost versions held.
func writeLogRepairText(w io.Writer, logs []lake.LogRepairReport, dry bool) {
	for _, r := range logs {
		if !r.NeedsRepair() {
			fmt.Fprintf(w, "%s: log healthy (version %d)\n", r.Table, r.Latest)
			continue
		}
		verb := "set aside"
		if dry {
			verb = "would be set aside"
		}
		fmt.Fprintf(w, "%s: log damaged; readable up to version %d of %d\n", r.Table, r.Restored, r.Latest)
		for _, v := range r.BadCheckpoints {
			fmt.Fprintf(w, "  checkpoint %d unreadable: %s (its commits are kept, nothing lost)\n", v, verb)
		}
		if len(r.Lost) > 0 {
			fmt.Fprintf(w, "  versions %v %s and LOST (unreadable: %v)\n", r.Lost, verb, r.Damaged)
			if len(r.Damaged) > 0 {
				fmt.Fprintf(w, "  what the unreadable versions held is unknown\n")
			}
			for _, p := range r.LostAdds {
				fmt.Fprintf(w, "  file no longer in the table: %s\n", p)
			}
			for _, p := range r.LostRemoves {
				fmt.Fprintf(w, "  file back in the table (its removal was lost): %s\n", p)
			}
			for _, app := range slices.Sorted(maps.Keys(r.LostTxns)) {
				v := r.LostTxns[app]
				fmt.Fprintf(w, "  txn %s: back from %d to %d\n", app, v[0], v[1])
			}
		}
		if r.LastCheckpoint != "" {
			fmt.Fprintf(w, "  _last_checkpoint %s: rewritten to name checkpoint %d\n", r.LastCheckpoint, r.Base)
		}
		if dry {
			fmt.Fprintf(w, "  dry run: nothing changed; rerun with --commit to repair\n")
		} else {
			fmt.Fprintf(w, "  moved %d log files under %s/_delta_log/_damaged/\n", len(r.Moved), r.Table)
		}
	}
}

// logRepairJSON is one table's log check for --format json.
type logRepairJSON struct {
	Table          string              `json:"table"`
	Log            string              `json:"log"` // "damaged"
	Latest         int64               `json:"latest_version"`
	Restored       int64               `json:"readable_version"`
	BadCheckpoints []int64             `json:"bad_checkpoints"`
	Lost           []int64             `json:"lost_versions"`
	Damaged        []int64             `json:"unreadable_versions"`
	LostAdds       []string            `json:"lost_files"`
	LostRemoves    []string            `json:"restored_files"`
	LostTxns       map[string][2]int64 `json:"txns_back"`
	LastCheckpoint string              `json:"last_checkpoint_fixed,omitempty"`
	Moved          []string            `json:"moved"`
}

// writeLogRepairJSON writes one line per table whose log is damaged.
func writeLogRepairJSON(w io.Writer, logs []lake.LogRepairReport) error {
	enc := json.NewEncoder(w)
	for _, r := range logs {
		if !r.NeedsRepair() {
			continue // one line per damaged log; the file reports follow
		}
		state := "damaged"
		out := logRepairJSON{Table: r.Table, Log: state, Latest: r.Latest, Restored: r.Restored, BadCheckpoints: r.BadCheckpoints,
			Lost: r.Lost, Damaged: r.Damaged, LostAdds: r.LostAdds, LostRemoves: r.LostRemoves, LostTxns: r.LostTxns,
			LastCheckpoint: r.LastCheckpoint, Moved: r.Moved}
		if err := enc.Encode(out); err != nil {
			return err
		}
	}
	return nil
}
