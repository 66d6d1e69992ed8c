package main

import (
	"context"
	"database/sql"
	"flag"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"
)

// knownTables are tidemark's tables (SPEC §4.1), checked in this order.
var knownTables = []string{"raw_events", "quarantine", "window_results", "reconcile_log"}

// derivedPartitions says how a tidemark partition column follows from a data
// column: strftime(source, format) in UTC.
var derivedPartitions = map[string]struct{ source, format string }{
	"event_date":  {"event_time", "%Y-%m-%d"},
	"event_hour":  {"event_time", "%H"},
	"window_date": {"window_start", "%Y-%m-%d"},
	"ingest_date": {"ingest_time", "%Y-%m-%d"},
}

// tableReport is what was verified for one table.
type tableReport struct {
	Name             string   `json:"name"`
	Version          int64    `json:"version"`
	Checkpoint       int64    `json:"checkpoint"` // -1: replayed from JSON commits only
	Files            int      `json:"files"`
	Rows             int64    `json:"rows"`
	StatsRows        int64    `json:"stats_rows"`
	PartitionColumns []string `json:"partition_columns"`
	TimestampColumns []string `json:"timestamp_columns"`
	PartitionChecks  int      `json:"partition_checks"` // (file, column) pairs checked against the path
	DerivedChecks    int      `json:"derived_checks"`   // (file, column) pairs checked against the data
	PayloadRows      int64    `json:"payload_rows"`
	// With -check-files: every Parquet file of the table, checkpoints too.
	ParquetFiles *parquetFilesReport `json:"parquet_files,omitempty"`
}

// interopReport is what interop prints.
type interopReport struct {
	Lake          string        `json:"lake"`
	DuckDB        string        `json:"duckdb"`
	Tables        []tableReport `json:"tables"`
	InputLines    int64         `json:"input_lines,omitempty"`
	CoveredLines  int64         `json:"covered_lines,omitempty"`
	Warnings      []string      `json:"warnings"`
	Failures      []string      `json:"failures"`
	FailureCount  int           `json:"failure_count"`
	Seconds       float64       `json:"seconds"`
	maxPerTable   int
	tableFailures map[string]int
}

func (r *interopReport) fail(table, format string, args ...any) {
	r.FailureCount++
	r.tableFailures[table]++
	if n := r.tableFailures[table]; n <= r.maxPerTable {
		r.Failures = append(r.Failures, table+": "+fmt.Sprintf(format, args...))
	} else if n == r.maxPerTable+1 {
		r.Failures = append(r.Failures, table+": (further failures not listed; see failure_count)")
	}
}

func (r *interopReport) warn(table, format string, args ...any) {
	r.Warnings = append(r.Warnings, table+": "+fmt.Sprintf(format, args...))
}

func interopCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("interop", flag.ContinueOnError)
	fs.SetOutput(stderr)
	lake := fs.String("lake", "", "lake directory, or one Delta table directory")
	input := fs.String("input", "", "the generator's input directory: check payloads byte-exact and that every input line is in raw_events or quarantine exactly once")
	asJSON := fs.Bool("json", false, "print the report as JSON instead of text")
	maxList := fs.Int("max-failures", 20, "failures listed per table (all are counted)")
	checkFiles := fs.Bool("check-files", false, "also check every Parquet file of every table, data files and checkpoints, for what tidemark writes: created_by parquet-mr parses (tidemark, a semver, a build), zstd data files and SNAPPY checkpoints, PLAIN or dictionary encodings, v1 data pages")
	wantVersion := fs.String("version", "", "with -check-files: the version created_by must name (what tidemark --version prints)")
	minCheckpoints := fs.Int("min-checkpoints", 0, "with -check-files: fail unless the lake's tables hold at least this many checkpoints in all")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *lake == "" {
		return fmt.Errorf("interop: -lake is required")
	}
	db, err := openDB(0)
	if err != nil {
		return err
	}
	defer db.Close()
	began := time.Now()
	rep := &interopReport{Lake: *lake, maxPerTable: *maxList, tableFailures: map[string]int{}, Warnings: []string{}, Failures: []string{}}
	rep.DuckDB, _ = duckVersion(ctx, db)

	tables, err := findTables(*lake)
	if err != nil {
		return fmt.Errorf("interop: %w", err)
	}
	if len(tables) == 0 {
		rep.fail("lake", "no Delta table (no _delta_log) in %s", *lake)
	}
	var cov *coverage
	if *input != "" {
		cov = newCoverage(*input)
	}
	checkpoints := 0
	for _, t := range tables {
		tr := checkTable(ctx, db, rep, t.name, t.dir, cov)
		if *checkFiles {
			pf := checkParquetFiles(ctx, db, rep, t.name, t.dir, *wantVersion)
			tr.ParquetFiles = &pf
			checkpoints += pf.Checkpoints
		}
		rep.Tables = append(rep.Tables, tr)
	}
	if *checkFiles && checkpoints < *minCheckpoints {
		rep.fail("lake", "%d checkpoints in all tables, want at least %d (more commits: a smaller --max-batch-rows)", checkpoints, *minCheckpoints)
	}
	if cov != nil {
		cov.finish(rep)
	}
	rep.Seconds = time.Since(began).Seconds()
	if *asJSON {
		if err := printJSON(stdout, rep); err != nil {
			return err
		}
	} else {
		rep.writeText(stdout)
	}
	if rep.FailureCount > 0 {
		return fmt.Errorf("interop: %d failures", rep.FailureCount)
	}
	return nil
}

