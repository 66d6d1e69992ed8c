package lake

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"tidemark/lake/delta"
	"tidemark/lake/store"
)

// TableInfo summarises one table at its latest version.
type TableInfo struct {
	Name    string
	Version int64
	Files   int
	Rows    int64 // from the files' stats
	Bytes   int64
}

// Tables describes the lake's four tables.
func (l *Lake) Tables(ctx context.Context) ([]TableInfo, error) {
	var out []TableInfo
	for _, name := range tableNames {
		snap, err := l.tables[name].dt.Snapshot(ctx, -1)
		if err != nil {
			return nil, fmt.Errorf("describe %s: %w", name, err)
		}
		ti := TableInfo{Name: name, Version: snap.Version, Files: len(snap.Files)}
		for _, a := range snap.Files {
			ti.Bytes += a.Size
			if s, err := delta.ParseStats(a.Stats); err == nil {
				ti.Rows += s.NumRecords
			}
		}
		out = append(out, ti)
	}
	return out, nil
}

// Report says what Compact or Vacuum did (or, dry run, would do).
type Report struct {
	Table        string // "" when the report covers every table
	Version      int64  // the commit made, -1 for none
	FilesRemoved int    // compact: files merged away; vacuum: files deleted
	BytesRemoved int64
	FilesAdded   int
	BytesAdded   int64
	Rows         int64    // rows rewritten
	Deleted      []string // vacuum: store keys deleted (or to delete)
	InFlight     int      // vacuum: files no version references, kept as younger than the writer grace
	DryRun       bool
}

// DefaultTargetFileBytes is the size compaction merges small files up to
// (Delta's OPTIMIZE default).
const DefaultTargetFileBytes = 128 << 20

// Compact merges the files smaller than targetFileBytes within each
// partition of table into files of about that size, in one dataChange=false
// commit ("OPTIMIZE"). Rows and their partitions are unchanged. It conflicts
// only with commits that remove the same files, and is then redone.
func (l *Lake) Compact(ctx context.Context, tableName string, targetFileBytes int64) (Report, error) {
	if targetFileBytes <= 0 {
		targetFileBytes = DefaultTargetFileBytes
	}
	return l.compact(ctx, tableName, targetFileBytes, map[string]string{"predicate": "[]"},
		func(files []delta.Add) [][]delta.Add { return compactionGroups(files, targetFileBytes) })
}

// compact commits, in one dataChange=false OPTIMIZE commit, each group
// that groups picks from the table's latest files merged into one file.
func (l *Lake) compact(ctx context.Context, tableName string, targetFileBytes int64, params map[string]string, groups func([]delta.Add) [][]delta.Add) (Report, error) {
	h, ok := l.tables[tableName]
	if !ok {
		return Report{}, fmt.Errorf("compact: no table %q (have %s)", tableName, strings.Join(tableNames, ", "))
	}
	var rep Report
	v, err := l.update(ctx, h, func(snap *delta.Snapshot) (*delta.Transaction, []addFile, error) {
		var written []addFile
		rep = Report{Table: tableName, Version: -1}
		if snap == nil {
			return nil, nil, nil
		}
		now := l.clock().UnixMilli()
		var actions []delta.Action
		for _, group := range groups(snap.Files) {
			f, rows, err := l.rewrite(ctx, h, group)
			if err != nil {
				return nil, written, err
			}
			written = append(written, f)
			actions = append(actions, f.action(now, false))
			rep.FilesAdded++
			rep.BytesAdded += f.Size
			rep.Rows += rows
			for _, a := range group {
				actions = append(actions, delta.Action{Remove: &delta.Remove{
					Path: a.Path, DeletionTimestamp: now, DataChange: false, ExtendedFileMetadata: true,
					PartitionValues: a.PartitionValues, Size: a.Size, Stats: a.Stats,
				}})
				rep.FilesRemoved++
				rep.BytesRemoved += a.Size
			}
		}
		if len(actions) == 0 {
			return nil, nil, nil
		}
		op := map[string]string{"targetFileBytes": strconv.FormatInt(targetFileBytes, 10)}
		maps.Copy(op, params)
		return &delta.Transaction{
			Actions:             actions,
			Operation:           "OPTIMIZE",
			OperationParameters: op,
			OperationMetrics: map[string]string{
				"numRemovedFiles": strconv.Itoa(rep.FilesRemoved), "numAddedFiles": strconv.Itoa(rep.FilesAdded),
				"numRemovedBytes": strconv.FormatInt(rep.BytesRemoved, 10), "numAddedBytes": strconv.FormatInt(rep.BytesAdded, 10),
			},
			// Compaction changes no data: only removing the same files
			// concurrently conflicts, which Commit checks by path.
			ReadPredicate: func(map[string]*string) bool { return false },
		}, written, nil
	})
	if err != nil {
		return rep, fmt.Errorf("compact %s: %w", tableName, err)
	}
	if rep.FilesAdded > 0 {
		rep.Version = v
	}
	return rep, nil
}

