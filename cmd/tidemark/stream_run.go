package main

import (
	"fmt"
	"io"
	"os"

	"github.com/urfave/cli/v2"

	"tidemark/stream"
)

// runStream is the action of `tidemark stream`.
func runStream(c *cli.Context) error {
	cfg, err := streamConfig(c)
	if err != nil {
		return err
	}
	logger, err := newLogger(c, c.App.ErrWriter)
	if err != nil {
		return err
	}
	cfg.Logger = logger
	if c.Bool("print") {
		cfg.Print = c.App.Writer
	}
	cfg.Progress = c.App.ErrWriter
	if p := c.String("progress"); p != "" {
		f, err := os.OpenFile(p, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return fmt.Errorf("--progress: %w", err)
		}
		defer f.Close()
		cfg.Progress = f
	}
	sum, err := stream.Run(c.Context, cfg)
	if sum != nil && (cfg.Once || err == nil) {
		printAccounting(c.App.ErrWriter, sum)
	}
	return err
}

// printAccounting writes the row-accounting identity of the run.
func printAccounting(w io.Writer, s *stream.Summary) {
	fmt.Fprintln(w, s.Accounting())
}
