// Command gen writes realistic, deterministic event files for tidemark's tests
// and benchmarks: NDJSON or CSV lines in arrival order, with Zipf-distributed
// keys, lognormal arrival lag, a few hours-late mobile events, rare far-future
// timestamps and rare bad lines of every quarantine kind.
//
//	go run ./scripts/gen -events 2000000 -seed 1 -out /tmp/events
//
// The same flags always give the same bytes. A JSON summary goes to stderr.
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"
)

func main() {
	if err := run(os.Args[1:], os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "gen:", err)
		os.Exit(1)
	}
}

// run parses args, generates the files and prints the summary to stderr.
func run(args []string, stderr io.Writer) error {
	fs := flag.NewFlagSet("gen", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var cfg Config
	var start, sources string
	fs.IntVar(&cfg.Events, "events", 100000, "number of lines to write (bad lines included)")
	fs.Uint64Var(&cfg.Seed, "seed", 1, "random seed; the same seed gives the same bytes")
	fs.StringVar(&cfg.Out, "out", "", "output directory (created; existing generated files are overwritten)")
	fs.IntVar(&cfg.Files, "files", 8, "files per source; lexical order of names = arrival order")
	fs.IntVar(&cfg.Keys, "keys", 1000, "distinct pages (Zipf-distributed)")
	fs.StringVar(&sources, "sources", "", "comma-separated source names; each gets its own subdirectory of -out (default: one source, files directly in -out)")
	fs.StringVar(&cfg.Format, "format", "ndjson", "ndjson or csv")
	fs.StringVar(&start, "start", "2026-01-01T00:00:00Z", "event time of the first event (RFC 3339)")
	fs.Float64Var(&cfg.Rate, "rate", 1000, "events per second of event time")
	fs.Float64Var(&cfg.LateFrac, "late-frac", 0.03, "fraction of hours-late mobile events (lag 1-6 h)")
	fs.Float64Var(&cfg.FutureFrac, "future-frac", 0.0005, "fraction of events with a far-future (2099) event time")
	fs.Float64Var(&cfg.BadFrac, "bad-frac", 0.001, "fraction of bad lines (split evenly over malformed, missing_time, bad_time, bad_value, bad_utf8)")
	fs.Float64Var(&cfg.NullValueFrac, "null-value-frac", 0.001, "fraction of valid events whose value is null or absent")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	t, err := time.Parse(time.RFC3339Nano, start)
	if err != nil {
		return fmt.Errorf("-start %q: %w", start, err)
	}
	cfg.Start = t
	if sources != "" {
		cfg.Sources = strings.Split(sources, ",")
	}
	began := time.Now()
	sum, err := Generate(cfg)
	if err != nil {
		return err
	}
	sum.Seconds = time.Since(began).Seconds()
	return sum.write(stderr)
}
