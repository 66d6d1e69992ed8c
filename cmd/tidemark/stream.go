package main

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"tidemark"
	"tidemark/ingest"
	"tidemark/lake"
	"tidemark/lake/store"
	"tidemark/stream"
	"tidemark/stream/engine"
)

func streamCommand() *cli.Command {
	return &cli.Command{
		Name:  "stream",
		Usage: "compute event-time windows from growing files or an S3 bucket into the lake",
		Description: "Tails every --source, groups events into event-time windows gated by a watermark\n" +
			"(max event time seen minus --lateness), and emits a window when the watermark closes it.\n" +
			"Every line lands in the lake exactly once: raw_events (ok or late) or quarantine.",
		Flags: slices.Concat([]cli.Flag{
			&cli.StringSliceFlag{Name: "source", Usage: "directory (optionally with a glob) or s3://bucket/prefix; repeatable, one watermark input each", EnvVars: env("source")},
			&cli.StringFlag{Name: "format", Value: "ndjson", Usage: "input format: ndjson or csv (with a header line)", EnvVars: env("format")},
			&cli.StringFlag{Name: "time-field", Value: "event_time", Usage: "field holding the event time; a dotted path reads a nested NDJSON field (meta.ts), a literal dotted name goes in backticks", EnvVars: env("time-field")},
			&cli.StringFlag{Name: "time-unit", Value: "s", Usage: "unit of numeric epoch times: s, ms, us or ns", EnvVars: env("time-unit")},
			&cli.StringFlag{Name: "time-layout", Usage: "Go time layout for event times that are not RFC 3339 or epoch numbers", EnvVars: env("time-layout")},
			&cli.BoolFlag{Name: "change-input", Usage: "let the lake remember this run's --format, --time-field, --time-unit and --time-layout instead of refusing ones other than it remembers", EnvVars: env("change-input")},
			&cli.StringSliceFlag{Name: "key", Usage: "grouping field, any name; repeatable (a row without it groups under null). A dotted path reads a nested NDJSON field (request.path, column path); name=path names the column; a literal dotted name goes in backticks", EnvVars: env("key")},
			&cli.StringFlag{Name: "value", Usage: "numeric field to aggregate with sum, min and max; a dotted path reads a nested NDJSON field", EnvVars: env("value")},
			&cli.StringSliceFlag{Name: "agg", Usage: "an aggregate per window and key, with a column of its own in window_results; repeatable: avg(f), sum(f), min(f), max(f), pNN(f) (a percentile: p95, p99.9; live: exact up to 16 values, then a DDSketch within 1% relative error of a value near the rank) or count_distinct(f) (live: exact up to 16, then ~0.8% standard error); f is a field as --key takes it (request.latency_ms); exact after reconcile. A lake keeps the list it was made with", EnvVars: env("agg")},
			&cli.StringFlag{Name: "arrival-field", Usage: "field holding the time the event was received (default: when the line is read)", EnvVars: env("arrival-field")},
			&cli.DurationFlag{Name: "window", Usage: "window length, e.g. 10m (required)", EnvVars: env("window")},
			&cli.DurationFlag{Name: "slide", Usage: "distance between window starts for sliding windows (default: the window, tumbling)", EnvVars: env("slide")},
			&cli.DurationFlag{Name: "session-gap", Usage: "session windows instead: per key, a session ends when no event comes within this gap of the last (replaces --window; excludes --slide)", EnvVars: env("session-gap")},
			&cli.DurationFlag{Name: "lateness", Usage: "lateness budget: watermark = max event time seen - lateness", EnvVars: env("lateness")},
			&cli.StringSliceFlag{Name: "source-lateness", Usage: "a budget of its own for one source: SOURCE=DURATION, SOURCE as given to --source (e.g. logs/mobile=30m); repeatable", EnvVars: env("source-lateness")},
			&cli.StringFlag{Name: "min-event-time", Usage: "time sanity floor: quarantine events before this time as too_old (RFC 3339 or a date, UTC), e.g. 2020-01-01", EnvVars: env("min-event-time")},
			&cli.StringFlag{Name: "late-rule", Value: "window", Usage: "window: drop a row from windows already closed (Spark, Flink); event: drop rows with event time < watermark", EnvVars: env("late-rule")},
			&cli.StringFlag{Name: "output-mode", Value: "append", Usage: "append: emit each window once, when it closes; update: also emit changed windows every batch", EnvVars: env("output-mode")},
			&cli.StringFlag{Name: "watermark-policy", Value: "min", Usage: "combine per-source watermarks with min or max", EnvVars: env("watermark-policy")},
			&cli.DurationFlag{Name: "idle-timeout", Usage: "a source silent this long stops holding back the watermark (0: never)", EnvVars: env("idle-timeout")},
			&cli.DurationFlag{Name: "stall-after", Value: stream.DefaultStallAfter, Usage: "once the watermark has not moved for this long (by the batches' read time) although lines arrive, name the file or source holding it, and the --idle-timeout that would release it, on the progress line (\"stalled\"), the status page and in a log warning (a positive duration)", EnvVars: env("stall-after"), Action: positive("stall-after")},
			&cli.DurationFlag{Name: "max-future", Value: time.Hour, Usage: "quarantine events more than this far ahead of their arrival (a positive duration; 0 and negative values are refused)", EnvVars: env("max-future")},
			&cli.IntFlag{Name: "max-line-bytes", Value: 1 << 20, Usage: "quarantine longer lines as line_too_long", EnvVars: env("max-line-bytes")},
			&cli.IntFlag{Name: "max-batch-rows", Value: stream.DefaultMaxBatchRows, Usage: "at most this many input lines per micro-batch (1: per-event processing)", EnvVars: env("max-batch-rows"), Action: atLeastOne("max-batch-rows")},
			&cli.DurationFlag{Name: "trigger", Value: stream.DefaultTrigger, Usage: "a following stream gathers lines for up to this long into one micro-batch, and commits at once when a line closes a window (0: a batch as soon as data arrives, the lowest latency at one commit per handful of lines; see docs/lake-health.md)", EnvVars: env("trigger")},
			&cli.BoolFlag{Name: "auto-compact", Value: true, Usage: "on by default: merge the small files of each partition in the background (a dataChange=false commit; readers see the same rows); --auto-compact=false keeps every batch's files", EnvVars: env("auto-compact")},
			&cli.IntFlag{Name: "auto-compact-min-files", Value: lake.DefaultAutoCompactMinFiles, Usage: "merge a partition's small files of one size tier once it has this many (at least 2)", EnvVars: env("auto-compact-min-files"), Action: atLeast("auto-compact-min-files", 2)},
			&cli.Int64Flag{Name: "auto-compact-target-bytes", Value: lake.DefaultTargetFileBytes, Usage: "merged files grow up to about this size; files of half of it are left alone", EnvVars: env("auto-compact-target-bytes")},
			&cli.BoolFlag{Name: "auto-vacuum", Value: true, Usage: "on by default: vacuum the lake once a day (between all its streams) with the safe 168h retention; --auto-vacuum=false leaves it to tidemark vacuum", EnvVars: env("auto-vacuum")},
			&cli.BoolFlag{Name: "once", Usage: "process everything available now, then exit (open windows stay in the checkpoint)", EnvVars: env("once")},
			&cli.BoolFlag{Name: "drain", Usage: "with --once: then close every open window (a backfill)", EnvVars: env("drain")},
			&cli.BoolFlag{Name: "print", Usage: "print each emitted window as a JSON line on stdout", EnvVars: env("print")},
			&cli.BoolFlag{Name: "no-first-batch-check", Usage: "commit a new stream's first batch whatever it holds (by default a first batch that shows a wrong --time-field, --time-unit, --format, --key or --value stops the stream before it writes anything, with the fix)", EnvVars: env("no-first-batch-check")},
		}, lakeFlags(), []cli.Flag{ // the shared --lake/--s3-endpoint, kept at their place in --help
			&cli.StringFlag{Name: "checkpoint", Usage: "checkpoint location (default: <lake>/_checkpoints/<name>)", EnvVars: env("checkpoint")},
			&cli.StringFlag{Name: "name", Value: "stream", Usage: "stream name, unique in the lake: names the default checkpoint and this stream in the shards command and on the status page; a second stream with a name the lake has for another checkpoint is refused (the lake's txn app id is not the name but the stream id, a UUID in the checkpoint's metadata.json)", EnvVars: env("name")},
			&cli.BoolFlag{Name: "take-name", Usage: "claim --name in the lake although another checkpoint holds it: once after moving a checkpoint, or to replace a stream whose checkpoint is gone (input it read is read again)", EnvVars: env("take-name")},
			&cli.StringFlag{Name: "progress", Usage: "write one JSON progress line per batch to this file (default: stderr)", EnvVars: env("progress")},
			&cli.StringFlag{Name: "state-store", Value: "memory", Usage: "where open windows live: memory, or pebble (a local Pebble database, for state larger than memory; the checkpoint stays the record)", EnvVars: env("state-store")},
			&cli.StringFlag{Name: "state-dir", Usage: "with --state-store pebble: the database's local directory (default: <user cache dir>/tidemark/state/<stream id>)", EnvVars: env("state-dir")},
			&cli.StringFlag{Name: "memory-limit", Value: "auto", Usage: "soft memory limit of the Go GC: auto (320MiB plus twice the open state, raised as it grows, never above GOMEMLIMIT or the container's memory.max less a tenth), off (Go's default or GOMEMLIMIT), or a size such as 512MiB", EnvVars: env("memory-limit")},
			&cli.StringFlag{Name: "metrics-addr", Usage: "serve the status page (/) and Prometheus metrics (/metrics) on this address; \"\" or off: none (default: a following stream serves on " + stream.DefaultMetricsAddr + ", or a free loopback port if that is taken, and logs where; --once: off)", EnvVars: env("metrics-addr")},
			&cli.BoolFlag{Name: "follow-symlinks", Usage: "follow symbolic links of local sources wherever they lead (default: only links that stay inside the source directory)", EnvVars: env("follow-symlinks")},
			shardIdleFlag(),
			&cli.StringFlag{Name: "payload-codec", Usage: "Parquet codec of the lake's payload column: zstd, snappy or lz4_raw (default: the lake's, snappy for a new lake)", EnvVars: env("payload-codec")},
			&cli.BoolFlag{Name: "poll", Usage: "find new data by periodic rescans only (no fsnotify), e.g. on network filesystems", EnvVars: env("poll")},
			&cli.DurationFlag{Name: "rescan-interval", Value: 10 * time.Second, Usage: "full rescan of local sources (a backstop for lost fsnotify events), or the S3 polling interval", EnvVars: env("rescan-interval")},
		}, loggingFlags()),
		Action: runStream,
	}
}

