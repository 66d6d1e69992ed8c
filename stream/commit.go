package stream

import (
	"context"
	"fmt"
	"runtime/trace"
	"sync"
	"time"

	"tidemark"
	"tidemark/stream/engine"
)

// processInMemory moves the watermark and runs the batch through the
// engine: nothing durable.
// The records' disorder is measured as the watermark sees it (disorder.go)
// from the batch's logged positions, so a replay measures the same.
func (r *runner) processInMemory(entry offsetsEntry, recs []tidemark.Record) (engine.BatchResult, error) {
	if r.lake != nil { // it is, except on a runner that has no lake
		checkKeys(r.lake.Config(), recs)
	}
	end, err := r.disorder.decode(entry.End, "end")
	if err != nil {
		return engine.BatchResult{}, err
	}
	start, err := r.disorder.decode(entry.Start, "start")
	if err != nil {
		return engine.BatchResult{}, err
	}
	r.setFrontiers(end)
	now := time.UnixMicro(entry.ReadTime)
	if !manyFiles(start, end) { // the engine's figure is the level
		r.disorder.prev = end
		return r.engine.Process(recs, now), r.afterProcess()
	}
	before := r.engine.SourceMarks(now)
	w, hasW := r.engine.Watermark()
	res := r.engine.Process(recs, now)
	r.disorder.measure(recs, start, end, before, w, hasW, func(src string) int64 { return r.cfg.Engine.LatenessOf(src).Microseconds() })
	return res, r.afterProcess()
}

// afterProcess is what the runner does between an engine batch and its
// commit: stop on a failed read of the Pebble state (nothing of the batch
// is committed then). The GC and its memory limit are the process's, set
// by cmd/tidemark, never here.
func (r *runner) afterProcess() error {
	return r.engine.Err()
}

// publish tells the world about a committed batch: the progress line and
// metrics first, then the windows on --print.
func (r *runner) publish(entry offsetsEntry, recs []tidemark.Record, counts recordCounts, res engine.BatchResult, marks []engine.SourceMark, took time.Duration) error {
	r.report(entry, recs, counts, res, marks, took)
	if r.cfg.Print == nil {
		return nil
	}
	if err := r.print(entry.BatchID, res.Emitted); err != nil {
		return fmt.Errorf("print windows: %w", err)
	}
	return nil
}

// commit writes the batch to the lake and records it in the checkpoint. state overrides the engine's state (used by drain).
func (r *runner) commit(ctx context.Context, entry offsetsEntry, recs []tidemark.Record, res engine.BatchResult, state engine.Saved) error {
	// The state file is written beside the lake commits (their fsyncs
	// overlap); the commit entry that names it waits for both.
	var (
		saved  sync.WaitGroup
		ref    *stateRef
		refErr error
	)
	saved.Go(func() {
		defer trace.StartRegion(ctx, "state").End()
		ref, refErr = r.ck.writeState(ctx, entry.BatchID, r.engine, state)
	})
	region := trace.StartRegion(ctx, "lake")
	err := r.lake.AppendBatch(ctx, r.lakeBatch(entry, recs, res, state))
	region.End()
	saved.Wait()
	if err != nil {
		return err
	}
	if refErr != nil {
		return refErr
	}
	return r.recordCommit(ctx, commitEntryOf(entry.BatchID, entry.End, r.engine, state, ref), len(res.Emitted))
}

// recordCommit writes the commit entry of a batch whose lake commits are
// done and which emitted that many windows, and moves the run on past it.
func (r *runner) recordCommit(ctx context.Context, entry commitEntry, emitted int) error {
	r.sum.Emitted += int64(emitted)
	region := trace.StartRegion(ctx, "commit entry")
	err := r.ck.writeCommit(ctx, entry)
	region.End()
	if err != nil {
		return err
	}
	r.sum.Batches++
	r.nextID = entry.BatchID + 1
	if err := r.ck.cleanup(ctx, entry.BatchID); err != nil {
		r.cfg.Logger.Warn("checkpoint cleanup failed", "err", err)
	}
	return nil
}
