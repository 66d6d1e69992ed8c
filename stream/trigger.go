package stream

import (
	"context"
	"slices"
	"time"

	"tidemark"
	"tidemark/stream/engine"
)

// DefaultTrigger is `tidemark stream --trigger`'s default. A following
// stream gathers lines for up to this long into one micro-batch, and sends
// the batch at once when a line closes a window (closeWatch), so windows
// are committed and printed well within a second of the line that closes
// them while a busy stream commits a few hundred times an hour instead of
// several times a second (docs/lake-health.md, "Batching").
// RunnerConfig.Trigger's zero value is 0: a batch as soon as data arrives.
const DefaultTrigger = 10 * time.Second

// gatherPoll spaces the reads that gather lines into one batch: each read
// costs a pass over every source, and a line waits at most this long
// before the reader sees whether it closes a window.
const gatherPoll = 250 * time.Millisecond

// gather reads more lines into recs, a batch already started, until the
// batch is due (the trigger since the last batch passed), full
// (MaxBatchRows), or holds a line that closes a window. It returns ctx's
// error when ctx ends first.
func (r *runner) gather(ctx context.Context, recs []tidemark.Record, due time.Time, w *closeWatch) ([]tidemark.Record, error) {
	// Room for as many lines as the last batch had: grown read by read,
	// a batch of 20,000 lines is copied a dozen times.
	recs = slices.Grow(recs, max(0, min(r.lastRows, r.cfg.MaxBatchRows)-len(recs)))
	seen := 0
	for len(recs) < r.cfg.MaxBatchRows {
		if w != nil {
			w.observe(recs[seen:], r.readTime.Load())
			seen = len(recs)
			if w.closes() {
				break
			}
		}
		left := due.Sub(r.cfg.Clock())
		if left <= 0 {
			break
		}
		// A poll, not the sources' wake-ups: a busy file wakes the reader
		// at every write, and each wake-up costs a pass over the sources.
		if err := sleepCtx(ctx, min(gatherPoll, left)); err != nil {
			return recs, err
		}
		var err error
		if recs, err = r.read(ctx, recs); err != nil {
			return recs, err
		}
	}
	return recs, nil
}

// closeWatch is the reader's estimate of whether the lines of a batch
// close a window, so that the batch is sent before its trigger is due.
// It applies the watermark rule (engine/watermark.go) to the lines read:
// per source its max event time less its lateness, combined by the
// policy over the sources not idle. W only closes a window when every
// source that takes part passed its end, so one busy file does not send
// batches early while another lags: it waits for the trigger like the
// rest. The estimate ignores frontiers (a lagging file of one source),
// so it may send a batch that closes nothing (one more commit) but never
// holds back one that closes a window. Session windows end per key,
// which the reader does not track: a session stream has no early send.
type closeWatch struct {
	cfg    engine.Config
	size   int64 // window size, µs
	slide  int64
	idle   int64 // µs; 0 = never
	max    map[string]int64
	last   map[string]int64 // read time of the source's last line, µs
	w      int64            // the estimate; never decreases
	hasW   bool
	closed int64 // windows closed as of the last batch sent (by end order)
	sent   bool
}

// newCloseWatch returns the watch of a windowed stream, nil for sessions.
func newCloseWatch(cfg RunnerConfig) *closeWatch {
	if cfg.SessionGap != 0 {
		return nil
	}
	spec := cfg.Engine.Window.Normalized()
	return &closeWatch{cfg: cfg.Engine, size: spec.Size, slide: spec.Slide, idle: cfg.Engine.IdleTimeout.Microseconds(),
		max: map[string]int64{}, last: map[string]int64{}}
}

// observe takes in the valid lines of recs, read at readTime (µs).
func (w *closeWatch) observe(recs []tidemark.Record, readTime int64) {
	for i := range recs {
		r := &recs[i]
		w.last[r.Source] = readTime
		if !r.Valid() {
			continue
		}
		if m, ok := w.max[r.Source]; !ok || r.EventTime > m {
			w.max[r.Source] = r.EventTime
		}
	}
	found := false
	var est int64
	for name, m := range w.max {
		if w.idle > 0 && readTime-w.last[name] >= w.idle {
			continue
		}
		wm := tidemark.SubSat(m, w.cfg.LatenessOf(name).Microseconds())
		switch {
		case !found:
			est, found = wm, true
		case w.cfg.Policy == engine.PolicyMax:
			est = max(est, wm)
		default:
			est = min(est, wm)
		}
	}
	if found && (!w.hasW || est > w.w) {
		w.w, w.hasW = est, true
	}
}

// closedCount numbers the windows W has closed, in end order: the window
// starting at s closes once s <= W - size.
func (w *closeWatch) closedCount() int64 {
	return tidemark.FloorDiv(tidemark.SubSat(w.w, w.size), w.slide)
}

// closes reports whether the lines observed since the last batch sent
// close a window.
func (w *closeWatch) closes() bool {
	return w.hasW && (!w.sent || w.closedCount() > w.closed)
}

// batchSent records that the lines observed so far went in a batch.
func (w *closeWatch) batchSent() {
	if w.hasW {
		w.closed, w.sent = w.closedCount(), true
	}
}
