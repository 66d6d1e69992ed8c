package lake

import (
	"context"
	"encoding/json"
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
	// Input names the input lines a lost raw_events or quarantine file
	// held, from its stats; nil for the other tables or without stats.
	Input *LostInput
}

// LostInput names the input lines a lost raw_events or quarantine file
// held, as far as its stats tell (docs/files-operations.md): the offsets
// and batches they span, and, when every row came from one input file,
// that file's identity. (file_id, offset) names a line for good, across
// renames, rotations, compression and copies (docs/file-identity.md), so
// the lost lines can be found in whatever the input has become.
type LostInput struct {
	// FileID, File and Source are the one input the rows came from; each
	// is "" when the rows came from several, when a row had none (file_id
	// of rows written before the column), or when the stats do not say
	// (Spark-style stats keep no upper bound for strings over 32 bytes).
	FileID, File, Source string
	// MinOffset and MaxOffset are the offsets of the first and the last
	// lost line (decompressed bytes), MinBatch and MaxBatch the batch ids
	// that wrote them; HasOffset and HasBatch say whether the stats hold
	// them.
	MinOffset, MaxOffset int64
	HasOffset            bool
	MinBatch, MaxBatch   int64
	HasBatch             bool
}

// lostInput reads a lost file's LostInput from its stats, through the
// lake's names of its own columns.
func (l *Lake) lostInput(st delta.Stats) *LostInput {
	one := func(logical string) string {
		col := l.phys(logical)
		lo, ok1 := st.MinValues[col].(string)
		hi, ok2 := st.MaxValues[col].(string)
		if !ok1 || !ok2 || lo != hi || st.NullCount[col] > 0 {
			return ""
		}
		return lo
	}
	ints := func(logical string) (lo, hi int64, ok bool) {
		col := l.phys(logical)
		a, ok1 := st.MinValues[col].(json.Number)
		b, ok2 := st.MaxValues[col].(json.Number)
		if !ok1 || !ok2 {
			return 0, 0, false
		}
		lo, err1 := a.Int64()
		hi, err2 := b.Int64()
		return lo, hi, err1 == nil && err2 == nil
	}
	in := &LostInput{FileID: one(ColFileID), File: one(ColFile), Source: one(ColSource)}
	in.MinOffset, in.MaxOffset, in.HasOffset = ints(ColOffset)
	in.MinBatch, in.MaxBatch, in.HasBatch = ints(ColBatchID)
	return in
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
			if h.def.name == TableRawEvents || h.def.name == TableQuarantine {
				lf.Input = l.lostInput(s)
			}
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
