package stream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path"
	"path/filepath"
	"runtime/trace"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
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

// Run runs the stream until ctx is cancelled (a clean exit: the current batch
// is finished and committed first) or, with Once, until the available input
// is processed.
func Run(ctx context.Context, cfg RunnerConfig) (*Summary, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.defaults()
	r, err := newRunner(ctx, cfg)
	if err != nil {
		return nil, explainWriteError(err)
	}
	cfg.Logger.Info("stream started", "lake", cfg.Lake, "checkpoint", cfg.Checkpoint, "sources", cfg.Sources,
		"stream_id", r.id, "next_batch", r.nextID, "once", cfg.Once)
	r.startProgress()
	runErr := explainWriteError(r.runLocked(ctx))
	closeErr := r.close()
	if runErr != nil && closeErr != nil {
		// One line: what stopped the stream, then what failed on the way out
		// (releasing the lock on a store that is gone fails too).
		return r.sum, fmt.Errorf("%w; then, stopping: %s", runErr, strings.ReplaceAll(closeErr.Error(), "\n", "; "))
	}
	return r.sum, errors.Join(runErr, closeErr)
}

// runLocked runs the loop while the lock holds: a lost lock (lock.lost)
// stops reading, refuses the next batch and is the error Run returns.
func (r *runner) runLocked(ctx context.Context) error {
	ctx, stop := context.WithCancel(ctx)
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		select {
		case <-r.lock.done():
			stop()
		case <-ctx.Done():
		}
	}()
	err := r.run(ctx)
	stop()
	<-watched
	if lost := r.lock.lost(); lost != nil {
		return lost
	}
	return err
}

// explainWriteError adds to a failure of the lake or checkpoint store what
// it means and what to do. The stream stops rather than wait: the batch in
// flight is in the checkpoint's write-ahead log and its lake commits carry
// txn ids, so a restart redoes it exactly once, and a supervisor (systemd,
// Kubernetes) restarting the process is the retry with back-off.
func explainWriteError(err error) error {
	if err == nil || errors.Is(err, context.Canceled) {
		return err
	}
	if errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) {
		return fmt.Errorf("stream stopped: the lake or checkpoint disk is full; free space and start the stream again (a batch in flight is redone from the checkpoint: nothing lost, nothing doubled): %w", err)
	}
	if errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) {
		return fmt.Errorf("stream stopped: an S3 server stopped answering past its retries; start the stream again when it answers (a batch in flight is redone from the checkpoint: nothing lost, nothing doubled): %w", err)
	}
	return err
}

func marshalPositions(srcs []ingest.Source) (map[string]json.RawMessage, error) {
	out := make(map[string]json.RawMessage, len(srcs))
	for _, s := range srcs {
		b, err := json.Marshal(s.Position())
		if err != nil {
			return nil, fmt.Errorf("encode the position of source %s: %w", s.Name(), err)
		}
		out[s.Name()] = b
	}
	return out, nil
}

// runner owns one stream's sources, engine, lake and checkpoint.
type runner struct {
	cfg     RunnerConfig
	lake    *lake.Lake
	ck      *checkpoint
	lock    *lock
	id      string // stream id: the lake's txn appId
	engine  engine.Windower
	sources []ingest.Source
	nextID  int64 // the next batch id
	// gcRestore, while set, turns the GC's pacing back on (holdGC).
	gcRestore func()
	sum       *Summary
	metrics   *metrics // nil when --metrics-addr is off
	// readTime is the current batch's read time, µs: the sources' clock.
	readTime atomic.Int64
	buf      []tidemark.Record
	track    *tracker // what OnProgress needs across batches
	stall    *stallWatch
	disorder disorderMeter // the engine stage's
	// keyTypes are a new lake's key types, inferred from its first batch
	// (inferKeyTypes); nil (all text) otherwise. An existing lake keeps
	// the types it remembers.
	keyTypes []lake.KeyType
	// opening is the lake while it is being opened (openLake); nil once
	// awaitLake took it, or when it never was.
	opening *lakeOpening
	// lakeStore, while set, is the store of a new stream's lake, opened
	// once its first batch passed the check (firstbatch.go).
	lakeStore store.Store
	// missing and missingLogged: the fields warnMissing last logged, when.
	missing       []string
	missingLogged time.Time
}

