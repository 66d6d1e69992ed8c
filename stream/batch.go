package stream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"tidemark"
	"tidemark/ingest"
	"tidemark/lake"
	"tidemark/lake/store"
)

// runner owns one stream's sources, engine, lake and checkpoint.
type runner struct {
	cfg     RunnerConfig
	lake    *lake.Lake
	ck      *checkpoint
	lock    *lock
	id      string // stream id: the lake's txn appId
	engine  *Engine
	sources []ingest.Source
	nextID  int64 // the next batch id
	sum     *Summary
	metrics *metrics // nil when --metrics-addr is off
	// readTime is the current batch's read time, µs: the sources' clock.
	readTime atomic.Int64
	buf      []tidemark.Record
}

func newRunner(ctx context.Context, cfg RunnerConfig) (_ *runner, err error) {
	r := &runner{cfg: cfg, sum: &Summary{Quarantined: map[tidemark.Reason]int64{}, Lake: cfg.Lake}}
	defer func() {
		if err != nil {
			err = errors.Join(err, r.close()) // release what was opened before the failure
		}
	}()
	if cfg.MetricsAddr != "" {
		r.metrics = newMetrics()
		if err := r.metrics.serve(cfg.MetricsAddr); err != nil {
			return nil, err
		}
	}
	lakeStore, err := store.Open(ctx, cfg.Lake, cfg.S3)
	if err != nil {
		return nil, fmt.Errorf("open lake %s: %w", cfg.Lake, err)
	}
	r.lake, err = lake.Open(ctx, lakeStore, lake.Config{
		Keys:       cfg.Decoder.Keys,
		ValueField: cfg.Decoder.ValueField,
		Window:     cfg.Engine.Window,
		Logger:     cfg.Logger,
		Clock:      cfg.Clock,
	})
	if err != nil {
		return nil, err
	}
	ckStore, err := store.Open(ctx, cfg.Checkpoint, cfg.S3)
	if err != nil {
		return nil, fmt.Errorf("open checkpoint %s: %w", cfg.Checkpoint, err)
	}
	r.ck = &checkpoint{st: ckStore}
	host, _ := osHostname()
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
	var state *State
	resume := map[string]json.RawMessage{}
	if rec.commit != nil {
		state = new(State)
		if err := state.UnmarshalBinary(rec.commit.Engine); err != nil {
			return nil, fmt.Errorf("checkpoint %s: engine state: %w", cfg.Checkpoint, err)
		}
		if state.Window != withSlide(cfg.Engine.Window) {
			return nil, fmt.Errorf("checkpoint %s was written with different windows (%s); use a new --name or --checkpoint", cfg.Checkpoint, describeSpec(state.Window))
		}
		resume = rec.commit.End
		r.nextID = rec.commit.BatchID + 1
	}
	if r.engine, err = New(cfg.Engine, state); err != nil {
		return nil, err
	}
	if rec.pending != nil {
		// The previous run logged this batch and died before committing it:
		// read exactly the same input again and redo it. Lake commits that
		// did land are skipped by their txn.
		cfg.Logger.Info("replaying a batch interrupted by a crash", "batch_id", rec.pending.BatchID, "rows", rec.pending.Rows)
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

func withSlide(s tidemark.WindowSpec) tidemark.WindowSpec {
	if s.Slide <= 0 {
		s.Slide = s.Size
	}
	return s
}

func describeSpec(s tidemark.WindowSpec) string {
	return fmt.Sprintf("window %s, slide %s", time.Duration(s.Size)*time.Microsecond, time.Duration(s.Slide)*time.Microsecond)
}

// close releases everything the runner holds.
func (r *runner) close() error {
	var errs []error
	for _, s := range r.sources {
		errs = append(errs, s.Close())
	}
	r.sources = nil
	errs = append(errs, r.lock.release(), r.metrics.stop())
	r.lock = nil
	return errors.Join(errs...)
}
