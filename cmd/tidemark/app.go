package main

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime/pprof"
	"strings"

	"github.com/urfave/cli/v2"

	"tidemark"
)

// newApp builds the command tree. Actions return errors and never call
// os.Exit, so tests can run the app in-process.
func newApp() *cli.App {
	return &cli.App{
		Name:    "tidemark",
		Usage:   "event-time windows from a stream, made exact by a nightly batch over a Delta Lake",
		Version: tidemark.Version,
		Commands: withLocationCheck([]*cli.Command{
			streamCommand(),
			reconcileCommand(),
			latenessCommand(),
			recomputeCommand(),
			sessionsCommand(),
			windowsCommand(),
			tablesCommand(),
			shardsCommand(),
			compactCommand(),
			vacuumCommand(),
			repairCommand(),
			checkpointCommand(),
		}),
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "cpuprofile", Usage: "write a CPU profile (pprof) of the run to this file", EnvVars: env("cpuprofile")},
		},
		Before:    startProfile,
		After:     stopProfile,
		Writer:    os.Stdout,
		ErrWriter: os.Stderr,
		OnUsageError: func(c *cli.Context, err error, _ bool) error {
			return fmt.Errorf("%w (see %s --help)", err, c.Command.HelpName)
		},
		ExitErrHandler: func(*cli.Context, error) {}, // main owns the exit code
	}
}

// startProfile starts the --cpuprofile CPU profile, if asked for.
func startProfile(c *cli.Context) error {
	path := c.String("cpuprofile")
	if path == "" {
		return nil
	}
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("--cpuprofile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return fmt.Errorf("--cpuprofile: %w", err)
	}
	c.App.Metadata = map[string]any{"cpuprofile": f}
	return nil
}

// stopProfile ends the profile started by startProfile.
func stopProfile(c *cli.Context) error {
	f, ok := c.App.Metadata["cpuprofile"].(*os.File)
	if !ok {
		return nil
	}
	pprof.StopCPUProfile()
	return f.Close()
}

// env names the environment variable that can set a flag: TIDEMARK_<FLAG>.
func env(flag string) []string {
	return []string{"TIDEMARK_" + strings.ToUpper(strings.ReplaceAll(flag, "-", "_"))}
}

// loggingFlags are shared by the long-running commands.
func loggingFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "log-format", Value: "text", Usage: "log format: text or json", EnvVars: env("log-format")},
		&cli.StringFlag{Name: "log-level", Value: "info", Usage: "log level: debug, info, warn or error", EnvVars: env("log-level")},
	}
}

// newLogger builds the slog logger the flags ask for, writing to w.
func newLogger(c *cli.Context, w io.Writer) (*slog.Logger, error) {
	var level slog.Level
	if err := level.UnmarshalText([]byte(c.String("log-level"))); err != nil {
		return nil, fmt.Errorf("--log-level %q: want debug, info, warn or error", c.String("log-level"))
	}
	opts := &slog.HandlerOptions{Level: level}
	switch c.String("log-format") {
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	default:
		return nil, fmt.Errorf("--log-format %q: want text or json", c.String("log-format"))
	}
}
