package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/urfave/cli/v2"

	"tidemark"
	"tidemark/stream"
)

// runStream is the action of `tidemark stream`.
func runStream(c *cli.Context) (err error) {
	cfg, err := streamConfig(c)
	if err != nil {
		return err
	}
	if err := cfg.Validate(); err != nil {
		return flagError(err, streamFlags)
	}
	// A person at a terminal gets a live display and a table; a machine (stderr
	// not a terminal, or --progress given) gets the JSON lines and the
	// accounting line, byte for byte as before.
	var tty *terminal
	if f, ok := c.App.ErrWriter.(*os.File); ok && c.String("progress") == "" {
		tty = newTerminal(f, cfg.Once)
	}
	logOut := c.App.ErrWriter
	if tty != nil {
		logOut = tty.above(logOut)
	}
	logger, err := newLogger(c, logOut)
	if err != nil {
		return err
	}
	cfg.Logger = logger
	if c.Bool("print") {
		cfg.Print = c.App.Writer
		if f, ok := c.App.Writer.(*os.File); ok && tty != nil && isTerminal(f) {
			cfg.Print = tty.above(f) // the same screen: keep the display under the windows
		}
	}
	cfg.Progress = c.App.ErrWriter
	if tty != nil {
		cfg.Progress = nil
		cfg.OnProgress = tty.observe
		if !cfg.Once {
			stop := tty.startTicker(time.Second)
			defer stop() // runs after the table: tick draws nothing once cleared
		}
	}
	if p := c.String("progress"); p != "" {
		f, oerr := os.OpenFile(p, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o666) // the umask decides, as for every file tidemark creates
		if oerr != nil {
			return fmt.Errorf("--progress: %w", oerr)
		}
		// The progress file is a write path: a failed Close (a lost last
		// line) is reported with the run's own error, not dropped.
		defer func() {
			if cerr := f.Close(); cerr != nil {
				err = errors.Join(err, fmt.Errorf("--progress: %w", cerr))
			}
		}()
		cfg.Progress = f
	}
	limit, err := parseMemoryLimit(c.String("memory-limit"))
	if err != nil {
		return err
	}
	cfg.OnProgress = streamMemory(limit, cfg.OnProgress)
	sum, err := stream.Run(c.Context, cfg)
	var mistake *stream.FirstBatchError
	switch {
	case errors.As(err, &mistake) && tty != nil:
		tty.clear() // nothing was counted: no table, the error on a clean line
	case errors.As(err, &mistake):
	case sum != nil && (cfg.Once || err == nil) && tty != nil:
		tty.finish(c.App.ErrWriter, sum)
	case sum != nil && (cfg.Once || err == nil):
		printAccounting(c.App.ErrWriter, sum)
	case tty != nil:
		tty.clear() // the error goes on a clean line
	}
	return err
}

// printAccounting writes the row-accounting identity of the run.
func printAccounting(w io.Writer, s *stream.Summary) {
	fmt.Fprintln(w, s.Accounting())
}

// streamFlags names the RunnerConfig fields a stream config error names by
// the flags that set them.
var streamFlags = map[string]string{
	"Sources":               "--source",
	"Engine.Window.Size":    "--window",
	"Engine.Window.Slide":   "--slide",
	"Engine.Lateness":       "--lateness",
	"Engine.IdleTimeout":    "--idle-timeout",
	"Engine.SourceLateness": "--source-lateness",
	"Engine.OutputMode":     "--output-mode",
	"MaxBatchRows":          "--max-batch-rows",
	"Trigger":               "--trigger",

	"Maintenance.AutoCompact.MinFiles":        "--auto-compact-min-files",
	"Maintenance.AutoCompact.TargetFileBytes": "--auto-compact-target-bytes",
	"Drain":       "--drain",
	"Once":        "--once",
	"SessionGap":  "--session-gap",
	"State.Store": "--state-store",
	"State.Dir":   "--state-dir",
}

// flagError rephrases a tidemark.ConfigError with the flags' names
// (flags maps its field paths to them); other errors pass through.
func flagError(err error, flags map[string]string) error {
	var ce *tidemark.ConfigError
	if !errors.As(err, &ce) || ce != err {
		return err
	}
	return &flagPhrased{ce.Phrase(func(field string) string {
		if flag, ok := flags[field]; ok {
			return flag
		}
		return field
	}), ce}
}

// flagPhrased is a tidemark.ConfigError in the flags' words.
type flagPhrased struct {
	msg string
	err *tidemark.ConfigError
}

func (e *flagPhrased) Error() string { return e.msg }
func (e *flagPhrased) Unwrap() error { return e.err }
