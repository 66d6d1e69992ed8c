package stream

import (
	"io"
	"log/slog"
	"os"
	"path"
	"slices"
	"strings"
	"time"

	"tidemark"
	"tidemark/ingest"
	"tidemark/lake"
	"tidemark/lake/store"
	"tidemark/stream/engine"
)

// DefaultMaxBatchRows is --max-batch-rows' default: two row groups of a
// raw_events file (32768 rows each). 100,000 before: the same wall time
// on the 1M-event bench (1.17 against 1.195 s, median of 10 alternating
// runs), 202 against 231 MiB of peak RSS.
const DefaultMaxBatchRows = 65536

// RunnerConfig is everything `tidemark stream` needs. The zero value of each
// optional field means the documented default.
type RunnerConfig struct {
	Sources []string             // one watermark input each: directory, glob or s3://bucket/prefix
	Decoder ingest.DecoderConfig // how lines become records
	Engine  engine.Config        // windows, watermark, late rule, output mode
	Lake    string               // directory or s3://bucket/prefix
	S3      store.S3Config       // endpoint and credentials for s3:// lakes and sources
	Name    string               // stream name, unique in the lake (lake.ClaimName); default "stream"
	// TakeName claims Name in the lake even when another checkpoint holds
	// it: a checkpoint moved on purpose, or a stream replaced for good.
	TakeName bool

	Checkpoint   string // default <Lake>/_checkpoints/<Name>
	MaxBatchRows int    // input lines per micro-batch; 0 means DefaultMaxBatchRows, negative is an error
	// Trigger is the longest a following stream gathers lines into one
	// batch: at most one batch per Trigger, but one at once when a line
	// closes a window (trigger.go). 0 (the zero value; the CLI's default
	// is DefaultTrigger) sends a batch as soon as data arrives. Ignored
	// with Once.
	Trigger     time.Duration
	Once        bool          // process what is available now, then return
	Drain       bool          // with Once: then close every open window
	Poll        bool          // local sources: rescans only, no fsnotify
	Rescan      time.Duration // rescan / S3 poll interval; default 10s
	MetricsAddr string        // serve the status page and Prometheus metrics here; "" = off
	// MetricsFallback serves on a free port of MetricsAddr's host when
	// MetricsAddr is in use (the CLI's default address) instead of failing.
	MetricsFallback bool
	// StallAfter is how long (read time) W may stay put while lines arrive
	// before the stream names what holds it (stall.go); 0 = DefaultStallAfter.
	StallAfter time.Duration
	// PayloadCodec compresses the lake's payload column; "" = the lake's
	// recorded codec (lake.Config.PayloadCodec).
	PayloadCodec lake.PayloadCodec
	// State is where the open state lives: memory (default) or a local
	// Pebble database.
	State StateOptions
	// ShardIdle is lake.Config.ShardIdle: when another stream of the lake
	// stops holding merged windows back (0: lake.DefaultShardIdle).
	ShardIdle time.Duration

	// Maintenance is what the stream does in the background for its
	// lake's health: auto compaction and a daily vacuum (maintain.go).
	Maintenance Maintenance

	// SessionGap, when not 0, runs session windows with this gap instead
	// of Engine.Window, which must then be zero (session_runner.go).
	SessionGap time.Duration

	// ChangeInput lets the lake remember this run's input (Decoder's
	// format, time field, unit and layout) instead of refusing a run that
	// reads its lines otherwise than the lake remembers (--change-input).
	ChangeInput bool

	// FollowSymlinks follows every symbolic link of local sources; by
	// default only links resolving inside a source's root are followed.
	FollowSymlinks bool

	// NoFirstBatchCheck turns off the first-batch check of a new stream
	// (firstbatch.go): its first batch is committed whatever it holds.
	NoFirstBatchCheck bool

	// LakeStore and CheckpointStore, when set, are used instead of opening
	// Lake and Checkpoint (a caller with a store of its own; tests that
	// inject write failures).
	LakeStore, CheckpointStore store.Store

	Print    io.Writer        // emitted windows as JSON lines; nil = off
	Progress io.Writer        // one JSON progress line per batch; nil = off
	Logger   *slog.Logger     // nil discards
	Clock    func() time.Time // nil = time.Now

	// OnProgress, if set, is called after each committed batch, on the
	// goroutine that commits (keep it short); the terminal display uses it.
	OnProgress func(Progress)
}

