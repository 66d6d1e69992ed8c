package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"tidemark"
	"tidemark/lake"
	"tidemark/lake/store"
)

// lakeFlags are the flags every command that reads or maintains a lake has.
func lakeFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "lake", Value: "./tidemark-lake", Usage: "lake location: a directory or s3://bucket/prefix", EnvVars: env("lake")},
		&cli.StringFlag{Name: "s3-endpoint", Usage: "S3 endpoint URL (default: AWS_ENDPOINT_URL, else AWS)", EnvVars: append(env("s3-endpoint"), "AWS_ENDPOINT_URL")},
	}
}

// openLake opens an existing lake, adopting the keys and windows it
// remembers. readOnly skips the S3 put-if-absent probe, so commands that
// only read need no write access.
func openLake(c *cli.Context, readOnly bool) (*lake.Lake, error) {
	return openLakeWith(c, readOnly, lake.Config{})
}

// openLakeWith is openLake with the options of cfg (its setup is adopted).
func openLakeWith(c *cli.Context, readOnly bool, cfg lake.Config) (*lake.Lake, error) {
	loc := c.String("lake")
	if err := lakeExists(loc); err != nil {
		return nil, err
	}
	st, err := store.Open(c.Context, loc, store.S3Config{Endpoint: c.String("s3-endpoint"), SkipProbe: readOnly})
	if err != nil {
		return nil, fmt.Errorf("open lake %s: %w", loc, err)
	}
	return lake.Open(c.Context, st, cfg) // its errors name the lake
}

// lakeExists refuses a local lake directory that is not there: opening a
// directory store creates it, and for a command that works on an existing
// lake a missing one is a mistake (a typo) to report, not a directory to make.
func lakeExists(loc string) error {
	if strings.HasPrefix(loc, "s3://") {
		return nil
	}
	if _, err := os.Stat(loc); err != nil {
		return fmt.Errorf("open lake %s: %w", loc, err)
	}
	return nil
}

// parseTime reads a --from/--to value: RFC 3339, or a date (midnight UTC).
func parseTime(flag, s string) (int64, error) {
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04:05", "2006-01-02 15:04:05", "2006-01-02"} {
		if t, err := time.Parse(layout, s); err == nil {
			return t.UnixMicro(), nil
		}
	}
	return 0, fmt.Errorf("--%s %q: want RFC 3339 (2026-03-01T10:00:00Z) or a date (2026-03-01)", flag, s)
}

// fillRange replaces the bound of [from, to) that --from or --to left out
// with span's, the range of the lake's rows a command covers by default
// (batch.WindowStarts, batch.EventSpan); an empty raw_events is an error
// saying what there is then: "raw_events is empty: <empty>".
func fillRange(c *cli.Context, lk *lake.Lake, from, to int64, span func(context.Context, *lake.Lake) (int64, int64, bool, error), empty string) (int64, int64, error) {
	if c.String("from") != "" && c.String("to") != "" {
		return from, to, nil
	}
	lo, hi, ok, err := span(c.Context, lk)
	if err != nil {
		return 0, 0, err
	}
	if !ok {
		return 0, 0, fmt.Errorf("raw_events is empty: %s", empty)
	}
	if c.String("from") == "" {
		from = lo
	}
	if c.String("to") == "" {
		to = hi
	}
	return from, to, nil
}

// timeRange reads --from/--to; unset bounds are -infinity and +infinity.
func timeRange(c *cli.Context) (from, to int64, err error) {
	from, to = tidemark.MinTime, tidemark.MaxTime
	if s := c.String("from"); s != "" {
		if from, err = parseTime("from", s); err != nil {
			return
		}
	}
	if s := c.String("to"); s != "" {
		if to, err = parseTime("to", s); err != nil {
			return
		}
	}
	if from >= to {
		err = fmt.Errorf("--from must be before --to")
	}
	return
}
