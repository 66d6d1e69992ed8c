// Command duck is tidemark's DuckDB yardstick: the reference side of the
// benchmarks (ingest, groupby, quantiles) and an independent interop check of
// the lake (interop). It is its own module so that tidemark never depends on
// DuckDB; it reads the Delta log with its own small replay.
//
//	duck ingest    -in DIR -out FILE.parquet
//	duck groupby   -lake DIR [-window 1m] [-key page] [-value value]
//	duck quantiles -lake DIR
//	duck aggs      -lake DIR [-window 1m] [-key page] [-agg 'avg(value),p99(value)']
//	duck interop   -lake DIR [-input DIR]
//	duck mklake    -in DIR -lake DIR
//	duck version
//
// Results are JSON on stdout; errors go to stderr with a non-zero exit.
package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	_ "github.com/duckdb/duckdb-go/v2" // registers the "duckdb" driver
)

const usage = `usage: duck <command> [flags]

commands:
  ingest     -in DIR -out FILE.parquet    read_json(DIR/*.ndjson) -> Parquet (zstd)
  groupby    -lake DIR                    window x key aggregates over raw_events
  quantiles  -lake DIR                    arrival lag and disorder percentiles of raw_events
  aggs       -lake DIR [-agg A,B]         tidemark's --agg aggregates, exact, from raw_events payloads
  interop    -lake DIR [-input DIR]       check every Delta table of a lake with DuckDB
  mklake     -in DIR -lake DIR            build a tidemark-shaped raw_events with DuckDB (bench fixture)
  version                                 print DuckDB's version
`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "duck:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return fmt.Errorf("no command")
	}
	cmd, rest := args[0], args[1:]
	switch cmd {
	case "ingest":
		return ingestCmd(ctx, rest, stdout, stderr)
	case "groupby":
		return groupbyCmd(ctx, rest, stdout, stderr)
	case "quantiles":
		return quantilesCmd(ctx, rest, stdout, stderr)
	case "aggs":
		return aggsCmd(ctx, rest, stdout, stderr)
	case "interop":
		return interopCmd(ctx, rest, stdout, stderr)
	case "mklake":
		return mklakeCmd(ctx, rest, stdout, stderr)
	case "version":
		db, err := openDB(0)
		if err != nil {
			return err
		}
		defer db.Close()
		v, err := duckVersion(ctx, db)
		if err != nil {
			return err
		}
		fmt.Fprintln(stdout, v)
		return nil
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return nil
	}
	fmt.Fprint(stderr, usage)
	return fmt.Errorf("unknown command %q", cmd)
}

// openDB opens an in-memory DuckDB on one connection (so session settings
// stick) with the session time zone set to UTC, so date and hour functions
// on TIMESTAMPTZ mean UTC. threads <= 0 keeps DuckDB's default (all cores).
func openDB(threads int) (*sql.DB, error) {
	db, err := sql.Open("duckdb", "")
	if err != nil {
		return nil, fmt.Errorf("open duckdb: %w", err)
	}
	db.SetMaxOpenConns(1)
	db.SetMaxIdleConns(1)
	db.SetConnMaxLifetime(0)
	stmts := []string{"SET TimeZone = 'UTC'"}
	if threads > 0 {
		stmts = append(stmts, fmt.Sprintf("SET threads = %d", threads))
	}
	for _, s := range stmts {
		if _, err := db.Exec(s); err != nil {
			db.Close()
			return nil, fmt.Errorf("%s: %w", s, err)
		}
	}
	return db, nil
}

func duckVersion(ctx context.Context, db *sql.DB) (string, error) {
	var v string
	if err := db.QueryRowContext(ctx, "SELECT version()").Scan(&v); err != nil {
		return "", fmt.Errorf("duckdb version: %w", err)
	}
	return v, nil
}

// printJSON writes v as one JSON line.
func printJSON(w io.Writer, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encode result: %w", err)
	}
	_, err = fmt.Fprintf(w, "%s\n", b)
	return err
}
