package main

import (
	"bufio"
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// This is a deliberately small, independent Delta log replay (PROTOCOL.md:
// "Action Reconciliation"): it shares no code with tidemark's lake package,
// so that interop checks are not a writer grading itself.

// addFile is an active data file of a table snapshot.
type addFile struct {
	Path            string             // URI-encoded, relative to the table root, as in the log
	PartitionValues map[string]*string // nil value = null partition
	Size            int64
	Stats           string // JSON string, may be empty
}

// localPath is the file's path on disk: the log path is URI-decoded once.
func (a addFile) localPath(root string) (string, error) {
	p := a.Path
	if u, err := url.Parse(p); err == nil && u.Scheme == "file" {
		return u.Path, nil
	}
	dec, err := url.PathUnescape(p)
	if err != nil {
		return "", fmt.Errorf("decode path %q: %w", p, err)
	}
	if filepath.IsAbs(dec) {
		return dec, nil
	}
	return filepath.Join(root, filepath.FromSlash(dec)), nil
}

// numRecords returns the stats' numRecords, if present.
func (a addFile) numRecords() (int64, bool) {
	if a.Stats == "" {
		return 0, false
	}
	var s struct {
		NumRecords *int64 `json:"numRecords"`
	}
	if json.Unmarshal([]byte(a.Stats), &s) != nil || s.NumRecords == nil {
		return 0, false
	}
	return *s.NumRecords, true
}

// field is one top-level column of the table schema.
type field struct {
	Name string
	Type string // Delta primitive type name, or "struct"/"array"/"map" for nested ones
}

// snapshot is the replayed state of a table at its latest version.
type snapshot struct {
	Root             string
	Version          int64
	Files            []addFile // sorted by path
	PartitionColumns []string
	Schema           []field
	Configuration    map[string]string
	Txns             map[string]int64 // appId -> version
	FromCheckpoint   int64            // -1 if no checkpoint was used
}

// fieldType returns the Delta type of column name, or "".
func (s *snapshot) fieldType(name string) string {
	for _, f := range s.Schema {
		if f.Name == name {
			return f.Type
		}
	}
	return ""
}

type protocolAction struct {
	MinReaderVersion int      `json:"minReaderVersion"`
	MinWriterVersion int      `json:"minWriterVersion"`
	ReaderFeatures   []string `json:"readerFeatures"`
}

type metaDataAction struct {
	SchemaString     string            `json:"schemaString"`
	PartitionColumns []string          `json:"partitionColumns"`
	Configuration    map[string]string `json:"configuration"`
}

type fileAction struct {
	Path            string             `json:"path"`
	PartitionValues map[string]*string `json:"partitionValues"`
	Size            int64              `json:"size"`
	Stats           *string            `json:"stats"`
	DeletionVector  json.RawMessage    `json:"deletionVector"`
}

type txnAction struct {
	AppID   string `json:"appId"`
	Version int64  `json:"version"`
}

type action struct {
	Protocol *protocolAction `json:"protocol"`
	MetaData *metaDataAction `json:"metaData"`
	Add      *fileAction     `json:"add"`
	Remove   *fileAction     `json:"remove"`
	Txn      *txnAction      `json:"txn"`
}

var commitName = regexp.MustCompile(`^(\d{20})\.json$`)

// replay reads root's _delta_log: the checkpoint named by _last_checkpoint
// (read with DuckDB), if any, then every later JSON commit in order. It
// refuses protocols it does not implement (column mapping, deletion
// vectors, any reader feature), as a minimal reader must.
func replay(ctx context.Context, db *sql.DB, root string) (*snapshot, error) {
	logDir := filepath.Join(root, "_delta_log")
	entries, err := os.ReadDir(logDir)
	if err != nil {
		return nil, fmt.Errorf("read log %s: %w", logDir, err)
	}
	var versions []int64
	for _, e := range entries {
		if m := commitName.FindStringSubmatch(e.Name()); m != nil {
			v, _ := strconv.ParseInt(m[1], 10, 64)
			versions = append(versions, v)
		}
	}
	sort.Slice(versions, func(i, j int) bool { return versions[i] < versions[j] })

	s := &snapshot{Root: root, Version: -1, FromCheckpoint: -1, Txns: map[string]int64{}}
	active := map[string]addFile{}
	var proto *protocolAction
	var meta *metaDataAction

	apply := func(where string, a action) error {
		switch {
		case a.Protocol != nil:
			proto = a.Protocol
		case a.MetaData != nil:
			meta = a.MetaData
		case a.Txn != nil:
			s.Txns[a.Txn.AppID] = a.Txn.Version
		case a.Add != nil:
			if len(a.Add.DeletionVector) > 0 && string(a.Add.DeletionVector) != "null" {
				return fmt.Errorf("%s: add %s has a deletion vector: not supported", where, a.Add.Path)
			}
			f := addFile{Path: a.Add.Path, PartitionValues: a.Add.PartitionValues, Size: a.Add.Size}
			if a.Add.Stats != nil {
				f.Stats = *a.Add.Stats
			}
			active[a.Add.Path] = f
		case a.Remove != nil:
			delete(active, a.Remove.Path)
		}
		return nil
	}

	if cp, ok, err := readLastCheckpoint(logDir); err != nil {
		return nil, err
	} else if ok {
		acts, err := readCheckpoint(ctx, db, logDir, cp)
		if err != nil {
			return nil, err
		}
		for _, a := range acts {
			if err := apply(fmt.Sprintf("checkpoint %d", cp.Version), a); err != nil {
				return nil, err
			}
		}
		s.Version, s.FromCheckpoint = cp.Version, cp.Version
	}
	for _, v := range versions {
		if v <= s.Version {
			continue
		}
		if v != s.Version+1 {
			return nil, fmt.Errorf("log %s: version %d follows %d: a commit is missing", logDir, v, s.Version)
		}
		if err := readCommit(logDir, v, func(a action) error { return apply(fmt.Sprintf("commit %d", v), a) }); err != nil {
			return nil, err
		}
		s.Version = v
	}
	switch {
	case s.Version < 0:
		return nil, fmt.Errorf("log %s: no commits", logDir)
	case proto == nil || meta == nil:
		return nil, fmt.Errorf("log %s: no protocol or metaData action", logDir)
	case proto.MinReaderVersion > 1 || len(proto.ReaderFeatures) > 0:
		return nil, fmt.Errorf("protocol minReaderVersion %d readerFeatures %v: not supported", proto.MinReaderVersion, proto.ReaderFeatures)
	}
	if m := meta.Configuration["delta.columnMapping.mode"]; m != "" && m != "none" {
		return nil, fmt.Errorf("column mapping mode %q: not supported", m)
	}
	s.PartitionColumns = meta.PartitionColumns
	s.Configuration = meta.Configuration
	if s.Schema, err = parseSchema(meta.SchemaString); err != nil {
		return nil, err
	}
	for _, f := range active {
		s.Files = append(s.Files, f)
	}
	sort.Slice(s.Files, func(i, j int) bool { return s.Files[i].Path < s.Files[j].Path })
	return s, nil
}

func parseSchema(schemaString string) ([]field, error) {
	var st struct {
		Fields []struct {
			Name string          `json:"name"`
			Type json.RawMessage `json:"type"`
		} `json:"fields"`
	}
	if err := json.Unmarshal([]byte(schemaString), &st); err != nil {
		return nil, fmt.Errorf("parse schemaString: %w", err)
	}
	out := make([]field, 0, len(st.Fields))
	for _, f := range st.Fields {
		var prim string
		if json.Unmarshal(f.Type, &prim) != nil {
			var nested struct {
				Type string `json:"type"`
			}
			_ = json.Unmarshal(f.Type, &nested)
			prim = nested.Type
		}
		out = append(out, field{Name: f.Name, Type: prim})
	}
	return out, nil
}

func readCommit(logDir string, v int64, apply func(action) error) error {
	name := filepath.Join(logDir, fmt.Sprintf("%020d.json", v))
	b, err := os.ReadFile(name)
	if err != nil {
		return fmt.Errorf("read commit: %w", err)
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, 64<<20)
	for n := 1; sc.Scan(); n++ {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		var a action
		if err := json.Unmarshal(line, &a); err != nil {
			return fmt.Errorf("%s line %d: %w", name, n, err)
		}
		if err := apply(a); err != nil {
			return err
		}
	}
	return sc.Err()
}

type lastCheckpoint struct {
	Version int64 `json:"version"`
	Parts   int   `json:"parts"`
}

func readLastCheckpoint(logDir string) (lastCheckpoint, bool, error) {
	var cp lastCheckpoint
	b, err := os.ReadFile(filepath.Join(logDir, "_last_checkpoint"))
	if errors.Is(err, os.ErrNotExist) {
		return cp, false, nil
	}
	if err != nil {
		return cp, false, fmt.Errorf("read _last_checkpoint: %w", err)
	}
	if err := json.Unmarshal(b, &cp); err != nil {
		return cp, false, fmt.Errorf("parse _last_checkpoint: %w", err)
	}
	return cp, true, nil
}

// readCheckpoint reads the checkpoint's protocol, metaData, txn and add rows
// with DuckDB (remove rows are tombstones and change nothing).
func readCheckpoint(ctx context.Context, db *sql.DB, logDir string, cp lastCheckpoint) ([]action, error) {
	var files []string
	if cp.Parts <= 1 {
		files = []string{filepath.Join(logDir, fmt.Sprintf("%020d.checkpoint.parquet", cp.Version))}
	} else {
		for i := 1; i <= cp.Parts; i++ {
			files = append(files, filepath.Join(logDir, fmt.Sprintf("%020d.checkpoint.%010d.%010d.parquet", cp.Version, i, cp.Parts)))
		}
	}
	// Struct columns a writer left out would fail the query, so ask only
	// for what exists in this checkpoint's schema.
	have := map[string]bool{}
	rows, err := db.QueryContext(ctx, "SELECT column_name FROM (DESCRIBE SELECT * FROM read_parquet("+sqlList(files)+", union_by_name=true))")
	if err != nil {
		return nil, fmt.Errorf("read checkpoint %d: %w", cp.Version, err)
	}
	for rows.Next() {
		var c string
		if err := rows.Scan(&c); err != nil {
			rows.Close()
			return nil, err
		}
		have[c] = true
	}
	rows.Close()
	var cols []string
	for _, c := range []string{"protocol", "metaData", "txn", "add"} {
		if have[c] {
			cols = append(cols, fmt.Sprintf("CASE WHEN %q IS NULL THEN NULL ELSE json_object(%s, %q) END", c, sqlString(c), c))
		}
	}
	if len(cols) == 0 {
		return nil, fmt.Errorf("read checkpoint %d: no action columns", cp.Version)
	}
	q := "SELECT coalesce(" + strings.Join(cols, ", ") + ")::VARCHAR FROM read_parquet(" + sqlList(files) + ", union_by_name=true)"
	rows, err = db.QueryContext(ctx, q)
	if err != nil {
		return nil, fmt.Errorf("read checkpoint %d: %w", cp.Version, err)
	}
	defer rows.Close()
	var acts []action
	for rows.Next() {
		var js sql.NullString
		if err := rows.Scan(&js); err != nil {
			return nil, fmt.Errorf("read checkpoint %d: %w", cp.Version, err)
		}
		if !js.Valid {
			continue // remove, commitInfo, domainMetadata, ...
		}
		var a action
		if err := json.Unmarshal([]byte(js.String), &a); err != nil {
			return nil, fmt.Errorf("read checkpoint %d: %w", cp.Version, err)
		}
		acts = append(acts, a)
	}
	return acts, rows.Err()
}

// sqlString quotes s as a SQL string literal.
func sqlString(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// sqlList renders paths as a DuckDB list literal.
func sqlList(paths []string) string {
	q := make([]string, len(paths))
	for i, p := range paths {
		q[i] = sqlString(p)
	}
	return "[" + strings.Join(q, ", ") + "]"
}
