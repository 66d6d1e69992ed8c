package stream

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"tidemark/lake"
)

// Maintenance is what a stream does for its lake's health in the
// background, beside its batches. The zero value is the default: both on.
type Maintenance struct {
	// NoAutoCompact keeps every batch's data files as written; otherwise
	// the small files of each partition are merged (lake.AutoCompact).
	NoAutoCompact bool
	// AutoCompact sets the number of small files a partition gathers
	// before they are merged, and the size merged files grow to.
	AutoCompact lake.AutoCompactOptions
	// NoVacuum leaves vacuum to `tidemark vacuum`; otherwise the lake is
	// vacuumed once a day (VacuumEvery) with the safe retention.
	NoVacuum bool
}

// VacuumEvery is how often the streams of a lake vacuum it between them
// (lake.VacuumIfDue), with lake.SafeRetention.
const VacuumEvery = 24 * time.Hour

// maintainEvery spaces maintenance passes: with --trigger 0 a batch
// commits many times a second, and a pass (a snapshot of three tables)
// after each would cost more than the merging it does.
const maintainEvery = time.Second

// maintainedTables are the tables a stream writes, whose small files it
// merges.
var maintainedTables = []string{lake.TableRawEvents, lake.TableQuarantine, lake.TableWindowResults}

// maintainer runs the background maintenance of a stream on a goroutine
// of its own: after each committed batch (kick), it merges the small files
// of the stream's tables and vacuums when due. It never holds a batch
// back: a kick while a pass runs is remembered, not waited for, and its
// commits are ordinary optimistic Delta commits that conflict only with a
// commit removing the same files (then one of them is redone).
type maintainer struct {
	cfg    Maintenance
	log    *slog.Logger
	kicks  chan *lake.Lake
	quit   chan struct{} // closed by stop: no pass after the current one
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	errs   map[string]string // the last error logged per task, not repeated
}

// startMaintainer starts the maintainer; stop ends it.
func startMaintainer(ctx context.Context, cfg Maintenance, log *slog.Logger) *maintainer {
	m := &maintainer{cfg: cfg, log: log, kicks: make(chan *lake.Lake, 1), quit: make(chan struct{}), errs: map[string]string{}}
	if cfg.NoAutoCompact && cfg.NoVacuum {
		return m
	}
	m.ctx, m.cancel = context.WithCancel(ctx)
	m.wg.Go(m.loop)
	return m
}

// kick asks for a maintenance pass on lk after a committed batch; it
// never blocks.
func (m *maintainer) kick(lk *lake.Lake) {
	if m == nil || m.cancel == nil || lk == nil {
		return
	}
	select {
	case m.kicks <- lk:
	default: // a pass is already due
	}
}

// stop ends the maintainer. With final set (a --once run that finished
// its input) it lets the current pass finish and makes one last pass on
// final, so that streams run from cron keep their lake healthy too;
// otherwise (a stop signal, an error) an unfinished pass is abandoned: its
// files are orphans for vacuum, its commit never happened.
func (m *maintainer) stop(final *lake.Lake) {
	if m == nil || m.cancel == nil {
		return
	}
	defer m.cancel()
	if final == nil {
		m.cancel()
	}
	close(m.quit)
	m.wg.Wait()
	if final != nil {
		m.pass(m.ctx, final)
	}
}

func (m *maintainer) loop() {
	for {
		var lk *lake.Lake
		select {
		case lk = <-m.kicks:
		case <-m.quit:
			return
		case <-m.ctx.Done():
			return
		}
		m.pass(m.ctx, lk)
		select {
		case <-time.After(maintainEvery):
		case <-m.quit:
			return
		case <-m.ctx.Done():
			return
		}
	}
}

// pass is one round of maintenance. Errors are logged (once each until
// they change) and retried at the next pass: maintenance failing never
// stops the stream.
func (m *maintainer) pass(ctx context.Context, lk *lake.Lake) {
	if !m.cfg.NoAutoCompact {
		for _, t := range maintainedTables {
			rep, err := lk.AutoCompact(ctx, t, m.cfg.AutoCompact)
			if ctx.Err() != nil {
				return
			}
			if m.failed("compact "+t, err) {
				continue
			}
			if rep.Version >= 0 {
				m.log.Info("auto compaction", "table", t, "files_merged", rep.FilesRemoved, "files_written", rep.FilesAdded,
					"rows", rep.Rows, "bytes", rep.BytesAdded, "version", rep.Version)
			}
		}
	}
	if !m.cfg.NoVacuum {
		rep, ran, err := lk.VacuumIfDue(ctx, VacuumEvery, lake.VacuumOptions{Retain: lake.SafeRetention})
		if ctx.Err() != nil || m.failed("vacuum", err) {
			return
		}
		if ran {
			m.log.Info("vacuum", "files_deleted", rep.FilesRemoved, "bytes", rep.BytesRemoved, "in_flight", rep.InFlight)
		}
	}
}

// failed logs err as task's, unless it is the error logged last time.
func (m *maintainer) failed(task string, err error) bool {
	if err == nil {
		delete(m.errs, task)
		return false
	}
	if m.errs[task] != err.Error() {
		m.errs[task] = err.Error()
		m.log.Warn("background maintenance failed; the stream goes on, and retries after its next batch", "task", task, "error", err)
	}
	return true
}
