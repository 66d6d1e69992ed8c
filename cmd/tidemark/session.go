package main

import (
	"fmt"
	"time"

	"github.com/urfave/cli/v2"

	"tidemark/batch"
	"tidemark/lake"
)

// sessionsCommand prints the exact session windows of raw_events (the
// batch layer's sessionization), on any lake: every session of every key
// that overlaps the range, each whole, however far it reaches beyond it.
func sessionsCommand() *cli.Command {
	return &cli.Command{
		Name:  "sessions",
		Usage: "print exact session windows computed from raw_events (reads only; nothing is changed)",
		Flags: append(lakeFlags(),
			&cli.DurationFlag{Name: "gap", Usage: "session gap: a key's next event at least this long after its previous one starts a new session (default: the gap of a lake written by `stream --session-gap`; required on other lakes)", EnvVars: env("gap")},
			&cli.StringFlag{Name: "from", Usage: "sessions overlapping event time at or after this (RFC 3339 or date; default: all)", EnvVars: env("from")},
			&cli.StringFlag{Name: "to", Usage: "sessions overlapping event time before this", EnvVars: env("to")},
			&cli.StringFlag{Name: "format", Value: "table", Usage: "table, csv or json", EnvVars: env("format")},
		),
		Action: func(c *cli.Context) error {
			f, err := newRenderer(c.String("format"))
			if err != nil {
				return err
			}
			lk, err := openLake(c, true)
			if err != nil {
				return err
			}
			gap := c.Duration("gap")
			if !c.IsSet("gap") {
				gap = lk.Config().Gap()
			}
			if gap <= 0 {
				return fmt.Errorf("--gap is required and must be positive, e.g. --gap 30m")
			}
			return printSessions(c, lk, gap, f)
		},
	}
}

// printSessions prints the exact sessions of lk with gap over --from/--to
// (default: all of raw_events); a nil f prints only the counts, as
// `recompute --format count` does.
func printSessions(c *cli.Context, lk *lake.Lake, gap time.Duration, f *renderer) error {
	from, to, err := timeRange(c)
	if err != nil {
		return err
	}
	if from, to, err = fillRange(c, lk, from, to, batch.EventSpan, "no sessions"); err != nil {
		return err
	}
	began := time.Now()
	rows, st, err := batch.Sessionize(c.Context, lk, batch.SessionQuery{Gap: gap, From: from, To: to})
	if err != nil {
		return err
	}
	if f == nil {
		printCount(c.App.Writer, len(rows), st.Stats, time.Since(began))
		return nil
	}
	return printExact(c, f, lk.Config(), rows)
}