// inputOf is what the lake remembers of how the decoder reads lines.
func inputOf(c ingest.DecoderConfig) lake.Input {
	c = c.WithDefaults()
	return lake.Input{Format: c.Format, TimeField: c.TimeField, TimeUnit: c.TimeUnit, TimeLayout: c.TimeLayout}
}

// lakeOpening is a lake.Open running on a goroutine of its own.
type lakeOpening struct {
	done chan struct{}
	lk   *lake.Lake
	err  error
}

// openLake opens the lake on a goroutine of its own. A fresh lake is five
// tables created, each fsync'd (~50 ms at almost no CPU); neither the
// checkpoint's lock and recovery nor the first batch's read reads the lake,
// so they go on beside it. awaitLake waits for it before anything needs it:
// the replay of an interrupted batch, the first batch's processing.
func (r *runner) openLake(ctx context.Context, st store.Store) {
	o := &lakeOpening{done: make(chan struct{})}
	r.opening = o
	cfg := lake.Config{
		Keys:       r.cfg.Decoder.Keys,
		KeyTypes:   r.keyTypes,
		ValueField: r.cfg.Decoder.ValueField,
		Window:     r.cfg.Engine.Window,
		SessionGap: r.cfg.SessionGap.Microseconds(),
		Logger:     r.cfg.Logger,
		Clock:      r.cfg.Clock,

		PayloadCodec: r.cfg.PayloadCodec,
		ShardIdle:    r.cfg.ShardIdle,
		Input:        inputOf(r.cfg.Decoder),
		ChangeInput:  r.cfg.ChangeInput,
	}
	go func() {
		defer close(o.done)
		defer trace.StartRegion(ctx, "open lake").End()
		o.lk, o.err = lake.Open(ctx, st, cfg)
	}()
}

// awaitLake waits for the lake openLake opens, then checks the session
// shards and registers this stream's shard in it: all before the stream
// commits anything there.
func (r *runner) awaitLake(ctx context.Context) error {
	o := r.opening
	if o == nil {
		return nil
	}
	defer trace.StartRegion(ctx, "await lake").End()
	<-o.done
	r.opening = nil
	if o.err != nil {
		return o.err
	}
	r.lake = o.lk
	if err := r.checkSessionShards(ctx); err != nil {
		return err
	}
	ck := checkpointRef(r.cfg.Lake, r.cfg.Checkpoint)
	if err := r.lake.ClaimName(ctx, lake.NameClaim{Name: r.cfg.Name, ID: r.id, Checkpoint: ck}, r.cfg.TakeName); err != nil {
		return err
	}
	return r.lake.RegisterShard(ctx, lake.ShardInfo{ID: r.id, Name: r.cfg.Name, Sources: r.cfg.Sources, Checkpoint: ck})
}

// checkpointRef is how the lake records where a stream's checkpoint is
// (lake.NameClaim): "<lake>/..." when it is inside the lake, so a lake
// copied with its checkpoints keeps its names, else the location itself
// (absolute, for a local one).
func checkpointRef(lakeLoc, ck string) string {
	if !strings.HasPrefix(lakeLoc, "s3://") {
		if abs, err := filepath.Abs(lakeLoc); err == nil {
			lakeLoc = abs
		}
	}
	if !strings.HasPrefix(ck, "s3://") {
		if abs, err := filepath.Abs(ck); err == nil {
			ck = abs
		}
	}
	lakeLoc = strings.TrimSuffix(lakeLoc, "/")
	if rest, ok := strings.CutPrefix(ck, lakeLoc+"/"); ok {
		return "<lake>/" + rest
	}
	return ck
}

// abandonLake waits for a lake still being opened, for a runner that stops
// before awaitLake, and returns the opening's error.
func (r *runner) abandonLake() error {
	o := r.opening
	if o == nil {
		return nil
	}
	<-o.done
	r.opening = nil
	return o.err
}

