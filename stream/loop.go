package stream

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"runtime/trace"
	"slices"
	"sync"
	"time"

	"tidemark"
	"tidemark/ingest"
	"tidemark/lake"
)

// openSources opens every --source at its checkpointed position.
func (r *runner) openSources(ctx context.Context, at map[string]json.RawMessage) error {
	for _, s := range r.sources {
		s.Close()
	}
	r.sources = r.sources[:0]
	moved, err := movedFiles(at, r.cfg.Sources)
	if err != nil {
		return err
	}
	for _, spec := range r.cfg.Sources {
		var pos ingest.Position
		if raw, ok := at[spec]; ok {
			if err := json.Unmarshal(raw, &pos); err != nil {
				return fmt.Errorf("checkpoint position of source %s: %w", spec, err)
			}
		} else {
			pos.Gone = moved
		}
		src, err := ingest.Open(ctx, spec, r.sourceConfig(), pos)
		if err != nil {
			return fmt.Errorf("open source %s: %w", spec, err)
		}
		r.sources = append(r.sources, src)
	}
	return nil
}

// movedFiles lists the files of the checkpoint's sources that are not
// configured any more, as files gone: a source new to the checkpoint may be
// one of them copied or moved (cp -a to a new place, a restore under
// another path), and its files whose content was read continue from where
// they were (ingest identifies files by content, so only a copy matches).
func movedFiles(at map[string]json.RawMessage, specs []string) ([]ingest.FilePosition, error) {
	var out []ingest.FilePosition
	for _, spec := range slices.Sorted(maps.Keys(at)) {
		raw := at[spec]
		if slices.Contains(specs, spec) {
			continue
		}
		var pos ingest.Position
		if err := json.Unmarshal(raw, &pos); err != nil {
			return nil, fmt.Errorf("checkpoint position of source %s: %w", spec, err)
		}
		for _, f := range append(pos.Files, pos.Gone...) {
			if f.ID != "" && f.ETag == "" {
				out = append(out, f)
			}
		}
	}
	return out, nil
}

// sourceConfig configures the sources. Their clock is the batch's read
// time, fixed per batch and logged in the write-ahead entry, so a replayed
// batch decodes (arrival, future-time guard) exactly as the first time.
func (r *runner) sourceConfig() ingest.SourceConfig {
	return ingest.SourceConfig{
		DecoderConfig:  r.cfg.Decoder,
		Clock:          func() time.Time { return time.UnixMicro(r.readTime.Load()) },
		Logger:         r.cfg.Logger,
		Once:           r.cfg.Once,
		PollOnly:       r.cfg.Poll,
		Rescan:         r.cfg.Rescan,
		S3:             r.cfg.S3,
		IdleTimeout:    r.cfg.Engine.IdleTimeout,
		FollowSymlinks: r.cfg.FollowSymlinks,
	}
}

// setFrontiers caps each source's watermark at the event time of its
// input that lags (ingest.Position.Frontier), taken from the batch's
// logged end positions, so a replayed batch moves the watermark exactly
// as the first time.
func (r *runner) setFrontiers(end map[string]decodedPosition) {
	for name, d := range end {
		t, held := d.pos.Frontier()
		r.engine.SetFrontier(name, t, held)
	}
}

// readBatch is one micro-batch read from the sources, not yet processed.
type readBatch struct {
	entry offsetsEntry // BatchID is set by the processor
	recs  []tidemark.Record
	// recycle tells the sources that recs are done with: their read
	// buffers may be read into again (ingest.Recycler).
	recycle func()
}

// recordSlices is how many batches' record slices the loop has: while one
// batch commits and the next is processed, the reader waits for the first
// to be committed. The reader is the faster stage (a third slice, to read
// a batch further ahead, cost ~50 MB of peak RSS at 100,000-line batches
// and gained nothing measurable).
const recordSlices = 2

// run is the micro-batch loop. Reading and decoding the next batch, the
// engine and encoding of the one before, and the commits of the one before
// that overlap (pipeline.go); the write-ahead entry of a batch is still
// written only after the previous batch committed, and its start is
// exactly the previous batch's end.
func (r *runner) run(ctx context.Context) (err error) {
	r.maint = startMaintainer(ctx, r.cfg.Maintenance, r.cfg.Logger)
	defer func() {
		var final *lake.Lake
		if r.cfg.Once && err == nil && ctx.Err() == nil {
			final = r.lake // the input is done: one last pass
		}
		r.maint.stop(final)
	}()
	batches := make(chan readBatch, 1)
	free := make(chan []tidemark.Record, recordSlices) // record slices handed back for reuse
	for range recordSlices {
		free <- nil
	}
	readCtx, stopReading := context.WithCancel(ctx)
	readErr := make(chan error, 1)
	go func() {
		defer close(batches)
		readErr <- r.readLoop(readCtx, batches, free)
	}()
	defer func() {
		stopReading()
		for range batches { // let the reader finish; its batch is read again after a restart
		}
	}()
	if err := r.awaitLake(ctx); err != nil {
		return err
	}
	if err := r.pipeline(ctx, batches, free); err != nil {
		return err
	}
	if err := r.openDeferredLake(context.WithoutCancel(ctx)); err != nil { // no batch came
		return err
	}
	if ctx.Err() != nil {
		return nil // a clean stop: the batches read are committed
	}
	if err := <-readErr; err != nil {
		return err
	}
	if ctx.Err() != nil {
		return nil
	}
	if r.cfg.Once {
		if err := r.incomplete(); err != nil {
			return err
		}
	}
	if r.cfg.Drain {
		return r.drain(ctx)
	}
	return nil
}

