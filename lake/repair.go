package lake

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"tidemark/lake/delta"
)

// RepairOptions say which tables Repair checks and whether it commits.
type RepairOptions struct {
	Tables []string // default: every table
	DryRun bool     // report what is lost, commit nothing
}

// LostFile is a data file a table references that is missing from the store
// (or has another size than its add action says: truncated or replaced).
type LostFile struct {
	Path      string            // relative to the table root, as in the log
	Partition map[string]string // partition values ("" for null)
	Size      int64             // bytes the log expects
	Found     int64             // bytes in the store; -1: missing
	Rows      int64             // stats numRecords; -1 when the file has no stats
	// MinTime and MaxTime bound the file's TimeColumn values (µs, from the
	// stats, millisecond precision); HasTime is false without stats.
	MinTime, MaxTime int64
	HasTime          bool
}

// RepairReport says what Repair found (and removed) in one table.
type RepairReport struct {
	Table      string
	TimeColumn string // the column MinTime/MaxTime are of
	Version    int64  // the commit removing the lost files; -1 for none
	Checked    int    // active files checked
	Lost       []LostFile
	Rows       int64 // rows of the lost files with stats
	NoStats    int   // lost files without stats (rows unknown)
	// MinTime and MaxTime bound every lost file's time range; HasTime is
	// false when no lost file has time stats.
	MinTime, MaxTime int64
	HasTime          bool
	DryRun           bool
}

// timeColumns is the column whose range Repair reports per table: what a
// user needs to know to re-ingest.
var timeColumns = map[string]string{
	TableRawEvents:     "event_time",
	TableQuarantine:    "ingest_time",
	TableWindowResults: "window_start",
	TableReconcileLog:  "corrected_at",
}

// Repair finds, in each table, the active files that are missing from the
// store or have the wrong size (lost from outside the lake: a deleted
// object, a restored backup), and unless DryRun removes their references in
// one commit per table (operation FSCK, like Databricks' FSCK REPAIR
// TABLE), so every command can read the table again. The rows in those
// files are gone; the report says how many and from which time range, so
// they can be re-ingested. Tables without lost files get no commit.
func (l *Lake) Repair(ctx context.Context, o RepairOptions) ([]RepairReport, error) {
	tables := o.Tables
	if len(tables) == 0 {
		tables = tableNames
	}
	var out []RepairReport
	for _, name := range tables {
		h, ok := l.tables[name]
		if !ok {
			return out, fmt.Errorf("repair: no table %q (have %s)", name, strings.Join(tableNames, ", "))
		}
		rep, err := l.repair(ctx, h, o.DryRun)
		if err != nil {
			return out, fmt.Errorf("repair %s: %w", name, err)
		}
		out = append(out, rep)
	}
	return out, nil
}

func (l *Lake) repair(ctx context.Context, h *handle, dryRun bool) (RepairReport, error) {
	var rep RepairReport
	v, err := l.update(ctx, h, func(snap *delta.Snapshot) (*delta.Transaction, []addFile, error) {
		rep = RepairReport{Table: h.def.name, TimeColumn: timeColumns[h.def.name], Version: -1, DryRun: dryRun}
		if snap == nil {
			return nil, nil, nil
		}
		lost, err := l.lostFiles(ctx, h, snap, &rep)
		if err != nil {
			return nil, nil, err
		}
		if len(lost) == 0 || dryRun {
			return nil, nil, nil
		}
		now := l.clock().UnixMilli()
		actions := make([]delta.Action, len(lost))
		var bytes int64
		for i, a := range lost {
			actions[i] = delta.Action{Remove: &delta.Remove{
				Path: a.Path, DeletionTimestamp: now, DataChange: true, ExtendedFileMetadata: true,
				PartitionValues: a.PartitionValues, Size: a.Size, Stats: a.Stats,
			}}
			bytes += a.Size
		}
		return &delta.Transaction{
			Actions:             actions,
			Operation:           "FSCK",
			OperationParameters: map[string]string{},
			OperationMetrics: map[string]string{
				"numMissingFiles": strconv.Itoa(len(lost)), "numRemovedBytes": strconv.FormatInt(bytes, 10),
				"numRemovedRows": strconv.FormatInt(rep.Rows, 10),
			},
			// It read only which files exist: only a commit removing the
			// same files conflicts (checked by path), so a stream appending
			// meanwhile does not make it retry.
			ReadPredicate: func(map[string]*string) bool { return false },
		}, nil, nil
	})
	if err != nil {
		return rep, err
	}
	if len(rep.Lost) > 0 && !dryRun {
		rep.Version = v
	}
	return rep, nil
}

// lostFiles lists the table's objects once and returns the active files
// missing from the listing or of another size, filling rep.
func (l *Lake) lostFiles(ctx context.Context, h *handle, snap *delta.Snapshot, rep *RepairReport) ([]delta.Add, error) {
	objs, err := l.st.List(ctx, h.dt.Path()+"/")
	if err != nil {
		return nil, err
	}
	sizes := make(map[string]int64, len(objs))
	for _, o := range objs {
		sizes[o.Key] = o.Size
	}
	rep.Checked = len(snap.Files)
	var lost []delta.Add
	for i := range snap.Files {
		a := &snap.Files[i]
		found, ok := sizes[a.Key(h.dt.Path())]
		if ok && found == a.Size {
			continue
		}
		if !ok {
			found = -1
		}
		rel := strings.TrimPrefix(a.Key(h.dt.Path()), h.dt.Path()+"/")
		lf := LostFile{Path: rel, Partition: map[string]string{}, Size: a.Size, Found: found, Rows: -1}
		for k, v := range a.PartitionValues {
			if v != nil {
				lf.Partition[k] = *v
			} else {
				lf.Partition[k] = ""
			}
		}
		if s, err := delta.ParseStats(a.Stats); err == nil && a.Stats != "" {
			lf.Rows = s.NumRecords
			rep.Rows += s.NumRecords
		} else {
			rep.NoStats++
		}
		if lo, hi, ok := fileTimeRange(a, l.phys(rep.TimeColumn)); ok {
			lf.MinTime, lf.MaxTime, lf.HasTime = lo, hi-1000, true
			if !rep.HasTime || lo < rep.MinTime {
				rep.MinTime = lo
			}
			if !rep.HasTime || lf.MaxTime > rep.MaxTime {
				rep.MaxTime = lf.MaxTime
			}
			rep.HasTime = true
		}
		rep.Lost = append(rep.Lost, lf)
		lost = append(lost, *a)
	}
	slices.SortFunc(rep.Lost, func(a, b LostFile) int { return strings.Compare(a.Path, b.Path) })
	return lost, nil
}