type tableDir struct{ name, dir string }

// findTables returns lake itself if it is a table, else its table
// subdirectories: tidemark's in SPEC order, then any others by name.
func findTables(lake string) ([]tableDir, error) {
	isTable := func(d string) bool {
		st, err := os.Stat(filepath.Join(d, "_delta_log"))
		return err == nil && st.IsDir()
	}
	if isTable(lake) {
		return []tableDir{{filepath.Base(filepath.Clean(lake)), lake}}, nil
	}
	entries, err := os.ReadDir(lake)
	if err != nil {
		return nil, fmt.Errorf("read lake: %w", err)
	}
	var out []tableDir
	seen := map[string]bool{}
	for _, n := range knownTables {
		if isTable(filepath.Join(lake, n)) {
			out = append(out, tableDir{n, filepath.Join(lake, n)})
			seen[n] = true
		}
	}
	for _, e := range entries {
		n := e.Name()
		if e.IsDir() && !seen[n] && !strings.HasPrefix(n, "_") && !strings.HasPrefix(n, ".") && isTable(filepath.Join(lake, n)) {
			out = append(out, tableDir{n, filepath.Join(lake, n)})
		}
	}
	return out, nil
}

func isKnownTable(name string) bool {
	for _, t := range knownTables {
		if t == name {
			return true
		}
	}
	return false
}

// checkTable runs every check on one table, recording failures in rep.
func checkTable(ctx context.Context, db *sql.DB, rep *interopReport, name, dir string, cov *coverage) tableReport {
	tr := tableReport{Name: name, Version: -1, Checkpoint: -1}
	s, err := replay(ctx, db, dir)
	if err != nil {
		rep.fail(name, "replay: %v", err)
		return tr
	}
	tr.Version, tr.Checkpoint, tr.Files = s.Version, s.FromCheckpoint, len(s.Files)
	tr.PartitionColumns = s.PartitionColumns
	if len(s.Files) == 0 {
		rep.warn(name, "no active files at version %d", s.Version)
		return tr
	}
	// Files on disk, with the size the log says.
	var paths []string
	byPath := map[string]addFile{}
	for _, f := range s.Files {
		p, err := f.localPath(dir)
		if err != nil {
			rep.fail(name, "%v", err)
			continue
		}
		st, err := os.Stat(p)
		if err != nil {
			rep.fail(name, "active file %s: %v", f.Path, err)
			continue
		}
		if st.Size() != f.Size {
			rep.fail(name, "active file %s: size %d on disk, add.size %d", f.Path, st.Size(), f.Size)
		}
		paths = append(paths, p)
		byPath[p] = f
	}
	if len(paths) == 0 {
		return tr
	}
	checkRowCounts(ctx, db, rep, &tr, name, paths, byPath)
	checkColumns(ctx, db, rep, &tr, s, name, paths)
	checkPartitions(rep, &tr, s, name, paths, byPath)
	checkDerived(ctx, db, rep, &tr, s, name, paths, byPath)
	if cov != nil && (name == "raw_events" || name == "quarantine") {
		cov.checkPayloads(ctx, db, rep, &tr, name, paths)
	}
	return tr
}