// streamConfig turns flags into the runner's Config: it parses what a flag
// spells (durations, names, SOURCE=DURATION); stream.Run validates the rest.
func streamConfig(c *cli.Context) (stream.RunnerConfig, error) {
	var cfg stream.RunnerConfig
	cfg.Sources = c.StringSlice("source")
	var spec tidemark.WindowSpec
	if c.IsSet("session-gap") {
		if c.IsSet("window") || c.IsSet("slide") {
			return cfg, fmt.Errorf("--session-gap replaces --window and --slide: a session's length is set by its events and the gap; leave them out")
		}
		cfg.SessionGap = c.Duration("session-gap")
	} else if c.Duration("window") != 0 { // 0: unset, which Run refuses as missing
		var err error
		if spec, err = tidemark.NewWindowSpec(c.Duration("window"), c.Duration("slide")); err != nil {
			return cfg, fmt.Errorf("--window/--slide: %w", err)
		}
	}
	lateRule, err := engine.ParseLateRule(c.String("late-rule"))
	if err != nil {
		return cfg, fmt.Errorf("--late-rule: %w", err)
	}
	mode, err := engine.ParseOutputMode(c.String("output-mode"))
	if err != nil {
		return cfg, fmt.Errorf("--output-mode: %w", err)
	}
	policy, err := engine.ParsePolicy(c.String("watermark-policy"))
	if err != nil {
		return cfg, fmt.Errorf("--watermark-policy: %w", err)
	}
	if s := c.String("payload-codec"); s != "" {
		if cfg.PayloadCodec, err = lake.ParsePayloadCodec(s); err != nil {
			return cfg, fmt.Errorf("--payload-codec: %w", err)
		}
	}
	if cfg.ShardIdle, err = shardIdle(c); err != nil {
		return cfg, err
	}
	perSource, err := sourceLateness(c.StringSlice("source-lateness"))
	if err != nil {
		return cfg, err
	}
	cfg.Engine = engine.Config{
		Window:         spec,
		SourceLateness: perSource,
		Lateness:       c.Duration("lateness"),
		LateRule:       lateRule,
		OutputMode:     mode,
		Policy:         policy,
		IdleTimeout:    c.Duration("idle-timeout"),
	}
	if cfg.Engine.Aggs, err = tidemark.ParseAggs(c.StringSlice("agg")); err != nil {
		return cfg, err
	}
	if cfg.Decoder, err = decoderConfig(c); err != nil {
		return cfg, err
	}
	cfg.Decoder.Format = c.String("format")
	cfg.Decoder.Keys = c.StringSlice("key")
	cfg.Decoder.ValueField = c.String("value")
	cfg.Lake = c.String("lake")
	cfg.ChangeInput = c.Bool("change-input")
	cfg.S3 = store.S3Config{Endpoint: c.String("s3-endpoint")}
	cfg.Checkpoint = c.String("checkpoint")
	cfg.Name = c.String("name")
	cfg.TakeName = c.Bool("take-name")
	cfg.MaxBatchRows = c.Int("max-batch-rows")
	cfg.Trigger = c.Duration("trigger")
	cfg.Maintenance = stream.Maintenance{
		NoAutoCompact: !c.Bool("auto-compact"),
		AutoCompact:   lake.AutoCompactOptions{MinFiles: c.Int("auto-compact-min-files"), TargetFileBytes: c.Int64("auto-compact-target-bytes")},
		NoVacuum:      !c.Bool("auto-vacuum"),
	}
	cfg.Once = c.Bool("once")
	cfg.Drain = c.Bool("drain")
	cfg.Poll = c.Bool("poll")
	cfg.FollowSymlinks = c.Bool("follow-symlinks")
	cfg.NoFirstBatchCheck = c.Bool("no-first-batch-check")
	cfg.Rescan = c.Duration("rescan-interval")
	cfg.StallAfter = c.Duration("stall-after")
	cfg.MetricsAddr = c.String("metrics-addr")
	switch {
	case cfg.MetricsAddr == "off":
		cfg.MetricsAddr = ""
	case !c.IsSet("metrics-addr") && !cfg.Once:
		cfg.MetricsAddr, cfg.MetricsFallback = stream.DefaultMetricsAddr, true
	}
	if _, err := parseMemoryLimit(c.String("memory-limit")); err != nil {
		return cfg, err
	}
	// The memory limit is the process's, set by runStream (memory.go).
	cfg.State = stream.StateOptions{Store: stream.StateStore(c.String("state-store")), Dir: c.String("state-dir")}
	return cfg, nil
}

