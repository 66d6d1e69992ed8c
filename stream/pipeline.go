package stream

import (
	"context"
	"errors"
	"runtime/trace"
	"sync"
	"time"

	"tidemark"
	"tidemark/lake"
	"tidemark/lake/store"
)

// The micro-batch loop runs in three stages, each batch through them in
// order (run):
//
//	reader     reads and decodes batch N+1 (readLoop)
//	processor  runs batch N+1 through the engine, then starts its lake
//	           write: the data files are encoded and fsynced in the store's
//	           temp area, held at a store.Gate before anything is published
//	committer  finishes batch N: write-ahead entry, state file, lake
//	           commits, commit entry, cleanup, progress
//
// So the processor's work on N+1 overlaps N's fsyncs and commits, and the
// write-ahead protocol holds as it did with one batch at a time:
//   - offsets/N+1 is written only after commits/N (the committer is one
//     goroutine, one batch after the other), and nothing of N+1 reaches the
//     lake before offsets/N+1 is durable: its gate opens after that write;
//   - the lake commits of N+1 (raw_events and quarantine, then
//     window_results) come after every commit of N, which precede
//     commits/N: N+1's gate opens after commits/N;
//   - the engine is touched by the processor only. What the committer needs
//     of it (the changelog, the commit entry's watermarks, the progress
//     line's source marks) is taken right after Process, before the engine
//     sees N+1. A batch whose state file is a snapshot (or whose state lives
//     in a Pebble database) is read from the engine by the committer, so the
//     processor waits for that batch to commit before the next Process.
//
// Recovery is unchanged: a crash leaves at most one batch logged and not
// committed (offsets/N+1 follows commits/N), and a batch whose lake write was
// started but whose gate never opened left only temp files, which a restart
// or vacuum sweeps.

// inflight is a processed batch on its way through the committer.
type inflight struct {
	entry offsetsEntry
	recs  []tidemark.Record
	res   BatchResult
	began time.Time

	// commit is its commit entry but for State; changes and ref its state
	// file when the processor took it (nil: the committer writes it with
	// writeState, the engine held still meanwhile).
	commit  commitEntry
	changes []byte
	ref     *stateRef
	marks   []sourceMark

	gate     *store.Gate
	appended chan error    // the lake write's result
	done     chan struct{} // closed once the batch is committed or failed
}

// committer finishes processed batches in order on a goroutine of its own.
type committer struct {
	r    *runner
	todo chan *inflight
	free chan<- []tidemark.Record
	wg   sync.WaitGroup

	mu  sync.Mutex
	err error // the first failure: later batches are abandoned
}

func (r *runner) startCommitter(free chan<- []tidemark.Record) *committer {
	c := &committer{r: r, todo: make(chan *inflight, 1), free: free}
	c.wg.Go(c.loop)
	return c
}

// failed returns the error that stopped the committer, if any.
func (c *committer) failed() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// stop waits for every batch handed over to be committed (or abandoned
// after a failure) and returns the failure.
func (c *committer) stop() error {
	close(c.todo)
	c.wg.Wait()
	return c.failed()
}

func (c *committer) loop() {
	for f := range c.todo {
		err := c.failed()
		if err == nil {
			err = c.r.commitInflight(f)
		} else {
			f.gate.Open(errAbandoned)
			<-f.appended
		}
		if err != nil && c.failed() == nil {
			c.mu.Lock()
			c.err = err
			c.mu.Unlock()
		}
		// The lake write is over: the records may go (after a failure too,
		// so the reader is not left waiting for a slice).
		c.free <- f.recs[:0]
		close(f.done)
	}
}

// errAbandoned fails the lake write of a batch after an earlier batch
// failed: it published nothing, and a restart reads it again.
var errAbandoned = errors.New("stream: batch abandoned after an earlier batch failed")

// dispatch takes a processed batch's part of the engine and starts its lake
// write, held at its gate; the committer finishes it.
func (r *runner) dispatch(ctx context.Context, c *committer, entry offsetsEntry, recs []tidemark.Record, res BatchResult, began time.Time) (*inflight, error) {
	f := &inflight{
		entry: entry, recs: recs, res: res, began: began,
		commit:   commitEntryOf(entry.BatchID, entry.End, r.engine, nil, nil),
		marks:    r.engine.sourceMarks(time.UnixMicro(entry.ReadTime)),
		gate:     store.NewGate(),
		appended: make(chan error, 1),
		done:     make(chan struct{}),
	}
	if e, ok := r.engine.(*Engine); !ok || e.disk == nil {
		changes, err := r.engine.changelog()
		if err != nil {
			return nil, err
		}
		if f.ref = r.ck.changelogRef(entry.BatchID, r.engine, r.tip, changes); f.ref != nil {
			f.changes = changes
			r.tip = f.ref
		}
	}
	gated := store.WithGate(ctx, f.gate)
	go func() {
		defer trace.StartRegion(gated, "lake").End()
		f.appended <- r.lake.AppendBatch(gated, r.lakeBatch(entry, recs, res, nil))
	}()
	c.todo <- f
	return f, nil
}

// holdsEngine reports whether the committer reads the engine for f (its
// state file): the processor waits for f before it changes the engine.
func (f *inflight) holdsEngine() bool { return f.ref == nil }

// commitInflight is the committer's part of one batch.
func (r *runner) commitInflight(f *inflight) error {
	ctx := context.Background()
	err := r.lock.lost()
	if err == nil {
		region := trace.StartRegion(ctx, "offsets")
		err = r.ck.write(ctx, batchKey("offsets", f.entry.BatchID), f.entry)
		region.End()
	}
	if err != nil {
		f.gate.Open(errAbandoned)
		<-f.appended
		return err
	}
	f.gate.Open(nil)
	var refErr error
	region := trace.StartRegion(ctx, "state")
	ref := f.ref
	if f.holdsEngine() {
		ref, refErr = r.ck.writeState(ctx, f.entry.BatchID, r.engine, nil)
		r.tip = ref
	} else {
		refErr = r.ck.put(ctx, ref.File, f.changes)
	}
	region.End()
	if err := errors.Join(<-f.appended, refErr); err != nil {
		return err
	}
	f.commit.State = ref
	region = trace.StartRegion(ctx, "commit entry")
	err = r.ck.writeCommit(ctx, f.commit)
	region.End()
	if err != nil {
		return err
	}
	r.sum.Emitted += int64(len(f.res.Emitted))
	r.sum.Batches++
	if err := r.ck.cleanup(ctx, f.entry.BatchID); err != nil {
		r.cfg.Logger.Warn("checkpoint cleanup failed", "err", err)
	}
	r.sum.count(f.recs)
	return r.publish(f.entry, f.recs, f.res, f.marks, time.Since(f.began))
}

// lakeBatch is what the lake gets of a batch: its records, and its emitted
// windows as window_results rows. state overrides the engine's (drain).
func (r *runner) lakeBatch(entry offsetsEntry, recs []tidemark.Record, res BatchResult, state drainState) lake.Batch {
	var wm *int64
	if w, ok := markOf(state); ok {
		wm = &w
	} else if res.HasWatermark && res.Watermark != tidemark.MaxTime {
		w := res.Watermark
		wm = &w
	}
	rows := make([]lake.WindowRow, len(res.Emitted))
	for i, e := range res.Emitted {
		rows[i] = lake.WindowRow{Result: e, Origin: lake.OriginStream, Revision: 1, ComputedAt: entry.ReadTime, Watermark: wm}
	}
	return lake.Batch{AppID: r.id, BatchID: entry.BatchID, Records: recs, Closed: rows, IngestTime: entry.ReadTime, Watermark: wm}
}
