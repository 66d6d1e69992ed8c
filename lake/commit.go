package lake

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"runtime/trace"
	"strings"
	"time"

	"tidemark/lake/delta"
)

// SafeRetention is the shortest vacuum retention accepted without
// VacuumOptions.Force: Delta's default retentionDurationCheck floor.
// Versions newer than the retention stay readable (time travel, readers of
// a version that compaction or an upsert replaced since), and none is
// younger than a long job reading it.
const SafeRetention = 168 * time.Hour

// DefaultWriterGrace is the writer grace of Config.WriterGrace's zero value.
const DefaultWriterGrace = time.Hour

// ErrFilesGone is the error of a commit whose added files are no longer in
// the store (deleted from outside, or by a vacuum that judged them
// abandoned), after the writer rewrote them as often as it would.
var ErrFilesGone = errors.New("lake: a data file to commit is gone")

// errStale marks a commit attempt a writer must redo: one of its files is
// gone, or is old enough that a vacuum may take it before the commit lands
// (then also errSlow).
var (
	errStale = errors.New("lake: data files must be rewritten")
	errSlow  = errors.New("lake: writing took too long")
)

// maxSlowAttempts bounds the attempts redone because writing took more than
// half the grace: one pause (a stalled process, a storm of store retries)
// is worth a second try, but work that is simply that long would only be
// slow again.
const maxSlowAttempts = 2

// maxAttempts bounds how often a writer redoes a commit (a lost race that
// touched its partitions, a file of its attempt gone). Two streams
// emitting into the same window_date, beside reconcile and compact, lose
// races routinely; with the back-off below 20 attempts ride that out.
const maxAttempts = 20

// backoff is the pause before redoing an attempt that lost a race: full
// jitter over an exponential bound (20 ms doubling, at most 2 s), so
// writers that keep colliding spread out instead of colliding again.
func backoff(ctx context.Context, attempt int) error {
	bound := min(20*time.Millisecond<<min(attempt, 10), 2*time.Second)
	t := time.NewTimer(rand.N(bound) + time.Millisecond)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// The writer grace is what keeps vacuum and writers apart without any
// marker or lock: vacuum never deletes a file no version references whose
// modification time is within the grace (it may belong to a writer that
// has not committed yet), and every writer checks, right before each
// commit attempt, that the files it adds are all there with their sizes and
// that it started writing them less than half the grace ago; otherwise it
// rewrites them. A vacuum deletes an uncommitted file only once it is a
// whole grace old, by which time its writer has either committed it or
// thrown it away, so no commit can reference a file a vacuum deleted (clock
// skew between hosts and the pause between check and commit must stay
// below half the grace: 30 minutes by default).

// checkAdds is the pre-commit check of the files one attempt adds, started
// being the time the attempt began writing them.
func (l *Lake) checkAdds(ctx context.Context, h *handle, files []addFile, started time.Time) error {
	for _, f := range files {
		if !f.written.IsZero() && f.written.Before(started) {
			started = f.written
		}
	}
	if age := l.clock().Sub(started); age > l.grace/2 {
		return fmt.Errorf("%w: %w: %s: files written over %s, more than half the writer grace %s", errStale, errSlow, h.def.name, age.Round(time.Millisecond), l.grace)
	}
	for _, f := range files {
		key := h.dt.FileKey(f.Path)
		r, err := l.st.Open(ctx, key)
		if errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("%w: %s is gone before its commit", errStale, key)
		}
		if err != nil {
			return fmt.Errorf("check %s before commit: %w", key, err)
		}
		size := r.Size()
		if err := r.Close(); err != nil {
			return fmt.Errorf("check %s before commit: %w", key, err)
		}
		if size != f.Size {
			return fmt.Errorf("%w: %s has %d bytes, %d were written", errStale, key, size, f.Size)
		}
	}
	return nil
}

// attemptFunc builds one commit attempt from the latest snapshot (nil when
// the table does not exist): the transaction and the data files it wrote
// for it. A nil transaction means nothing to do.
type attemptFunc func(snap *delta.Snapshot) (*delta.Transaction, []addFile, error)