// readLoop reads micro-batches until the input is exhausted (--once) or ctx
// is cancelled, which is a clean stop, not an error. With a trigger (and
// not --once), a batch that found lines goes on gathering them until the
// trigger since the last batch passed, or until a line closes a window
// (trigger.go).
func (r *runner) readLoop(ctx context.Context, out chan<- readBatch, free chan []tidemark.Record) error {
	var last time.Time // when the last batch was sent
	idle := 0
	gathering := r.cfg.Trigger > 0 && !r.cfg.Once
	var watch *closeWatch
	if gathering {
		watch = newCloseWatch(r.cfg)
	}
	for {
		var buf []tidemark.Record
		select {
		case buf = <-free:
		case <-ctx.Done():
			return nil
		}
		// A slice handed back still holds its old batch's records (its
		// length), whose payloads keep that batch's read buffers alive
		// until each record is overwritten: up to a third batch of input
		// live while this one is read. They go now; the capacity beyond
		// was never written (or cleared before).
		clear(buf)
		buf = buf[:0]
		readTime := time.UnixMicro(r.cfg.Clock().UnixMicro())
		r.readTime.Store(readTime.UnixMicro())
		start, err := marshalPositions(r.sources)
		if err != nil {
			return err
		}
		region := trace.StartRegion(ctx, "read")
		recs, err := r.read(ctx, buf)
		region.End()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		if len(recs) == 0 {
			free <- recs
			if r.cfg.Once && r.exhausted() {
				return nil
			}
			if !r.cfg.Once || idle > 0 {
				if r.wait(ctx) != nil {
					return nil
				}
			}
			idle++
			continue
		}
		idle = 0
		if gathering {
			recs, err = r.gather(ctx, recs, last.Add(r.cfg.Trigger), watch)
			if err != nil {
				if ctx.Err() != nil {
					return nil // not sent: read again after a restart
				}
				return err
			}
			if watch != nil {
				watch.batchSent()
			}
			r.lastRows = len(recs)
			last = r.cfg.Clock()
		}
		end, err := marshalPositions(r.sources)
		if err != nil {
			return err
		}
		entry := offsetsEntry{ReadTime: readTime.UnixMicro(), Start: start, End: end, Rows: len(recs), SourceRows: map[string]int{}}
		for i := range recs {
			entry.SourceRows[recs[i].Source]++
		}
		select {
		case out <- readBatch{entry: entry, recs: recs, recycle: ingest.Marks(r.sources)}:
		case <-ctx.Done():
			return nil
		}
	}
}

func (r *runner) exhausted() bool {
	for _, s := range r.sources {
		if !s.Exhausted() {
			return false
		}
	}
	return true
}

// read fills one micro-batch: each source gets an equal share of
// MaxBatchRows in --source order, and leftover room goes to whoever has more.
func (r *runner) read(ctx context.Context, recs []tidemark.Record) ([]tidemark.Record, error) {
	limit := r.cfg.MaxBatchRows
	share := max(1, limit/len(r.sources))
	for pass := 0; pass < 2 && len(recs) < limit; pass++ {
		for _, s := range r.sources {
			room := limit - len(recs)
			if pass == 0 {
				room = min(room, share)
			}
			if room <= 0 {
				break
			}
			var err error
			recs, err = s.Read(ctx, recs, room)
			if err != nil {
				return nil, fmt.Errorf("read source %s: %w", s.Name(), err)
			}
		}
	}
	return recs, nil
}

// wait blocks until any source may have new data (fsnotify event, S3 poll
// finding objects), or the rescan interval passes. With several sources it
// waits on all of them at once and returns at the first wake-up.
func (r *runner) wait(ctx context.Context) error {
	var waiters []ingest.Waiter
	for _, s := range r.sources {
		if w, ok := s.(ingest.Waiter); ok {
			waiters = append(waiters, w)
		}
	}
	switch {
	case len(waiters) == 0:
		return sleepCtx(ctx, min(r.cfg.Rescan, 100*time.Millisecond))
	case len(waiters) == 1 && len(r.sources) == 1:
		return waiters[0].Wait(ctx, r.cfg.Rescan)
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	woke := make(chan struct{}, len(waiters))
	var wg sync.WaitGroup
	for _, w := range waiters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w.Wait(wctx, r.cfg.Rescan) // its error is wctx's, or a timeout: either way, look again
			woke <- struct{}{}
		}()
	}
	<-woke
	cancel()
	wg.Wait()
	return ctx.Err()
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