// checkRowCounts compares DuckDB's row count of every file with the add's
// stats.numRecords.
func checkRowCounts(ctx context.Context, db *sql.DB, rep *interopReport, tr *tableReport, name string, paths []string, byPath map[string]addFile) {
	q := "SELECT filename, count(*) FROM read_parquet(" + sqlList(paths) + ", filename=true, hive_partitioning=false, union_by_name=true) GROUP BY filename"
	counts := map[string]int64{}
	rows, err := db.QueryContext(ctx, q)
	if err != nil {
		rep.fail(name, "read_parquet: %v", err)
		return
	}
	for rows.Next() {
		var f string
		var n int64
		if err := rows.Scan(&f, &n); err != nil {
			rep.fail(name, "read_parquet: %v", err)
			break
		}
		counts[f] = n
	}
	if err := rows.Err(); err != nil {
		rep.fail(name, "read_parquet: %v", err)
	}
	rows.Close()
	missingStats := 0
	for _, p := range paths {
		n := counts[p] // a file with no rows does not appear
		tr.Rows += n
		want, ok := byPath[p].numRecords()
		if !ok {
			missingStats++
			continue
		}
		tr.StatsRows += want
		if n != want {
			rep.fail(name, "%s: DuckDB reads %d rows, stats.numRecords is %d", byPath[p].Path, n, want)
		}
	}
	if missingStats > 0 {
		msg := "%d of %d active files have no stats.numRecords"
		if isKnownTable(name) {
			rep.fail(name, msg, missingStats, len(paths))
		} else {
			rep.warn(name, msg, missingStats, len(paths))
		}
	}
}

// checkColumns compares every file's columns with the table schema and
// checks that every timestamp is TIMESTAMP(MICROS, isAdjustedToUTC=true),
// which DuckDB reads as TIMESTAMP WITH TIME ZONE.
func checkColumns(ctx context.Context, db *sql.DB, rep *interopReport, tr *tableReport, s *snapshot, name string, paths []string) {
	isPart := map[string]bool{}
	for _, c := range s.PartitionColumns {
		isPart[c] = true
	}
	var want []string
	for _, f := range s.Schema {
		if !isPart[f.Name] {
			want = append(want, f.Name)
		}
	}
	sort.Strings(want)
	tsSeen := map[string]bool{}
	// Parquet physical/logical types, by file and top-level column name.
	type ptype struct{ converted, logical string }
	pschema := map[string]map[string]ptype{}
	rows, err := db.QueryContext(ctx, "SELECT file_name, name, coalesce(converted_type, ''), coalesce(logical_type, '') FROM parquet_schema("+sqlList(paths)+")")
	if err != nil {
		rep.fail(name, "parquet_schema: %v", err)
		return
	}
	for rows.Next() {
		var f, n, c, l string
		if err := rows.Scan(&f, &n, &c, &l); err != nil {
			rep.fail(name, "parquet_schema: %v", err)
			break
		}
		if pschema[f] == nil {
			pschema[f] = map[string]ptype{}
		}
		if _, dup := pschema[f][n]; !dup { // first = top level, for nested name clashes
			pschema[f][n] = ptype{c, l}
		}
	}
	rows.Close()

	for _, p := range paths {
		rel := relPath(s.Root, p)
		cols, err := describe(ctx, db, p)
		if err != nil {
			rep.fail(name, "%s: describe: %v", rel, err)
			continue
		}
		var got []string
		for _, c := range cols {
			got = append(got, c.name)
			if isPart[c.name] {
				rep.fail(name, "%s: partition column %q is stored in the data file", rel, c.name)
			}
			dt := s.fieldType(c.name)
			if dt != "timestamp" && !strings.HasPrefix(c.typ, "TIMESTAMP") {
				continue
			}
			tsSeen[c.name] = true
			if c.typ != "TIMESTAMP WITH TIME ZONE" {
				rep.fail(name, "%s: column %q (Delta %s) reads as %s, want TIMESTAMP WITH TIME ZONE", rel, c.name, dt, c.typ)
			}
			pt := pschema[p][c.name]
			micros := strings.Contains(pt.logical, "isAdjustedToUTC=1") && strings.Contains(pt.logical, "MICROS=MicroSeconds()")
			if pt.logical == "" && pt.converted == "TIMESTAMP_MICROS" {
				micros = true // legacy converted type: UTC-adjusted micros
			}
			if !micros {
				rep.fail(name, "%s: column %q is Parquet %s %s, want TIMESTAMP(MICROS, isAdjustedToUTC=true)", rel, c.name, pt.converted, pt.logical)
			}
		}
		sort.Strings(got)
		if strings.Join(got, ",") != strings.Join(want, ",") {
			rep.fail(name, "%s: data columns %v, schema (less partition columns) says %v", rel, got, want)
		}
	}
	for c := range tsSeen {
		tr.TimestampColumns = append(tr.TimestampColumns, c)
	}
	sort.Strings(tr.TimestampColumns)
}

type column struct{ name, typ string }

