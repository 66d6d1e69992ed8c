package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"time"
)

// typedColumns is the generator's schema (scripts/gen), so DuckDB parses
// timestamps and numbers as tidemark must, and drops the lines it cannot.
const typedColumns = `{event_time: 'TIMESTAMPTZ', arrival_time: 'TIMESTAMPTZ', page: 'VARCHAR', country: 'VARCHAR', client: 'VARCHAR', user_id: 'VARCHAR', action: 'VARCHAR', value: 'DOUBLE'}`

// ingestResult is what ingest prints.
type ingestResult struct {
	Rows    int64   `json:"rows"`
	Seconds float64 `json:"seconds"`
	Schema  string  `json:"schema"`
	SQL     string  `json:"sql"`
}

func ingestCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("ingest", flag.ContinueOnError)
	fs.SetOutput(stderr)
	in := fs.String("in", "", "directory of *.ndjson files")
	glob := fs.String("glob", "*.ndjson", "file pattern within -in")
	out := fs.String("out", "", "Parquet file to write")
	schema := fs.String("schema", "typed", "typed: the generator's columns with their types; auto: DuckDB's auto-detection (SELECT *)")
	threads := fs.Int("threads", 0, "DuckDB threads (0 = all cores)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *in == "" || *out == "" {
		return fmt.Errorf("ingest: -in and -out are required")
	}
	src := "read_json(" + sqlString(filepath.Join(*in, *glob)) + ", format='newline_delimited', ignore_errors=true"
	switch *schema {
	case "typed":
		src += ", columns=" + typedColumns + ")"
	case "auto":
		src += ")"
	default:
		return fmt.Errorf("ingest: -schema %q: want typed or auto", *schema)
	}
	q := "COPY (SELECT * FROM " + src + ") TO " + sqlString(*out) + " (FORMAT parquet, COMPRESSION zstd)"
	db, err := openDB(*threads)
	if err != nil {
		return err
	}
	defer db.Close()
	began := time.Now()
	res, err := db.ExecContext(ctx, q)
	if err != nil {
		return fmt.Errorf("ingest: %w", err)
	}
	secs := time.Since(began).Seconds()
	n, err := res.RowsAffected()
	if err != nil {
		return fmt.Errorf("ingest: rows: %w", err)
	}
	return printJSON(stdout, ingestResult{Rows: n, Seconds: secs, Schema: *schema, SQL: q})
}
