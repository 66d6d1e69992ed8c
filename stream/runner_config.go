package stream

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"path"
	"slices"
	"strings"
	"time"

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

	Checkpoint   string        // default <Lake>/_checkpoints/<Name>
	MaxBatchRows int           // input lines per micro-batch; 0 means DefaultMaxBatchRows, negative is an error
	Trigger      time.Duration // minimum interval between batches
	Once         bool          // process what is available now, then return
	Drain        bool          // with Once: then close every open window
	Poll         bool          // local sources: rescans only, no fsnotify
	Rescan       time.Duration // rescan / S3 poll interval; default 10s
	MetricsAddr  string        // serve the status page and Prometheus metrics here; "" = off
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
// *ConfigError, naming the config's fields.
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
			return &ConfigError{format: "{Engine.Aggs} with {SessionGap}", err: engine.ErrSessionAggs}
		}
		if err := lake.CheckAggs(c.Decoder.Keys, c.Engine.Aggs); err != nil {
			return err
		}
	}
	return c.Decoder.Validate()
}

// ConfigError is a RunnerConfig that Validate refuses. Its text names the
// config's settings by field path in braces ("{Engine.Lateness} must not
// be negative"): Error writes the field paths, and Phrase lets a caller
// name them its own way (cmd/tidemark writes its flags).
type ConfigError struct {
	format string // fmt format with {Field} placeholders
	args   []any
	err    error // wrapped, when set
}

func configErr(format string, args ...any) *ConfigError {
	return &ConfigError{format: format, args: args}
}

// Error is the message with each field named by its path in RunnerConfig.
func (e *ConfigError) Error() string {
	return "stream config: " + e.Phrase(func(field string) string { return field })
}

// Phrase is the message with each field named name(field).
func (e *ConfigError) Phrase(name func(field string) string) string {
	var b strings.Builder
	f := e.format
	for {
		i := strings.IndexByte(f, '{')
		j := strings.IndexByte(f[i+1:], '}')
		if i < 0 || j < 0 {
			b.WriteString(f)
			break
		}
		b.WriteString(f[:i])
		b.WriteString(strings.ReplaceAll(name(f[i+1:i+1+j]), "%", "%%"))
		f = f[i+2+j:]
	}
	msg := fmt.Sprintf(b.String(), e.args...)
	if e.err != nil {
		msg += ": " + e.err.Error()
	}
	return msg
}

func (e *ConfigError) Unwrap() error { return e.err }

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
