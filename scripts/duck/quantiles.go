package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"time"
)

// quantileLevels are the percentiles the lateness report shows (SPEC §6).
var quantileLevels = []float64{0.5, 0.9, 0.95, 0.99, 0.999}

// dist is one distribution, in microseconds.
type dist struct {
	Min int64            `json:"min"`
	P   map[string]int64 `json:"p"` // "p50", "p90", "p95", "p99", "p99.9"
	Max int64            `json:"max"`
}

// quantilesResult is what quantiles prints.
type quantilesResult struct {
	Files      int     `json:"files"`
	Rows       int64   `json:"rows"`
	LagUS      dist    `json:"arrival_lag_us"`
	DisorderUS dist    `json:"disorder_us"`
	Seconds    float64 `json:"seconds"`
}

func quantilesCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("quantiles", flag.ContinueOnError)
	fs.SetOutput(stderr)
	lake := fs.String("lake", "", "lake directory (holding raw_events/)")
	threads := fs.Int("threads", 0, "DuckDB threads (0 = all cores)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *lake == "" {
		return fmt.Errorf("quantiles: -lake is required")
	}
	db, err := openDB(*threads)
	if err != nil {
		return err
	}
	defer db.Close()
	began := time.Now()
	_, files, err := activeFiles(ctx, db, *lake, "raw_events")
	if err != nil {
		return fmt.Errorf("quantiles: %w", err)
	}
	levels := "[0.5, 0.9, 0.95, 0.99, 0.999]"
	q := `SELECT count(*),
  min(lag), quantile_disc(lag, ` + levels + `), max(lag),
  min(disorder_us), quantile_disc(disorder_us, ` + levels + `), max(disorder_us)
FROM (SELECT epoch_us(arrival_time) - epoch_us(event_time) AS lag, disorder_us
      FROM read_parquet(` + sqlList(files) + `, hive_partitioning=true, union_by_name=true))`
	res := quantilesResult{Files: len(files)}
	var lagQ, disQ any
	if err := db.QueryRowContext(ctx, q).Scan(&res.Rows,
		&res.LagUS.Min, &lagQ, &res.LagUS.Max,
		&res.DisorderUS.Min, &disQ, &res.DisorderUS.Max); err != nil {
		return fmt.Errorf("quantiles: %w", err)
	}
	if res.LagUS.P, err = levelMap(lagQ); err != nil {
		return fmt.Errorf("quantiles: %w", err)
	}
	if res.DisorderUS.P, err = levelMap(disQ); err != nil {
		return fmt.Errorf("quantiles: %w", err)
	}
	res.Seconds = time.Since(began).Seconds()
	return printJSON(stdout, res)
}

// levelMap turns a scanned DuckDB list of quantiles into {"p50": v, ...}.
func levelMap(list any) (map[string]int64, error) {
	vals, ok := list.([]any)
	if !ok || len(vals) != len(quantileLevels) {
		return nil, fmt.Errorf("quantiles: got %v, want a list of %d values", list, len(quantileLevels))
	}
	m := make(map[string]int64, len(vals))
	for i, l := range quantileLevels {
		v, ok := vals[i].(int64)
		if !ok {
			return nil, fmt.Errorf("quantiles: value %v (%T) is not an integer", vals[i], vals[i])
		}
		m[fmt.Sprintf("p%g", l*100)] = v
	}
	return m, nil
}
