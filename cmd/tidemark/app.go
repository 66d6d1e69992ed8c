package main

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime/debug"
	"runtime/pprof"
	"runtime/trace"
	"strings"

	"github.com/urfave/cli/v2"

	"tidemark"
)

// newApp builds the command tree. Actions return errors and never call
// os.Exit, so tests can run the app in-process.
func newApp() *cli.App {
	return withUsageErrors(&cli.App{
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
			requeueCommand(),
			checkpointCommand(),
		}),
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "cpuprofile", Usage: "write a CPU profile (pprof) of the run to this file", EnvVars: env("cpuprofile")},
			&cli.StringFlag{Name: "trace", Usage: "write an execution trace (go tool trace) of the run to this file", EnvVars: env("trace")},
			// Kept so that command lines that gave it still run; hidden
			// from help and the CLI reference.
			&cli.StringFlag{Name: "huge-pages", Hidden: true, Usage: "no effect: tidemark no longer advises huge pages (the kernel's THP mode decides)"},
		},
		Before:         start,
		After:          stopProfile,
		Writer:         os.Stdout,
		ErrWriter:      os.Stderr,
		ExitErrHandler: func(*cli.Context, error) {}, // main owns the exit code
	})
}

// gcPercent is the GC's setting (GOGC) a process runs with when GOGC is
// not set: the heap grows to 1.7 times what is live before a collection,
// not twice. On the 1M-event bench it took peak RSS from 206 to 183 MiB
// (1,000 keys) and 227 to 202 MiB (100,000 keys), in the same or less time
// (0.725 / 0.70 s, 1.29 / 1.18 s; 50 saved more memory, 167 MiB, but
// collects a large state twice as often as the default).
const gcPercent = 70

// start readies the process for any command: the GC's setting and memory
// limit (memory.go), then the profiles asked for.
func start(c *cli.Context) error {
	if _, set := os.LookupEnv("GOGC"); !set {
		debug.SetGCPercent(gcPercent)
	}
	startMemory()
	return startProfile(c)
}

// startProfile starts the --cpuprofile CPU profile and the --trace
// execution trace, if asked for.
func startProfile(c *cli.Context) error {
	c.App.Metadata = map[string]any{}
	for _, p := range []struct {
		flag  string
		start func(io.Writer) error
	}{{"cpuprofile", pprof.StartCPUProfile}, {"trace", trace.Start}} {
		path := c.String(p.flag)
		if path == "" {
			continue
		}
		f, err := os.Create(path)
		if err != nil {
			return fmt.Errorf("--%s: %w", p.flag, err)
		}
		if err := p.start(f); err != nil {
			f.Close()
			return fmt.Errorf("--%s: %w", p.flag, err)
		}
		c.App.Metadata[p.flag] = f
	}
	return nil
}

// stopProfile ends what startProfile started.
func stopProfile(c *cli.Context) error {
	var errs []error
	if f, ok := c.App.Metadata["cpuprofile"].(*os.File); ok {
		pprof.StopCPUProfile()
		errs = append(errs, f.Close())
	}
	if f, ok := c.App.Metadata["trace"].(*os.File); ok {
		trace.Stop()
		errs = append(errs, f.Close())
	}
	return errors.Join(errs...)
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
