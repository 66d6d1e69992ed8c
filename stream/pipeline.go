package stream

import (
	"context"
	"errors"
	"runtime/trace"
	"sync"
	"time"

	"tidemark"
	"tidemark/lake"
	"tidemark/stream/engine"
)

// The micro-batch loop runs in three stages, each batch through them in
// order:
//
//	reader     reads and decodes batch N+2 (readLoop)
//	processor  runs batch N+1 through the engine, starts writing its state
//	           file, and writes its raw_events and quarantine data files
//	           (lake.PrepareBatch): the bulk of a batch's work
//	committer  finishes batch N: its write-ahead entry, the lake commits
//	           (window_results included), its commit entry, the progress line
//
// So the encoding of N+1 overlaps the fsyncs and commits of N, which would
// otherwise leave a core idle at the end of every batch, and the
// write-ahead protocol holds as it does with one batch at a time:
//   - offsets/N+1 is written only after commits/N (the committer is one
//     goroutine, one batch after the other), and no lake commit or commit
//     entry of N+1 comes before it. What N+1 writes before (its data files,
//     its state file) is referenced by nothing durable until then: after a
//     crash the files are orphans, as those of any batch interrupted before
//     its commit are, and the batch is read again from commits/N's end
//     (vacuum removes orphan data files once the writer grace is over; a
//     restart sweeps state files no commit names);
//   - the engine is touched by the processor only. What the committer needs
//     of it after a batch (the commit entry's watermarks, the progress
//     line's source marks) is taken right after Process, and the state file
//     is written before the next Process starts.
//
// Recovery is unchanged: a crash leaves at most one batch logged and not
// committed, since offsets/N+1 follows commits/N.

// inflight is a processed batch on its way to the committer.
type inflight struct {
	b      readBatch
	res    engine.BatchResult
	began  time.Time
	marks  []engine.SourceMark
	commit commitEntry // but for State: the state file's reference
	batch  lake.Batch

	stated   chan struct{} // closed once the state file is written
	ref      *stateRef
	refErr   error
	prepared *lake.Prepared
}

// pipeline processes and commits the batches read until batches closes or
// ctx is cancelled (a clean stop: every batch handed to the committer is
// still committed), handing each batch's record slice back on free once
// it is committed.
func (r *runner) pipeline(ctx context.Context, batches <-chan readBatch, free chan<- []tidemark.Record) error {
	todo := make(chan *inflight)
	var (
		committing sync.WaitGroup
		commitErr  error
		failed     = make(chan struct{}) // closed when the committer fails
	)
	committing.Go(func() {
		commitErr = r.commitLoop(todo, free, failed)
	})
	err := r.processLoop(ctx, batches, todo, failed)
	close(todo)
	committing.Wait()
	return errors.Join(commitErr, err)
}

// processLoop is the processor: it runs each batch through the engine and
// prepares its data files, then hands it to the committer.
func (r *runner) processLoop(ctx context.Context, batches <-chan readBatch, todo chan<- *inflight, failed <-chan struct{}) error {
	// Once a batch is read, it is finished even if ctx is cancelled now:
	// SIGTERM commits the batches read, then exits.
	work := context.WithoutCancel(ctx)
	next := r.nextID
	var prev *inflight
	defer func() {
		if prev != nil {
			<-prev.stated // no state write outlives the loop
		}
	}()
	for b := range batches {
		select {
		case <-failed:
			r.recycleBatch(b)
			return nil // the committer's error is the run's
		default:
		}
		if err := r.lock.lost(); err != nil {
			r.recycleBatch(b)
			return err
		}
		b.entry.BatchID = next
		if prev != nil {
			<-prev.stated // the engine is ours again
		}
		f, err := r.processBatch(work, b)
		if err != nil {
			r.recycleBatch(b)
			return err
		}
		prev = f
		select {
		case todo <- f:
		case <-failed:
			r.abandon(f)
			r.recycleBatch(b)
			return nil
		}
		next++
		if ctx.Err() != nil {
			return nil
		}
	}
	return nil
}