func describe(ctx context.Context, db *sql.DB, p string) ([]column, error) {
	rows, err := db.QueryContext(ctx, "SELECT column_name, column_type FROM (DESCRIBE SELECT * FROM read_parquet("+sqlString(p)+", hive_partitioning=false))")
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var cols []column
	for rows.Next() {
		var c column
		if err := rows.Scan(&c.name, &c.typ); err != nil {
			return nil, err
		}
		cols = append(cols, c)
	}
	return cols, rows.Err()
}

func relPath(root, p string) string {
	if r, err := filepath.Rel(root, p); err == nil {
		return r
	}
	return p
}

const hiveNull = "__HIVE_DEFAULT_PARTITION__"

// checkPartitions compares each add's partitionValues with the table's
// partition columns and with the Hive directories of its path.
func checkPartitions(rep *interopReport, tr *tableReport, s *snapshot, name string, paths []string, byPath map[string]addFile) {
	for _, p := range paths {
		f := byPath[p]
		if len(f.PartitionValues) != len(s.PartitionColumns) {
			rep.fail(name, "%s: partitionValues %v, partition columns %v", f.Path, keys(f.PartitionValues), s.PartitionColumns)
		}
		dirs := map[string]string{}
		rel := filepath.ToSlash(relPath(s.Root, p))
		for _, seg := range strings.Split(path.Dir(rel), "/") {
			if k, v, ok := strings.Cut(seg, "="); ok {
				dirs[k] = v
			}
		}
		for _, c := range s.PartitionColumns {
			tr.PartitionChecks++
			val, ok := f.PartitionValues[c]
			if !ok {
				rep.fail(name, "%s: no partition value for %q", f.Path, c)
				continue
			}
			dir, ok := dirs[c]
			if !ok {
				if len(s.PartitionColumns) > 0 && isKnownTable(name) {
					rep.fail(name, "%s: no %s=... directory in the path", f.Path, c)
				}
				continue
			}
			if val == nil {
				if dir != hiveNull {
					rep.fail(name, "%s: %s is null in the log, directory says %q", f.Path, c, dir)
				}
				continue
			}
			dv, err := unescapeHive(dir)
			if err != nil {
				rep.fail(name, "%s: directory %s=%s: %v", f.Path, c, dir, err)
				continue
			}
			if !sameValue(s.fieldType(c), *val, dv) {
				rep.fail(name, "%s: %s is %q in the log, %q in the directory", f.Path, c, *val, dv)
			}
			if err := parsesAs(s.fieldType(c), *val); err != nil {
				rep.fail(name, "%s: partition value %s=%q: %v", f.Path, c, *val, err)
			}
		}
	}
}

func keys(m map[string]*string) []string {
	var k []string
	for n := range m {
		k = append(k, n)
	}
	sort.Strings(k)
	return k
}

// unescapeHive undoes Hive's directory-name escaping (%XX).
func unescapeHive(s string) (string, error) {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '%' && i+2 < len(s) {
			n, err := strconv.ParseUint(s[i+1:i+3], 16, 8)
			if err != nil {
				return "", fmt.Errorf("bad escape %q", s[i:i+3])
			}
			b.WriteByte(byte(n))
			i += 2
			continue
		}
		b.WriteByte(s[i])
	}
	return b.String(), nil
}

var timestampLayouts = []string{time.RFC3339Nano, "2006-01-02 15:04:05.999999999", "2006-01-02T15:04:05.999999999"}

func parseTS(s string) (time.Time, bool) {
	for _, l := range timestampLayouts {
		if t, err := time.Parse(l, s); err == nil {
			return t, true
		}
	}
	return time.Time{}, false
}

// sameValue compares a log partition value with a directory value, by type.
func sameValue(typ, logVal, dirVal string) bool {
	if logVal == dirVal {
		return true
	}
	switch typ {
	case "timestamp", "timestamp_ntz":
		a, ok1 := parseTS(logVal)
		b, ok2 := parseTS(dirVal)
		return ok1 && ok2 && a.Equal(b)
	case "integer", "long", "short", "byte", "float", "double":
		a, err1 := strconv.ParseFloat(logVal, 64)
		b, err2 := strconv.ParseFloat(dirVal, 64)
		return err1 == nil && err2 == nil && a == b
	}
	return false
}

// parsesAs checks a partition value string against its Delta type.
func parsesAs(typ, v string) error {
	var err error
	switch typ {
	case "integer", "long", "short", "byte":
		_, err = strconv.ParseInt(v, 10, 64)
	case "float", "double":
		_, err = strconv.ParseFloat(v, 64)
	case "boolean":
		_, err = strconv.ParseBool(v)
	case "date":
		_, err = time.Parse("2006-01-02", v)
	case "timestamp", "timestamp_ntz":
		if _, ok := parseTS(v); !ok {
			err = fmt.Errorf("not a timestamp")
		}
	}
	if err != nil {
		return fmt.Errorf("not a valid %s", typ)
	}
	return nil
}

