// Package reconcile is tidemark's batch layer: it finds the windows the
// stream got wrong (those holding late rows, plus, on request, every closed
// window of a time range), recomputes them exactly from raw_events with
// package batch, and upserts the ones that differ into window_results
// (origin batch, revision+1) with a reconcile_log row each.
//
// The contract: after a run, every window the stream has closed equals a
// full batch recomputation over raw_events.
package reconcile

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/google/uuid"

	"tidemark"
	"tidemark/lake"
	"tidemark/lake/store"
)

// Run reconciles the lake once and returns what it did. A held lock is a
// *LockedError.
func Run(ctx context.Context, cfg Config) (rep *Report, err error) {
	clock := cfg.Clock
	if clock == nil {
		clock = time.Now
	}
	started := clock()
	log := cfg.logger()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	st := cfg.LakeStore
	if st == nil {
		if cfg.Lake == "" {
			return nil, errors.New("reconcile: no lake given")
		}
		if st, err = store.Open(ctx, cfg.Lake, cfg.S3); err != nil {
			return nil, fmt.Errorf("reconcile: %w", err)
		}
	}
	m := &meter{Store: st}
	rep = &Report{RunID: uuid.NewString(), DryRun: cfg.DryRun}
	if !cfg.DryRun {
		ttl := cmp.Or(cfg.LockTTL, time.Hour)
		lk, err := acquireLock(ctx, st, cmp.Or(cfg.Owner, defaultOwner()), rep.RunID, clock, ttl)
		if err != nil {
			return nil, err
		}
		defer func() {
			// Release even when ctx is cancelled: a leftover lock blocks
			// the next run for LockTTL.
			if rerr := lk.release(context.WithoutCancel(ctx)); rerr != nil {
				err = errors.Join(err, rerr)
			}
		}()
	}
	lk, err := lake.Open(ctx, m, lake.Config{Logger: log, Clock: clock, ShardIdle: cfg.ShardIdle})
	if err != nil {
		return nil, fmt.Errorf("reconcile: %w", err)
	}
	r := &run{cfg: cfg, lk: lk, rep: rep, log: log, clock: clock, spec: lk.Config().Window, hasValue: lk.Config().ValueField != "", aggs: lk.Config().Aggs}
	if err := r.do(ctx); err != nil {
		return nil, fmt.Errorf("reconcile: %w", err)
	}
	rep.BytesRead = m.read.Load()
	rep.Duration = clock().Sub(started)
	log.Info("reconcile done", "run_id", rep.RunID, "checked", rep.Checked, "corrected", rep.Corrected,
		"inserted", rep.Inserted, "late_rows_absorbed", rep.LateRowsAbsorbed, "duration", rep.Duration)
	return rep, nil
}

func defaultOwner() string {
	host, _ := os.Hostname()
	return fmt.Sprintf("%s/%d", cmp.Or(host, "unknown"), os.Getpid())
}

// rangeBounds returns the window-start range the flags ask for.
func (c Config) rangeBounds(now time.Time) (from, to int64, ok bool) {
	switch {
	case c.Since > 0:
		return now.Add(-c.Since).UnixMicro(), now.UnixMicro() + 1, true
	case !c.From.IsZero():
		return c.From.UnixMicro(), c.To.UnixMicro(), true
	}
	return 0, 0, false
}

// dayOf returns the start of the UTC day holding us.
func dayOf(us int64) int64 {
	return tidemark.FloorDiv(us, tidemark.MicrosPerDay) * tidemark.MicrosPerDay
}