// processBatch runs one batch through the engine, takes what the committer
// needs of the engine, starts writing the state file and writes the data
// files.
func (r *runner) processBatch(ctx context.Context, b readBatch) (*inflight, error) {
	f := &inflight{b: b, began: time.Now(), stated: make(chan struct{})}
	if err := r.checkFirstBatch(ctx, b); err != nil {
		close(f.stated)
		return nil, err
	}
	region := trace.StartRegion(ctx, "engine")
	res, err := r.processInMemory(b.entry, b.recs)
	region.End()
	if err != nil {
		close(f.stated)
		return nil, err
	}
	f.res = res
	f.marks = r.engine.SourceMarks(time.UnixMicro(b.entry.ReadTime))
	f.commit = commitEntryOf(b.entry.BatchID, b.entry.End, r.engine, nil, nil)
	go func() {
		defer close(f.stated)
		defer trace.StartRegion(ctx, "state").End()
		f.ref, f.refErr = r.ck.writeState(ctx, b.entry.BatchID, r.engine, nil)
	}()
	if err := r.awaitLake(ctx); err != nil { // a new stream's, opened by checkFirstBatch
		<-f.stated
		return nil, err
	}
	f.batch = r.lakeBatch(b.entry, b.recs, res, nil)
	region = trace.StartRegion(ctx, "prepare")
	f.prepared = r.lake.PrepareBatch(ctx, f.batch)
	region.End()
	return f, nil
}

// commitLoop is the committer: it commits the batches in order. After a
// failure it only cleans up the batches still handed to it.
func (r *runner) commitLoop(todo <-chan *inflight, free chan<- []tidemark.Record, failed chan<- struct{}) error {
	ctx := context.Background()
	var err error
	for f := range todo {
		if err == nil {
			if err = r.commitBatch(ctx, f); err != nil {
				close(failed)
			} else {
				r.maint.kick(r.lake)
			}
		} else {
			r.abandon(f)
		}
		region := trace.StartRegion(ctx, "recycle")
		r.recycleBatch(f.b)
		region.End()
		free <- f.b.recs // readLoop clears them
	}
	return err
}

// abandon gives up a processed batch that will not be committed: once its
// state file is written (no write outlives it), its data files go.
func (r *runner) abandon(f *inflight) {
	<-f.stated
	r.lake.Discard(f.prepared)
}

// recycleBatch tells the sources that a batch's records are done with.
func (r *runner) recycleBatch(b readBatch) {
	if b.recycle != nil {
		b.recycle()
	}
}

// commitBatch is the committer's part of one batch: the write-ahead entry,
// the lake commits, the commit entry, the progress line.
func (r *runner) commitBatch(ctx context.Context, f *inflight) error {
	entry, recs := f.b.entry, f.b.recs
	err := r.lock.lost()
	if err == nil {
		region := trace.StartRegion(ctx, "offsets")
		err = r.ck.write(ctx, batchKey("offsets", entry.BatchID), entry)
		region.End()
	}
	if err != nil {
		r.abandon(f)
		return err
	}
	var (
		counted sync.WaitGroup
		counts  recordCounts
	)
	counted.Go(func() {
		defer trace.StartRegion(ctx, "count").End()
		counts = countRecords(recs)
		counts.missing = r.missingFields(recs)
	})
	region := trace.StartRegion(ctx, "lake")
	err = r.lake.CommitBatch(ctx, f.batch, f.prepared)
	region.End()
	<-f.stated
	counted.Wait()
	if err := errors.Join(err, f.refErr); err != nil {
		return err
	}
	f.commit.State = f.ref
	if err := r.recordCommit(ctx, f.commit, len(f.res.Emitted)); err != nil {
		return err
	}
	defer trace.StartRegion(ctx, "publish").End()
	r.sum.count(counts)
	return r.publish(entry, recs, counts, f.res, f.marks, time.Since(f.began))
}

// lakeBatch is what the lake gets of a batch: its records, and its emitted
// windows as window_results rows. state overrides the engine's (drain).
func (r *runner) lakeBatch(entry offsetsEntry, recs []tidemark.Record, res engine.BatchResult, state engine.Saved) lake.Batch {
	var wm *int64
	if w, ok := markOf(state); ok {
		wm = &w
	} else if res.HasWatermark && res.Watermark != tidemark.MaxTime {
		w := res.Watermark
		wm = &w
	}
	rows := make([]lake.WindowRow, len(res.Emitted))
	aggs := r.cfg.Engine.Aggs
	for i, e := range res.Emitted {
		rows[i] = lake.WindowRow{Result: e, Origin: lake.OriginStream, Revision: 1, ComputedAt: entry.ReadTime, Watermark: wm}
		if !aggs.Empty() {
			rows[i].Aggs = aggs.Values(e.State) // here, so the lake need not copy the rows to fill them in
		}
	}
	return lake.Batch{AppID: r.id, BatchID: entry.BatchID, Records: recs, Closed: rows, IngestTime: entry.ReadTime, Watermark: wm}
}