// sourceLateness parses the --source-lateness values (SOURCE=DURATION, the
// last "=" splitting, so a path may hold one) into per-source budgets; Run
// checks that each SOURCE is a --source.
func sourceLateness(values []string) (map[string]time.Duration, error) {
	if len(values) == 0 {
		return nil, nil
	}
	out := make(map[string]time.Duration, len(values))
	for _, v := range values {
		i := strings.LastIndexByte(v, '=')
		if i <= 0 {
			return nil, fmt.Errorf("--source-lateness %q: want SOURCE=DURATION, e.g. logs/mobile=30m", v)
		}
		name, ds := v[:i], v[i+1:]
		d, err := time.ParseDuration(ds)
		if err != nil || d < 0 {
			return nil, fmt.Errorf("--source-lateness %q: %q is not a duration >= 0", v, ds)
		}
		if _, dup := out[name]; dup {
			return nil, fmt.Errorf("--source-lateness: source %q given twice", name)
		}
		out[name] = d
	}
	return out, nil
}

// atLeastOne is the Action of an int flag that must be at least 1 where the
// Config's zero value means a default: a given 0 is refused here.
func atLeastOne(name string) func(*cli.Context, int) error { return atLeast(name, 1) }

// atLeast refuses an int flag below lo.
func atLeast(name string, lo int) func(*cli.Context, int) error {
	return func(_ *cli.Context, v int) error {
		if v < lo {
			return fmt.Errorf("--%s must be at least %d, got %d", name, lo, v)
		}
		return nil
	}
}