// update is the one commit loop of the lake's writers. Each attempt reads
// the latest snapshot, builds the transaction, checks the files it adds
// (checkAdds) and commits. It redoes the attempt, after deleting the
// attempt's files, when the commit conflicts, when a file to add is gone or
// stale, or when a file the attempt read is gone because a newer version
// removed it (compaction and vacuum between our snapshot and our read).
// It returns the version committed (or, with nothing to do, read).
func (l *Lake) update(ctx context.Context, h *handle, fn attemptFunc) (int64, error) {
	return l.updateChecked(ctx, h, nil, fn)
}

// updateChecked is update with precommit (when set) called right before
// each commit, once the attempt is built and its files written: for a read
// the commit depends on that its conflict check cannot see (another
// table's), done as late as it can be. Its error ends the update, the
// attempt's files deleted.
func (l *Lake) updateChecked(ctx context.Context, h *handle, precommit func(context.Context) error, fn attemptFunc) (int64, error) {
	var last error
	slow := 0
	for attempt := 0; attempt < maxAttempts; attempt++ {
		snap, err := h.dt.Snapshot(ctx, -1)
		readVersion := int64(-1)
		switch {
		case errors.Is(err, delta.ErrNoTable):
			snap = nil
		case err != nil:
			return -1, err
		default:
			readVersion = snap.Version
		}
		started := l.clock()
		region := trace.StartRegion(ctx, "write "+h.def.name)
		tx, files, err := fn(snap)
		region.End()
		if err != nil {
			l.discard(ctx, h, files)
			if errors.Is(err, fs.ErrNotExist) {
				if l.stillActive(ctx, h, err) {
					return -1, fmt.Errorf("%w (the table references a file that is gone: `tidemark repair --table %s` lists what was lost and removes the references)", err, h.def.name)
				}
				last = err
				continue
			}
			return -1, err
		}
		if tx == nil {
			l.discard(ctx, h, files)
			return readVersion, nil
		}
		if precommit != nil {
			if err := precommit(ctx); err != nil {
				l.discard(ctx, h, files)
				return -1, err
			}
		}
		if err := l.checkAdds(ctx, h, files, started); err != nil {
			l.discard(ctx, h, files)
			if !errors.Is(err, errStale) {
				return -1, err
			}
			last = err
			if errors.Is(err, errSlow) {
				if slow++; slow >= maxSlowAttempts {
					break
				}
			}
			l.log.Warn("rewriting data files before commit", "table", h.def.name, "reason", err)
			continue
		}
		tx.ReadVersion = readVersion
		region = trace.StartRegion(ctx, "commit "+h.def.name)
		v, err := h.dt.Commit(ctx, tx)
		region.End()
		switch {
		case err == nil:
			return v, nil
		case errors.Is(err, delta.ErrAlreadyCommitted):
			l.discard(ctx, h, files) // a replay raced us; our copies are orphans
			return v, err
		case errors.Is(err, delta.ErrConflict):
			l.discard(ctx, h, files)
			last = err
			if err := backoff(ctx, attempt); err != nil {
				return -1, err
			}
			continue
		default:
			// The commit may or may not have landed (an ambiguous store
			// error): leave the files for vacuum rather than risk deleting
			// live data.
			return -1, err
		}
	}
	if errors.Is(last, errSlow) {
		return -1, fmt.Errorf("%w: %w", ErrFilesGone, last)
	}
	if errors.Is(last, errStale) {
		return -1, fmt.Errorf("%w: %d attempts: %w", ErrFilesGone, maxAttempts, last)
	}
	return -1, fmt.Errorf("%d attempts: %w", maxAttempts, last)
}

// stillActive reports whether the missing file err names is still in the
// latest snapshot: then the table has a hole (the file was lost from
// outside). Otherwise a newer version removed it and a vacuum took it
// after our snapshot: the attempt is redone on the newer one.
func (l *Lake) stillActive(ctx context.Context, h *handle, err error) bool {
	var pe *fs.PathError
	if !errors.As(err, &pe) {
		return false
	}
	snap, serr := h.dt.Snapshot(ctx, -1)
	if serr != nil {
		return false
	}
	for i := range snap.Files {
		k := snap.Files[i].Key(h.dt.Path())
		if pe.Path == k || strings.HasSuffix(pe.Path, "/"+k) {
			return true
		}
	}
	return false
}
