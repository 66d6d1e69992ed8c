package main

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"tidemark"
	"tidemark/reconcile/requeue"
)

func requeueCommand() *cli.Command {
	return &cli.Command{
		Name:  "requeue",
		Usage: "move quarantined lines that parse under the current settings to raw_events (as late rows; reconcile then corrects their windows)",
		Description: "Reads every quarantined line again with the given --time-field, --time-unit, --time-layout,\n" +
			"--arrival-field, --max-future, --max-line-bytes and --min-event-time (keys and value are the lake's),\n" +
			"and moves those that are valid events now to raw_events with status late. Each line ends in exactly one\n" +
			"table, also if the command is killed: the next run completes an interrupted one first.\n" +
			"CSV lines are decoded with the header of their file: its first line if quarantine holds it (the file was\n" +
			"read as NDJSON), else the first line of the file read again (if it still holds the line), else --csv-header.",
		Flags: append(lakeFlags(),
			&cli.StringFlag{Name: "time-field", Value: "event_time", Usage: "field holding the event time", EnvVars: env("time-field")},
			&cli.StringFlag{Name: "time-unit", Value: "s", Usage: "unit of numeric epoch times: s, ms, us or ns", EnvVars: env("time-unit")},
			&cli.StringFlag{Name: "time-layout", Usage: "Go time layout for event times that are not RFC 3339 or epoch numbers", EnvVars: env("time-layout")},
			&cli.StringFlag{Name: "arrival-field", Usage: "field holding the time the event was received (default: when the stream read the line)", EnvVars: env("arrival-field")},
			&cli.DurationFlag{Name: "max-future", Value: time.Hour, Usage: "lines with an event time more than this far ahead of their arrival stay quarantined (a positive duration)", EnvVars: env("max-future")},
			&cli.IntFlag{Name: "max-line-bytes", Value: 1 << 20, Usage: "longer lines stay quarantined; a line quarantined as too long is read again whole from its local file (quarantine kept only its first bytes)", EnvVars: env("max-line-bytes")},
			&cli.StringFlag{Name: "min-event-time", Usage: "lines with an event time before this stay quarantined (RFC 3339 or a date, UTC)", EnvVars: env("min-event-time")},
			&cli.StringFlag{Name: "format", Usage: "read the quarantined lines as ndjson or csv (default: the format the lake remembers, else ndjson)", EnvVars: env("format")},
			&cli.StringFlag{Name: "csv-header", Usage: "with CSV: the header line for lines whose file's header is neither in quarantine nor in the file (gone, rewritten, an S3 object)", EnvVars: env("csv-header")},
			&cli.BoolFlag{Name: "dry-run", Usage: "say what would move and what would stay, by reason; change nothing", EnvVars: env("dry-run")},
		),
		Action: runRequeue,
	}
}

// runRequeue is the action of `tidemark requeue`.
func runRequeue(c *cli.Context) error {
	dc, err := decoderConfig(c)
	if err != nil {
		return err
	}
	if dc.MaxLineBytes < 1 {
		return fmt.Errorf("--max-line-bytes must be at least 1, got %d", dc.MaxLineBytes)
	}
	lk, err := openLake(c, c.Bool("dry-run"))
	if err != nil {
		return err
	}
	dc.Format = c.String("format")
	cfg := requeue.Config{Decoder: dc, DryRun: c.Bool("dry-run")}
	if c.IsSet("csv-header") {
		cfg.CSVHeader = []byte(c.String("csv-header"))
	}
	rep, err := requeue.Run(c.Context, lk, cfg)
	if err != nil {
		return err
	}
	printRequeue(c.App.Writer, rep)
	return nil
}

// printRequeue writes the run's report: what moved (or would), by the
// reason the line was quarantined for, and what stays, by the reason it
// still fails for.
func printRequeue(w io.Writer, r *requeue.Report) {
	if r.Finished > 0 {
		fmt.Fprintf(w, "completed %d interrupted requeue run(s) first\n", r.Finished)
	}
	verb := "moved"
	if r.DryRun {
		verb = "would move"
	}
	fmt.Fprintf(w, "quarantine rows read %d = %s %d + stay %d\n", r.Read, verb, r.MovedTotal(), r.StayedTotal())
	fmt.Fprintf(w, "  %s to raw_events (status late):%s\n", verb, byReason(r.Moved))
	fmt.Fprintf(w, "  stay in quarantine:%s\n", byReason(r.Stayed))
	if !r.DryRun && r.MovedTotal() > 0 {
		fmt.Fprintln(w, "run `tidemark reconcile` to correct the windows the moved rows belong to")
	}
}

func byReason(m map[tidemark.Reason]int64) string {
	if len(m) == 0 {
		return " none"
	}
	var reasons []string
	for r := range m {
		reasons = append(reasons, string(r))
	}
	slices.Sort(reasons)
	var b strings.Builder
	for _, r := range reasons {
		fmt.Fprintf(&b, " %s %d", r, m[tidemark.Reason(r)])
	}
	return b.String()
}
