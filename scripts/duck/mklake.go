package main

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// mklake builds a tidemark-shaped raw_events Delta table from generator
// output with DuckDB alone. It is a benchmark fixture for the DuckDB side
// (groupby, quantiles) when tidemark cannot build a lake yet: columns as in
// SPEC §4.1 except payload/file/offset, partitioned by event_date and
// event_hour, one commit.
func mklakeCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("mklake", flag.ContinueOnError)
	fs.SetOutput(stderr)
	in := fs.String("in", "", "directory of *.ndjson generator files")
	lake := fs.String("lake", "", "lake directory to create (raw_events/ inside)")
	threads := fs.Int("threads", 0, "DuckDB threads (0 = all cores)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *in == "" || *lake == "" {
		return fmt.Errorf("mklake: -in and -lake are required")
	}
	table := filepath.Join(*lake, "raw_events")
	if _, err := os.Stat(table); err == nil {
		return fmt.Errorf("mklake: %s already exists", table)
	}
	if err := os.MkdirAll(*lake, 0o755); err != nil {
		return fmt.Errorf("mklake: %w", err)
	}
	db, err := openDB(*threads)
	if err != nil {
		return err
	}
	defer db.Close()
	began := time.Now()
	// Lines in file order are arrival order; disorder is the running max of
	// earlier event times minus this one. Lines without a valid time, and
	// far-future ones, are what tidemark quarantines: left out.
	q := `COPY (
  WITH src AS (
    SELECT *, row_number() OVER () AS rn
    FROM read_json(` + sqlString(filepath.Join(*in, "*.ndjson")) + `, format='newline_delimited', ignore_errors=true, filename=true, columns=` + typedColumns + `)
  ), ordered AS (
    SELECT *, max(epoch_us(event_time)) OVER (ORDER BY filename, rn ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS prev_max
    FROM src WHERE event_time IS NOT NULL AND event_time <= arrival_time + INTERVAL 1 HOUR AND page IS NOT NULL
  )
  SELECT event_time, arrival_time, now() AS ingest_time, page, country, value, 'ok' AS status,
         greatest(coalesce(prev_max, 0) - epoch_us(event_time), 0) AS disorder_us,
         'bench' AS source, filename AS file, 0::BIGINT AS batch_id,
         strftime(event_time, '%Y-%m-%d') AS event_date, strftime(event_time, '%H') AS event_hour
  FROM ordered
) TO ` + sqlString(table) + ` (FORMAT parquet, COMPRESSION zstd, PARTITION_BY (event_date, event_hour))`
	if _, err := db.ExecContext(ctx, q); err != nil {
		return fmt.Errorf("mklake: %w", err)
	}
	rows, err := writeFirstCommit(ctx, db, table, rawFields, []string{"event_date", "event_hour"})
	if err != nil {
		return fmt.Errorf("mklake: %w", err)
	}
	return printJSON(stdout, map[string]any{"rows": rows, "seconds": time.Since(began).Seconds(), "table": table})
}

// rawFields is the Delta schema of mklake's raw_events.
var rawFields = [][2]string{
	{"event_time", "timestamp"}, {"arrival_time", "timestamp"}, {"ingest_time", "timestamp"},
	{"page", "string"}, {"country", "string"}, {"value", "double"}, {"status", "string"},
	{"disorder_us", "long"}, {"source", "string"}, {"file", "string"}, {"batch_id", "long"},
	{"event_date", "string"}, {"event_hour", "string"},
}

// writeFirstCommit writes commit 0 of the table at dir: protocol, metaData
// and one add (with stats.numRecords) per Parquet file under dir.
func writeFirstCommit(ctx context.Context, db *sql.DB, dir string, fields [][2]string, partCols []string) (int64, error) {
	var files []string
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && strings.HasSuffix(p, ".parquet") {
			files = append(files, p)
		}
		return err
	})
	if err != nil {
		return 0, err
	}
	type f struct {
		Name     string            `json:"name"`
		Type     string            `json:"type"`
		Nullable bool              `json:"nullable"`
		Metadata map[string]string `json:"metadata"`
	}
	st := struct {
		Type   string `json:"type"`
		Fields []f    `json:"fields"`
	}{Type: "struct"}
	for _, fl := range fields {
		st.Fields = append(st.Fields, f{fl[0], fl[1], true, map[string]string{}})
	}
	schema, _ := json.Marshal(st)
	now := time.Now().UnixMilli()
	var log bytes.Buffer
	enc := json.NewEncoder(&log)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(map[string]any{"commitInfo": map[string]any{"timestamp": now, "operation": "WRITE", "engineInfo": "tidemark-scripts-duck"}})
	_ = enc.Encode(map[string]any{"protocol": map[string]int{"minReaderVersion": 1, "minWriterVersion": 2}})
	_ = enc.Encode(map[string]any{"metaData": map[string]any{"id": fmt.Sprintf("duck-%d", now), "format": map[string]any{"provider": "parquet", "options": map[string]string{}},
		"schemaString": string(schema), "partitionColumns": partCols, "configuration": map[string]string{}, "createdTime": now}})
	var total int64
	for _, p := range files {
		rel, _ := filepath.Rel(dir, p)
		rel = filepath.ToSlash(rel)
		pv := map[string]string{}
		for _, seg := range strings.Split(rel, "/") {
			if k, v, ok := strings.Cut(seg, "="); ok {
				pv[k] = v
			}
		}
		var n int64
		if err := db.QueryRowContext(ctx, "SELECT count(*) FROM read_parquet("+sqlString(p)+", hive_partitioning=false)").Scan(&n); err != nil {
			return 0, err
		}
		total += n
		info, err := os.Stat(p)
		if err != nil {
			return 0, err
		}
		_ = enc.Encode(map[string]any{"add": map[string]any{"path": rel, "partitionValues": pv, "size": info.Size(),
			"modificationTime": info.ModTime().UnixMilli(), "dataChange": true, "stats": fmt.Sprintf(`{"numRecords":%d}`, n)}})
	}
	logDir := filepath.Join(dir, "_delta_log")
	if err := os.MkdirAll(logDir, 0o755); err != nil {
		return 0, err
	}
	return total, os.WriteFile(filepath.Join(logDir, "00000000000000000000.json"), log.Bytes(), 0o644)
}
