package main

import (
	"testing"
	"time"

	"tidemark"
	"tidemark/stream"
	"tidemark/stream/engine"
)

// TestStreamConfigErrorsNameFlags: what stream.RunnerConfig.Validate
// refuses (a tidemark.ConfigError naming fields) reads, from `tidemark
// stream`, with the flags' names, word for word as before the runner
// stopped naming flags.
func TestStreamConfigErrorsNameFlags(t *testing.T) {
	good := stream.RunnerConfig{Sources: []string{"in"}, Engine: engine.Config{Window: tidemark.WindowSpec{Size: 60_000_000}}}
	sessions := stream.RunnerConfig{Sources: []string{"in"}, SessionGap: 5 * time.Minute}
	tests := []struct {
		base stream.RunnerConfig
		edit func(*stream.RunnerConfig)
		want string
	}{
		{good, func(c *stream.RunnerConfig) { c.Sources = nil }, "--source is required: a directory or s3://bucket/prefix"},
		{good, func(c *stream.RunnerConfig) { c.Engine.Window = tidemark.WindowSpec{} }, "--window is required, e.g. --window 10m"},
		{good, func(c *stream.RunnerConfig) { c.Engine.Lateness = -time.Second }, "--lateness must not be negative, got -1s"},
		{good, func(c *stream.RunnerConfig) { c.Engine.IdleTimeout = -time.Second }, "--idle-timeout must not be negative, got -1s"},
		{good, func(c *stream.RunnerConfig) { c.MaxBatchRows = -1 }, "--max-batch-rows must be at least 1, got -1"},
		{good, func(c *stream.RunnerConfig) { c.Trigger = -time.Second }, "--trigger must not be negative, got -1s"},
		{good, func(c *stream.RunnerConfig) { c.Maintenance.AutoCompact.MinFiles = 1 }, "--auto-compact-min-files must be at least 2, got 1"},
		{good, func(c *stream.RunnerConfig) { c.Maintenance.AutoCompact.TargetFileBytes = -1 }, "--auto-compact-target-bytes must not be negative, got -1"},
		{good, func(c *stream.RunnerConfig) { c.Drain = true }, "--drain needs --once: a continuous stream never drains"},
		{good, func(c *stream.RunnerConfig) { c.Engine.SourceLateness = map[string]time.Duration{"nope": time.Second} }, `--source-lateness: "nope" is not one of the --source values ["in"]`},
		{sessions, func(c *stream.RunnerConfig) { c.Engine.Window.Slide = 1 }, "--session-gap replaces --window and --slide: a session's length is set by its events and the gap; leave them out"},
		{sessions, func(c *stream.RunnerConfig) { c.Engine.OutputMode = engine.Update }, "--session-gap supports only --output-mode append: a session is emitted once, when it closes"},
		{sessions, func(c *stream.RunnerConfig) { c.State.Store = stream.StatePebble }, "--session-gap keeps its open sessions in memory: --state-store pebble is not supported with it"},
		{sessions, func(c *stream.RunnerConfig) { c.SessionGap = -time.Second }, "--session-gap: stream config: session gap must be positive, got -1s"},
		{good, func(c *stream.RunnerConfig) { c.State.Dir = "state" }, "--state-dir needs --state-store pebble"},
		{good, func(c *stream.RunnerConfig) { c.State.Store = "disk" }, `unknown --state-store "disk" (memory or pebble)`},
	}
	for _, tc := range tests {
		cfg := tc.base
		tc.edit(&cfg)
		err := cfg.Validate()
		if err == nil {
			t.Fatalf("%q: the config was accepted", tc.want)
		}
		if got := flagError(err, streamFlags).Error(); got != tc.want {
			t.Errorf("got %q\nwant %q", got, tc.want)
		}
	}
}