// compactionGroups bins each partition's small files (in path order) into
// groups of at most target bytes; only groups of two or more are returned.
func compactionGroups(files []delta.Add, target int64) [][]delta.Add {
	var out [][]delta.Add
	for _, part := range byPartition(files, func(a delta.Add) bool { return a.Size < target }) {
		out = binGroups(out, part, target)
	}
	return out
}

// byPartition groups the files keep accepts by partition, partitions in
// key order and files in their order.
func byPartition(files []delta.Add, keep func(delta.Add) bool) [][]delta.Add {
	byPart := map[string][]delta.Add{}
	var parts []string
	for _, a := range files {
		if !keep(a) {
			continue
		}
		k := partKey(a.PartitionValues)
		if _, ok := byPart[k]; !ok {
			parts = append(parts, k)
		}
		byPart[k] = append(byPart[k], a)
	}
	slices.Sort(parts)
	out := make([][]delta.Add, len(parts))
	for i, p := range parts {
		out[i] = byPart[p]
	}
	return out
}

// binGroups appends to out the files (one partition) binned in order into
// groups of at most target bytes, keeping only groups of two or more.
func binGroups(out [][]delta.Add, files []delta.Add, target int64) [][]delta.Add {
	var cur []delta.Add
	var size int64
	for _, a := range files {
		if len(cur) > 0 && size+a.Size > target {
			if len(cur) > 1 {
				out = append(out, cur)
			}
			cur, size = nil, 0
		}
		cur = append(cur, a)
		size += a.Size
	}
	if len(cur) > 1 {
		out = append(out, cur)
	}
	return out
}