// Validate checks what the runner refuses before anything is opened (the
// engine's own checks follow in New): Run calls it first. Its errors are
// *tidemark.ConfigError, naming the config's fields.
func (c RunnerConfig) Validate() error {
	if err := c.validateSessions(); err != nil {
		return err
	}
	if err := c.State.validate(); err != nil {
		return err
	}
	switch {
	case len(c.Sources) == 0:
		return configErr("{Sources} is required: a directory or s3://bucket/prefix")
	case c.Engine.Window.Size == 0 && c.SessionGap == 0:
		return configErr("{Engine.Window.Size} is required, e.g. {Engine.Window.Size} 10m")
	case c.Engine.Lateness < 0:
		return configErr("{Engine.Lateness} must not be negative, got %s", c.Engine.Lateness)
	case c.Engine.IdleTimeout < 0:
		return configErr("{Engine.IdleTimeout} must not be negative, got %s", c.Engine.IdleTimeout)
	case c.MaxBatchRows < 0:
		return configErr("{MaxBatchRows} must be at least 1, got %d", c.MaxBatchRows)
	case c.Trigger < 0:
		return configErr("{Trigger} must not be negative, got %s", c.Trigger)
	case c.Maintenance.AutoCompact.MinFiles < 0 || c.Maintenance.AutoCompact.MinFiles == 1:
		return configErr("{Maintenance.AutoCompact.MinFiles} must be at least 2, got %d", c.Maintenance.AutoCompact.MinFiles)
	case c.Maintenance.AutoCompact.TargetFileBytes < 0:
		return configErr("{Maintenance.AutoCompact.TargetFileBytes} must not be negative, got %d", c.Maintenance.AutoCompact.TargetFileBytes)
	case c.Drain && !c.Once:
		return configErr("{Drain} needs {Once}: a continuous stream never drains")
	}
	for name := range c.Engine.SourceLateness {
		if !slices.Contains(c.Sources, name) {
			return configErr("{Engine.SourceLateness}: %q is not one of the {Sources} values %q", name, c.Sources)
		}
	}
	if err := lake.CheckKeys(c.Decoder.Keys); err != nil {
		return err
	}
	if !c.Engine.Aggs.Empty() {
		if c.SessionGap != 0 {
			return &tidemark.ConfigError{Pkg: "stream", Format: "{Engine.Aggs} with {SessionGap}", Err: engine.ErrSessionAggs}
		}
		if err := lake.CheckAggs(c.Decoder.Keys, c.Engine.Aggs); err != nil {
			return err
		}
	}
	return c.Decoder.Validate()
}

// configErr is a *tidemark.ConfigError naming RunnerConfig's fields.
func configErr(format string, args ...any) *tidemark.ConfigError {
	return tidemark.ConfigErrorf("stream", format, args...)
}

func (c *RunnerConfig) defaults() {
	// The decoder extracts what the aggregates read (Engine.Aggs is the
	// one place the list is set).
	c.Decoder.Aggs = c.Engine.Aggs.Inputs
	if c.Name == "" {
		c.Name = "stream"
	}
	if c.MaxBatchRows <= 0 {
		c.MaxBatchRows = DefaultMaxBatchRows
	}
	if c.Rescan <= 0 {
		c.Rescan = 10 * time.Second
	}
	if c.Checkpoint == "" {
		c.Checkpoint = joinLocation(c.Lake, "_checkpoints", c.Name)
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Clock == nil {
		c.Clock = time.Now
	}
}

// joinLocation appends path elements to a directory or s3:// URL.
func joinLocation(base string, elem ...string) string {
	if strings.HasPrefix(base, "s3://") {
		return strings.TrimSuffix(base, "/") + "/" + path.Join(elem...)
	}
	return strings.TrimSuffix(base, string(os.PathSeparator)) + string(os.PathSeparator) + path.Join(elem...)
}
