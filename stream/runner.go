package stream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime/trace"
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
	sum     *Summary
	metrics *metrics // nil when --metrics-addr is off
	// readTime is the current batch's read time, µs: the sources' clock.
	readTime atomic.Int64
	buf      []tidemark.Record
	track    *tracker // what OnProgress needs across batches
	maint    *maintainer
	lastRows int // lines in the last batch gathered (trigger.go), read loop only
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
		Aggs:       r.cfg.Engine.Aggs,
		Window:     r.cfg.Engine.Window,
		SessionGap: r.cfg.SessionGap,
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
