package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
)

// groupbyResult is what groupby prints.
type groupbyResult struct {
	Files   int     `json:"files"`
	Rows    int64   `json:"rows"`   // raw_events rows aggregated
	Groups  int64   `json:"groups"` // result rows (window x key)
	Seconds float64 `json:"seconds"`
	SQL     string  `json:"sql"`
}

func groupbyCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("groupby", flag.ContinueOnError)
	fs.SetOutput(stderr)
	lake := fs.String("lake", "", "lake directory (holding raw_events/)")
	window := fs.Duration("window", time.Minute, "tumbling window width")
	keys := fs.String("key", "page", "comma-separated key columns")
	value := fs.String("value", "value", "value column")
	threads := fs.Int("threads", 0, "DuckDB threads (0 = all cores)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *lake == "" || *window <= 0 {
		return fmt.Errorf("groupby: -lake and a positive -window are required")
	}
	db, err := openDB(*threads)
	if err != nil {
		return err
	}
	defer db.Close()
	began := time.Now()
	_, files, err := activeFiles(ctx, db, *lake, "raw_events")
	if err != nil {
		return fmt.Errorf("groupby: %w", err)
	}
	var kcols []string
	for _, k := range strings.Split(*keys, ",") {
		kcols = append(kcols, strconv.Quote(strings.TrimSpace(k)))
	}
	v := strconv.Quote(*value)
	q := fmt.Sprintf(`SELECT time_bucket(to_microseconds(%d), event_time) AS w, %s, count(*) AS n, sum(%s) AS s, min(%s), max(%s)
FROM read_parquet(%s, hive_partitioning=true, union_by_name=true) GROUP BY ALL`,
		window.Microseconds(), strings.Join(kcols, ", "), v, v, v, sqlList(files))
	// The result is fetched in full (not wrapped in count(*)), so DuckDB
	// cannot skip computing any aggregate.
	rows, err := db.QueryContext(ctx, q)
	if err != nil {
		return fmt.Errorf("groupby: %w", err)
	}
	defer rows.Close()
	cols, _ := rows.Columns()
	dest := make([]any, len(cols))
	vals := make([]any, len(cols))
	for i := range dest {
		dest[i] = &vals[i]
	}
	res := groupbyResult{Files: len(files), SQL: q}
	nIdx := len(kcols) + 1
	for rows.Next() {
		if err := rows.Scan(dest...); err != nil {
			return fmt.Errorf("groupby: %w", err)
		}
		res.Groups++
		if n, ok := vals[nIdx].(int64); ok {
			res.Rows += n
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("groupby: %w", err)
	}
	res.Seconds = time.Since(began).Seconds()
	return printJSON(stdout, res)
}