func newRunner(ctx context.Context, cfg RunnerConfig) (_ *runner, err error) {
	r := &runner{cfg: cfg, sum: &Summary{Quarantined: map[tidemark.Reason]int64{}, Lake: cfg.Lake}}
	defer func() {
		if err != nil {
			if lakeErr := r.abandonLake(); lakeErr != nil {
				err = lakeErr // the lake's error first, as when it was opened before the checkpoint
			}
			err = errors.Join(err, r.close()) // release what was opened before the failure
		}
	}()
	if cfg.MetricsAddr != "" {
		warnExposed(ctx, cfg.Logger, cfg.MetricsAddr)
		r.metrics = newMetrics(cfg)
		addr, err := r.metrics.serve(cfg.MetricsAddr, cfg.MetricsFallback)
		if err != nil {
			return nil, err
		}
		cfg.Logger.Info("status page at http://"+addr+"/ (Prometheus metrics at /metrics)", "metrics_addr", addr)
	}
	lakeStore := cfg.LakeStore
	if lakeStore == nil {
		if lakeStore, err = store.Open(ctx, cfg.Lake, cfg.S3); err != nil {
			return nil, fmt.Errorf("open lake %s: %w", cfg.Lake, err)
		}
	}
	region := trace.StartRegion(ctx, "open checkpoint")
	defer func() { region.End() }()
	ckStore := cfg.CheckpointStore
	if ckStore == nil {
		if ckStore, err = store.Open(ctx, cfg.Checkpoint, cfg.S3); err != nil {
			return nil, fmt.Errorf("open checkpoint %s: %w", cfg.Checkpoint, err)
		}
	}
	r.ck = &checkpoint{st: ckStore}
	host, _ := os.Hostname()
	r.lock, err = acquireLock(ctx, ckStore, host)
	if err != nil {
		return nil, err
	}
	if r.id, err = r.ck.streamID(ctx); err != nil {
		return nil, err
	}
	rec, err := r.ck.recover(ctx)
	if err != nil {
		return nil, err
	}
	if rec.commit == nil && rec.pending == nil && !cfg.NoFirstBatchCheck {
		r.deferLake(lakeStore) // a new stream: its first batch is checked first
	} else {
		r.openLake(ctx, lakeStore)
	}
	resume := map[string]json.RawMessage{}
	if rec.commit != nil {
		resume = rec.commit.End
		r.nextID = rec.commit.BatchID + 1
		if err := r.ck.sweep(ctx, rec.commit.BatchID); err != nil {
			cfg.Logger.Warn("checkpoint cleanup failed", "err", err)
		}
	}
	if r.engine, err = rec.windower(cfg, r.id); err != nil {
		return nil, err
	}
	if rec.pending != nil {
		// The previous run logged this batch and died before committing it:
		// read exactly the same input again and redo it. Lake commits that
		// did land are skipped by their txn.
		cfg.Logger.Info("replaying a batch interrupted by a crash", "batch_id", rec.pending.BatchID, "rows", rec.pending.Rows)
		if err := r.awaitLake(ctx); err != nil {
			return nil, err
		}
		if err := r.openSources(ctx, rec.pending.Start); err != nil {
			return nil, err
		}
		if err := r.replay(ctx, rec.pending); err != nil {
			return nil, err
		}
		return r, nil
	}
	if err := r.openSources(ctx, resume); err != nil {
		return nil, err
	}
	return r, nil
}

func describeSpec(s tidemark.WindowSpec) string {
	return fmt.Sprintf("window %s, slide %s", time.Duration(s.Size)*time.Microsecond, time.Duration(s.Slide)*time.Microsecond)
}

// close releases everything the runner holds.
func (r *runner) close() error {
	r.abandonLake() // its goroutine ends before the runner; its error was reported, or the lake is unused
	var errs []error
	for _, s := range r.sources {
		errs = append(errs, s.Close())
	}
	r.sources = nil
	if r.engine != nil {
		errs = append(errs, r.engine.Close())
	}
	errs = append(errs, r.lock.release(), r.metrics.stop())
	r.lock = nil
	return errors.Join(errs...)
}
