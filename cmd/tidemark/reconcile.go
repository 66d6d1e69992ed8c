package main

import (
	"fmt"
	"os"
	"time"

	"github.com/schollz/progressbar/v3"
	"github.com/urfave/cli/v2"
	"golang.org/x/term"

	"tidemark/lake/store"
	"tidemark/reconcile"
)

func reconcileCommand() *cli.Command {
	return &cli.Command{
		Name:  "reconcile",
		Usage: "recompute the windows late data touched and correct them in window_results",
		Description: "Finds the windows holding late rows committed since the previous run (plus, with\n" +
			"--since or --from/--to, every closed window in that range), recomputes them exactly from\n" +
			"raw_events and upserts the ones that differ (origin=batch, revision+1), logging each in\n" +
			"reconcile_log. On a session lake (--session-gap) it recomputes the whole sessions around\n" +
			"those late rows and replaces every stored session an exact one covers, merging the ones a\n" +
			"late row bridged, with a reconcile_log row per replaced session (replaced_start,\n" +
			"replaced_end); sessions still open at the stream's watermark are left to the stream.\n" +
			"Exit status: 0 done, 1 failed, 3 another run holds the lock.",
		Flags: append(append(lakeFlags(),
			&cli.DurationFlag{Name: "since", Usage: "also check every closed window that started in the last D, e.g. 72h", EnvVars: env("since")},
			&cli.StringFlag{Name: "from", Usage: "also check every closed window starting at or after this time (RFC 3339 or YYYY-MM-DD, UTC); with --to", EnvVars: env("from")},
			&cli.StringFlag{Name: "to", Usage: "... and before this time", EnvVars: env("to")},
			&cli.BoolFlag{Name: "dry-run", Usage: "report the corrections without writing anything", EnvVars: env("dry-run")},
			&cli.StringFlag{Name: "format", Value: "text", Usage: "report format: text or json", EnvVars: env("format")},
			shardIdleFlag(),
			&cli.DurationFlag{Name: "lock-ttl", Value: time.Hour, Usage: "a lock older than this is stale and taken over", EnvVars: env("lock-ttl")},
		), loggingFlags()...),
		Action: runReconcile,
	}
}

func reconcileConfig(c *cli.Context) (reconcile.Config, error) {
	cfg := reconcile.Config{
		Lake:    c.String("lake"),
		S3:      store.S3Config{Endpoint: c.String("s3-endpoint")},
		Since:   c.Duration("since"),
		DryRun:  c.Bool("dry-run"),
		LockTTL: c.Duration("lock-ttl"),
	}
	var err error
	if cfg.ShardIdle, err = shardIdle(c); err != nil {
		return cfg, err
	}
	if cfg.From, err = parseFlagTime(c, "from"); err != nil {
		return cfg, err
	}
	if cfg.To, err = parseFlagTime(c, "to"); err != nil {
		return cfg, err
	}
	if f := c.String("format"); f != "text" && f != "json" {
		return cfg, fmt.Errorf("--format %q: want text or json", f)
	}
	return cfg, nil
}

// reconcileFlags names the reconcile.Config fields its config errors name
// by the flags that set them.
var reconcileFlags = map[string]string{
	"Since": "--since",
	"From":  "--from",
	"To":    "--to",
}

// parseFlagTime reads an optional --from/--to as reconcile.Config wants it
// (the zero time when unset).
func parseFlagTime(c *cli.Context, name string) (time.Time, error) {
	s := c.String(name)
	if s == "" {
		return time.Time{}, nil
	}
	us, err := parseTime(name, s)
	if err != nil {
		return time.Time{}, err
	}
	return time.UnixMicro(us).UTC(), nil
}

// runReconcile is the action of `tidemark reconcile`.
func runReconcile(c *cli.Context) error {
	cfg, err := reconcileConfig(c)
	if err != nil {
		return err
	}
	if err := cfg.Validate(); err != nil {
		return fmt.Errorf("reconcile: %w", flagError(err, reconcileFlags))
	}
	if cfg.Logger, err = newLogger(c, c.App.ErrWriter); err != nil {
		return err
	}
	if f, ok := c.App.ErrWriter.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		bar := progressbar.NewOptions(-1, progressbar.OptionSetWriter(f), progressbar.OptionSetDescription("reconcile: window dates"),
			progressbar.OptionShowCount(), progressbar.OptionClearOnFinish())
		cfg.Progress = func(done, total int) {
			bar.ChangeMax(total)
			_ = bar.Set(done)
		}
		defer bar.Finish()
	}
	if err := lakeExists(cfg.Lake); err != nil {
		return err
	}
	rep, err := reconcile.Run(c.Context, cfg)
	if err != nil {
		return err
	}
	if c.String("format") == "json" {
		return rep.WriteJSON(c.App.Writer)
	}
	return rep.WriteText(c.App.Writer)
}