func partKey(pv map[string]*string) string {
	keys := make([]string, 0, len(pv))
	for k := range pv {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var b strings.Builder
	for _, k := range keys {
		b.WriteString(k)
		if v := pv[k]; v != nil {
			b.WriteString("=" + *v)
		}
		b.WriteByte(0)
	}
	return b.String()
}

// partDir renders the Hive directory of partition values, in the table's
// partition column order.
func partDir(t *table, pv map[string]*string) string {
	parts := make([]string, len(t.partCols))
	for i, c := range t.partCols {
		v := "__HIVE_DEFAULT_PARTITION__"
		if p := pv[c]; p != nil {
			v = *p
		}
		parts[i] = c + "=" + v
	}
	return strings.Join(parts, "/")
}

// rewrite copies the rows of files (one partition) into one new file.
func (l *Lake) rewrite(ctx context.Context, h *handle, files []delta.Add) (addFile, int64, error) {
	t := h.def
	w, err := newFileWriter(t)
	if err != nil {
		return addFile{}, 0, err
	}
	data := make([]colData, len(t.cols))
	for _, a := range files {
		if err := l.copyFile(ctx, w, a.Key(h.dt.Path()), data); err != nil {
			w.abort()
			return addFile{}, 0, err
		}
	}
	f, err := w.finish(ctx, l.st, partDir(t, files[0].PartitionValues))
	if err != nil {
		return addFile{}, 0, err
	}
	return addFile{dataFile: f, pv: files[0].PartitionValues}, f.Rows, nil
}

func (l *Lake) copyFile(ctx context.Context, w *fileWriter, key string, data []colData) error {
	fr, err := openFileReader(ctx, l.st, key)
	if err != nil {
		return err
	}
	defer fr.Close()
	cols := w.t.cols
	for rg := range fr.numRowGroups() {
		n, err := fr.readRowGroup(rg, cols, data)
		if err != nil {
			return err
		}
		for i := range n {
			for c, col := range cols {
				d := &data[c]
				if d.isNull(i) {
					w.null(c)
					continue
				}
				switch col.kind {
				case kindTimestamp, kindLong:
					w.long(c, d.ints[i])
				case kindDouble:
					w.double(c, d.floats[i])
				case kindBool:
					w.boolean(c, d.bools[i])
				default:
					w.bytes(c, d.bytes[i])
				}
			}
			if err := w.endRow(); err != nil {
				return err
			}
		}
		// The byte views point into data's arena, which the next row group
		// overwrites: hand the pending rows to parquet-go first.
		if err := w.flushChunk(); err != nil {
			return err
		}
	}
	return nil
}

// VacuumOptions say what Vacuum keeps.
type VacuumOptions struct {
	// Retain keeps the files that any version newer than this references
	// (tombstones removed less than Retain ago).
	Retain time.Duration
	// Force accepts a Retain shorter than SafeRetention.
	Force bool
	// DryRun lists what would be deleted and deletes nothing.
	DryRun bool
}

// ErrRetentionTooShort is Vacuum's answer to a retention below
// SafeRetention without Force.
var ErrRetentionTooShort = errors.New("lake: vacuum retention too short")

// Vacuum deletes, in every table, the files that no version within the
// retention references: files neither active nor removed less than Retain
// ago. A file no version references at all (an orphan of a crashed writer,
// or the file of a writer that has not committed yet) is deleted only once
// it is older than both Retain and the writer grace, whatever Force says.
// It never touches _delta_log or hidden (_ or .) paths of a table. In a
// directory lake it also removes the temp files crashed writers left in
// .tidemark-tmp/ (store.TempSweeper), by the same age rule as orphans and
// never one a live writer holds.
func (l *Lake) Vacuum(ctx context.Context, o VacuumOptions) (Report, error) {
	rep := Report{Version: -1, DryRun: o.DryRun}
	if o.Retain < 0 {
		return rep, fmt.Errorf("vacuum: negative retention %s", o.Retain)
	}
	if o.Retain < SafeRetention && !o.Force {
		return rep, fmt.Errorf("%w: --retain %s is under the safe %s (older versions and their readers need the files, as Delta's retentionDurationCheck says); add --force to vacuum anyway (files younger than the writer grace %s are kept even then)",
			ErrRetentionTooShort, o.Retain, SafeRetention, l.grace)
	}
	now := l.clock()
	cutoff := now.Add(-o.Retain)
	orphanCutoff := now.Add(-max(o.Retain, l.grace))
	for _, name := range tableNames {
		h := l.tables[name]
		snap, err := h.dt.Snapshot(ctx, -1)
		if err != nil {
			return rep, fmt.Errorf("vacuum %s: %w", name, err)
		}
		if err := snap.Writable(); err != nil {
			return rep, fmt.Errorf("vacuum %s: %w", name, err)
		}
		keep := map[string]bool{}
		if name == TableReconcileLog {
			// Log rows a reconcile run wrote but has not committed yet
			// (FinishReconcileLog commits them) are kept whatever their age.
			if keep, err = l.pendingFiles(ctx); err != nil {
				return rep, fmt.Errorf("vacuum %s: %w", name, err)
			}
		}
		for _, a := range snap.Files {
			keep[a.Key(h.dt.Path())] = true
		}
		tomb := map[string]bool{}
		for _, r := range snap.Tombstones {
			k := r.Key(h.dt.Path())
			tomb[k] = true
			if time.UnixMilli(r.DeletionTimestamp).After(cutoff) {
				keep[k] = true
			}
		}
		objs, err := l.st.List(ctx, h.dt.Path()+"/")
		if err != nil {
			return rep, fmt.Errorf("vacuum %s: %w", name, err)
		}
		for _, ob := range objs {
			rel := strings.TrimPrefix(ob.Key, h.dt.Path()+"/")
			if hidden(rel) || keep[ob.Key] || ob.ModTime.After(cutoff) {
				continue
			}
			if !tomb[ob.Key] && ob.ModTime.After(orphanCutoff) {
				rep.InFlight++ // may be a writer's, not committed yet
				continue
			}
			if !o.DryRun {
				if err := l.st.Delete(ctx, ob.Key); err != nil {
					return rep, fmt.Errorf("vacuum %s: %w", name, err)
				}
			}
			rep.Deleted = append(rep.Deleted, ob.Key)
			rep.FilesRemoved++
			rep.BytesRemoved += ob.Size
		}
	}
	// A writer that crashed after staging a data file (or inside Put)
	// left its temp file in the store's temp area: no table lists it.
	// Those older than the orphan cutoff that no live writer holds go.
	if sw, ok := l.st.(store.TempSweeper); ok {
		swept, err := sw.SweepTemps(ctx, orphanCutoff, o.DryRun)
		for _, ob := range swept {
			rep.Deleted = append(rep.Deleted, ob.Key)
			rep.FilesRemoved++
			rep.BytesRemoved += ob.Size
		}
		if err != nil {
			return rep, fmt.Errorf("vacuum: %w", err)
		}
	}
	return rep, nil
}

// hidden reports whether a path within a table has a segment starting with
// "_" or "." (the log, checkpoints, Hadoop's .crc files): vacuum leaves
// those alone, as Delta's does.
func hidden(rel string) bool {
	for _, seg := range strings.Split(rel, "/") {
		if strings.HasPrefix(seg, "_") || strings.HasPrefix(seg, ".") {
			return true
		}
	}
	return false
}

// lastVacuumKey is where the lake records when a background vacuum
// (VacuumIfDue) last ran, as RFC 3339 text: a hidden top-level path no
// table lists.
const lastVacuumKey = "_maintenance/last-vacuum"

// VacuumIfDue runs Vacuum with o unless a VacuumIfDue of any process ran
// less than every ago (the lake records when), so the streams of a lake
// vacuum it about once per every between them, restarts or not. ran is
// false when it was not due.
func (l *Lake) VacuumIfDue(ctx context.Context, every time.Duration, o VacuumOptions) (rep Report, ran bool, err error) {
	now := l.clock()
	data, err := store.ReadAll(ctx, l.st, lastVacuumKey)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return Report{Version: -1}, false, fmt.Errorf("vacuum: read %s: %w", lastVacuumKey, err)
	default:
		if last, perr := time.Parse(time.RFC3339Nano, string(data)); perr == nil && now.Sub(last) < every && !last.After(now) {
			return Report{Version: -1}, false, nil
		}
	}
	// Recorded first: a vacuum that fails (or is killed) is not retried
	// in a loop by every stream, only once the interval passed again.
	stamp := now.UTC().Format(time.RFC3339Nano)
	if err := l.st.Put(ctx, lastVacuumKey, strings.NewReader(stamp), int64(len(stamp))); err != nil {
		return Report{Version: -1}, false, fmt.Errorf("vacuum: record %s: %w", lastVacuumKey, err)
	}
	rep, err = l.Vacuum(ctx, o)
	return rep, true, err
}
