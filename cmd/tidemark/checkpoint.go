package main

import (
	"encoding/json"
	"fmt"
	"io"
	"path"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v2"

	"tidemark"
	"tidemark/ingest"
	"tidemark/lake/store"
	"tidemark/stream"
)

func checkpointCommand() *cli.Command {
	return &cli.Command{
		Name:  "checkpoint",
		Usage: "show where a stream stands: its last batch, watermark, sources and files, open windows",
		Description: "Reads a stream's checkpoint (local or S3) without taking its lock, so it works while\n" +
			"the stream runs, after it stopped and after a crash: the stream id, the last committed\n" +
			"batch and when it was read, a batch logged but not committed (replayed on restart), the\n" +
			"watermark, each source's max event time and files with their positions, and the open state.",
		Flags: append(lakeFlags(),
			&cli.StringFlag{Name: "name", Value: "stream", Usage: "the stream's --name", EnvVars: env("name")},
			&cli.StringFlag{Name: "checkpoint", Usage: "the stream's --checkpoint (default: <lake>/_checkpoints/<name>)", EnvVars: env("checkpoint")},
			&cli.StringFlag{Name: "format", Value: "text", Usage: "text or json", EnvVars: env("format")},
		),
		Action: runCheckpoint,
	}
}

// checkpointReport is what `tidemark checkpoint --format json` prints.
type checkpointReport struct {
	Name string `json:"name"`
	stream.Status
}

// runCheckpoint is the action of `tidemark checkpoint`.
func runCheckpoint(c *cli.Context) error {
	format := c.String("format")
	if format != "text" && format != "json" {
		return fmt.Errorf("--format %q: want text or json", format)
	}
	loc, name := c.String("checkpoint"), c.String("name")
	if loc == "" {
		if err := lakeExists(c.String("lake")); err != nil {
			return err
		}
		loc = stream.CheckpointLocation(c.String("lake"), name)
	} else if !c.IsSet("name") {
		name = path.Base(strings.TrimSuffix(loc, "/"))
	}
	if err := lakeExists(loc); err != nil { // a local directory store would be created
		return fmt.Errorf("no stream checkpoint at %s (is --name or --checkpoint right?)", loc)
	}
	st, err := store.Open(c.Context, loc, store.S3Config{Endpoint: c.String("s3-endpoint"), SkipProbe: true})
	if err != nil {
		return fmt.Errorf("open checkpoint %s: %w", loc, err)
	}
	status, err := stream.Inspect(c.Context, st)
	if err != nil {
		return err
	}
	rep := checkpointReport{Name: name, Status: status}
	if format == "json" {
		enc := json.NewEncoder(c.App.Writer)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	return writeCheckpointText(c.App.Writer, rep, time.Now())
}

// running says whether a stream holds the checkpoint's lock.
func running(h stream.Holder) string {
	switch {
	case !h.Known:
		return "unknown (cannot see the lock without taking it here)"
	case !h.Held:
		return "no"
	}
	s := "yes"
	if h.PID > 0 {
		s += fmt.Sprintf(", pid %d", h.PID)
	}
	if h.Host != "" {
		s += " on " + h.Host
	}
	if h.Expires != nil {
		s += ", lease until " + tidemark.FormatTime(h.Expires.UnixMicro())
	}
	return s
}

// writeCheckpointText prints the status for a person.
func writeCheckpointText(w io.Writer, r checkpointReport, now time.Time) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	ago := func(t time.Time) string {
		if t.IsZero() {
			return "unknown"
		}
		return fmt.Sprintf("%s (%s ago)", tidemark.FormatTime(t.UnixMicro()), now.Sub(t).Round(time.Second))
	}
	opt := func(t *time.Time) string {
		if t == nil {
			return "none yet"
		}
		return tidemark.FormatTime(t.UnixMicro())
	}
	fmt.Fprintf(tw, "stream\t%s (id %s)\n", r.Name, r.StreamID)
	fmt.Fprintf(tw, "checkpoint\t%s\n", r.Checkpoint)
	fmt.Fprintf(tw, "running\t%s\n", running(r.Lock))
	if b := r.Committed; b != nil {
		kind := ""
		if b.Drain {
			kind = ", the --drain batch"
		}
		fmt.Fprintf(tw, "last committed\tbatch %d%s, read at %s\n", b.BatchID, kind, ago(b.ReadTime))
	} else {
		fmt.Fprintf(tw, "last committed\tnone yet\n")
	}
	if p := r.Pending; p != nil {
		why := "in flight if the stream runs, else interrupted: a restart replays it"
		switch {
		case r.Lock.Known && r.Lock.Held:
			why = "in flight"
		case r.Lock.Known:
			why = "interrupted (the stream stopped or crashed): a restart replays it"
		}
		fmt.Fprintf(tw, "pending\tbatch %d (%d lines, read at %s) logged but not committed: %s\n",
			p.BatchID, p.Rows, tidemark.FormatTime(p.ReadTime.UnixMicro()), why)
	}
	if r.HeldBy != "" {
		fmt.Fprintf(tw, "watermark\t%s (source %s holds it)\n", opt(r.Watermark), r.HeldBy)
	} else {
		fmt.Fprintf(tw, "watermark\t%s\n", opt(r.Watermark))
	}
	state := fmt.Sprintf("%d open windows, %d (window, key) rows, ~%s in memory, %s checkpointed",
		r.OpenWindows, r.StateRows, iec(float64(r.StateBytes)), iec(float64(r.EncodedStateBytes)))
	if r.OpenFrom != nil {
		state += fmt.Sprintf(", from %s to %s", opt(r.OpenFrom), opt(r.OpenTo))
	}
	fmt.Fprintf(tw, "state\t%s\n", state)
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, s := range r.Sources {
		fmt.Fprintf(w, "\nsource %s\n", s.Name)
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintf(tw, "  max event time\t%s\n", opt(s.MaxEventTime))
		fmt.Fprintf(tw, "  watermark\t%s\n", opt(s.Watermark))
		if s.LastSeen != nil {
			fmt.Fprintf(tw, "  last line read\t%s\n", ago(*s.LastSeen))
		}
		if h := s.HeldBy; h != nil {
			at := ""
			if h.EventTime != nil {
				at = " at " + opt(h.EventTime)
			}
			fmt.Fprintf(tw, "  held back by\t%s%s (%s)\n", h.Path, at, h.Advice(now))
		}
		if len(s.Files) == 0 {
			fmt.Fprintf(tw, "  files\tnone\n")
		}
		for _, f := range s.Files {
			state := "" // a plain file can always grow: read up to the offset
			if f.Finished {
				state = "finished"
			}
			fmt.Fprintf(tw, "  %s\toffset %d\t%s\n", f.Path, f.Offset, state)
		}
		writeUnreadable(tw, s.Unreadable)
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	return nil
}

// writeUnreadable prints the paths a source skipped because it could not
// read them (retried with backoff).
func writeUnreadable(w io.Writer, list []ingest.Unreadable) {
	if len(list) == 0 {
		return
	}
	fmt.Fprintf(w, "  unreadable\t%d path(s), skipped and retried with backoff\n", len(list))
	for _, u := range list {
		kind := ""
		if u.Dir {
			kind = " (directory)"
		}
		fmt.Fprintf(w, "  %s%s\t%s\tsince %s, %d tries\n", u.Path, kind, u.Error,
			tidemark.FormatTime(u.Since), u.Tries)
	}
}