// checkDerived checks that tidemark's partition values agree with the data:
// event_date/event_hour with event_time, window_date with window_start,
// ingest_date with ingest_time, all in UTC.
func checkDerived(ctx context.Context, db *sql.DB, rep *interopReport, tr *tableReport, s *snapshot, name string, paths []string, byPath map[string]addFile) {
	var exprs []string
	var cols []string
	for _, c := range s.PartitionColumns {
		d, ok := derivedPartitions[c]
		if !ok || s.fieldType(d.source) == "" {
			continue
		}
		e := fmt.Sprintf("strftime(%q, %s)", d.source, sqlString(d.format))
		exprs = append(exprs, "min("+e+")", "max("+e+")")
		cols = append(cols, c)
	}
	if len(cols) == 0 {
		return
	}
	q := "SELECT filename, " + strings.Join(exprs, ", ") + " FROM read_parquet(" + sqlList(paths) + ", filename=true, hive_partitioning=false, union_by_name=true) GROUP BY filename"
	rows, err := db.QueryContext(ctx, q)
	if err != nil {
		rep.fail(name, "derived partitions: %v", err)
		return
	}
	defer rows.Close()
	for rows.Next() {
		vals := make([]sql.NullString, 2*len(cols))
		dest := []any{new(string)}
		for i := range vals {
			dest = append(dest, &vals[i])
		}
		if err := rows.Scan(dest...); err != nil {
			rep.fail(name, "derived partitions: %v", err)
			return
		}
		p := *dest[0].(*string)
		f := byPath[p]
		for i, c := range cols {
			tr.DerivedChecks++
			lo, hi := vals[2*i], vals[2*i+1]
			pv := f.PartitionValues[c]
			src := derivedPartitions[c].source
			switch {
			case !lo.Valid:
				if pv != nil {
					rep.fail(name, "%s: %s is null in every row, partition %s=%q", f.Path, src, c, *pv)
				}
			case lo.String != hi.String:
				rep.fail(name, "%s: rows span %s %s..%s, but the file is in one %s partition", f.Path, c, lo.String, hi.String, c)
			case pv == nil:
				rep.fail(name, "%s: partition %s is null, data says %s", f.Path, c, lo.String)
			case !sameValue(s.fieldType(c), *pv, lo.String):
				rep.fail(name, "%s: partition %s=%q, but %s gives %q", f.Path, c, *pv, src, lo.String)
			}
		}
	}
	if err := rows.Err(); err != nil {
		rep.fail(name, "derived partitions: %v", err)
	}
}

func (r *interopReport) writeText(w io.Writer) {
	fmt.Fprintf(w, "interop check of %s with DuckDB %s (%.1fs)\n", r.Lake, r.DuckDB, r.Seconds)
	for _, t := range r.Tables {
		cp := "JSON commits only"
		if t.Checkpoint >= 0 {
			cp = fmt.Sprintf("checkpoint %d + JSON", t.Checkpoint)
		}
		fmt.Fprintf(w, "  %-16s v%d (%s): %d files, %d rows read by DuckDB, %d in stats; partitions %v: %d path checks, %d data checks; timestamp columns %v",
			t.Name, t.Version, cp, t.Files, t.Rows, t.StatsRows, t.PartitionColumns, t.PartitionChecks, t.DerivedChecks, t.TimestampColumns)
		if t.PayloadRows > 0 {
			fmt.Fprintf(w, "; %d payloads byte-exact", t.PayloadRows)
		}
		if pf := t.ParquetFiles; pf != nil {
			fmt.Fprintf(w, "; Parquet files checked: %d data files, %d checkpoints, %d column chunks, created_by %q", pf.DataFiles, pf.Checkpoints, pf.Chunks, pf.CreatedBy)
		}
		fmt.Fprintln(w)
	}
	if r.InputLines > 0 {
		fmt.Fprintf(w, "  input: %d lines, %d found exactly once in raw_events+quarantine\n", r.InputLines, r.CoveredLines)
	}
	for _, m := range r.Warnings {
		fmt.Fprintln(w, "  warning:", m)
	}
	if r.FailureCount == 0 {
		fmt.Fprintln(w, "OK: no failures")
		return
	}
	fmt.Fprintf(w, "FAILED: %d failures\n", r.FailureCount)
	for _, m := range r.Failures {
		fmt.Fprintln(w, "  -", m)
	}
}