// positive refuses a duration flag that is zero or negative.
func positive(name string) func(*cli.Context, time.Duration) error {
	return func(_ *cli.Context, v time.Duration) error {
		if v <= 0 {
			return fmt.Errorf("--%s must be positive, got %s", name, v)
		}
		return nil
	}
}

// decoderConfig reads the flags stream and requeue share about how a line
// becomes an event (time field, unit and layout, arrival field, the
// max-future, line-length and min-event-time guards), refusing a
// --max-future that is not positive.
func decoderConfig(c *cli.Context) (ingest.DecoderConfig, error) {
	dc := ingest.DecoderConfig{
		TimeField:    c.String("time-field"),
		TimeUnit:     c.String("time-unit"),
		TimeLayout:   c.String("time-layout"),
		ArrivalField: c.String("arrival-field"),
		MaxFuture:    c.Duration("max-future"),
		MaxLineBytes: c.Int("max-line-bytes"),
	}
	if dc.MaxFuture <= 0 {
		return dc, fmt.Errorf("--max-future %s: want a positive duration, e.g. 1h or 5m (how far an event's time may be ahead of when it was read; there is no way to turn the guard off, since one event stamped 2099 would move the watermark to 2099)", dc.MaxFuture)
	}
	if s := c.String("min-event-time"); s != "" {
		us, err := parseTime("min-event-time", s)
		if err != nil {
			return dc, err
		}
		dc.MinEventTime = time.UnixMicro(us).UTC()
	}
	return dc, nil
}
