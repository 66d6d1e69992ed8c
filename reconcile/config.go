package reconcile

import (
	"log/slog"
	"time"

	"tidemark"
	"tidemark/lake/store"
)

// Config configures a run. The zero value (with Lake or LakeStore set) is a
// cron run: windows with late rows committed since the previous run.
type Config struct {
	// Lake is the lake's location: a directory or s3://bucket/prefix.
	Lake string
	// S3 configures an s3:// lake (zero: the AWS environment).
	S3 store.S3Config
	// LakeStore, when set, is used instead of opening Lake (a caller with
	// a store of its own; tests that inject write failures), as
	// stream.RunnerConfig.LakeStore.
	LakeStore store.Store

	// Since adds every closed window that started in the last Since
	// (by Clock); From/To (both set) add every closed window with a start
	// in [From, To). Setting both Since and From/To is an error.
	Since    time.Duration
	From, To time.Time

	// DryRun computes and reports the corrections without writing anything
	// (and without taking the lock).
	DryRun bool

	// LockTTL is how long the lock is valid; an older lock is stale and
	// taken over. 0 means one hour.
	LockTTL time.Duration
	// Owner names this run in the lock (0: host name and pid).
	Owner string

	// ShardIdle is lake.Config.ShardIdle: on a lake several streams write,
	// a stream whose last commit is more than this older than the newest
	// one's no longer holds windows open (0: lake.DefaultShardIdle). It must
	// be the streams' --shard-idle.
	ShardIdle time.Duration

	// Workers scan raw_events in parallel; 0 means GOMAXPROCS.
	Workers int

	// Logger receives one line per phase; nil discards.
	Logger *slog.Logger
	// Progress, when set, is called as partitions (window dates) are done,
	// for a progress bar.
	Progress func(done, total int)
	// Clock is the wall clock; nil means time.Now.
	Clock func() time.Time
}

// Txn app ids reconcile commits under. Each names one monotonic counter,
// because a Delta txn version must grow for a commit to count:
//
//   - AppRun: the run sequence, on the window_results and reconcile_log
//     commits of a run's corrections (a retried commit is a no-op);
//   - AppRaw: the raw_events version the run consumed; the next run looks
//     for late rows only in files committed after it;
//   - AppWatermark: the highest stream watermark the run saw; late rows of
//     windows still open then (event rule) are looked for again, by event
//     time, once the stream has closed them.
//
// AppRaw and AppWatermark are written by txn-only commits to reconcile_log
// after the corrections, so a crash in between makes the next run redo
// (and find nothing to correct), never skip.
const (
	AppRun       = "tidemark-reconcile"
	AppRaw       = "tidemark-reconcile.raw-version"
	AppWatermark = "tidemark-reconcile.watermark"
)

// SumTolerance is the relative tolerance of the sum comparison: the stream
// and the batch add the same values in a different order, and float
// addition is not associative. Count, min and max compare exactly. A late
// row always changes the count, so the tolerance never hides one.
const SumTolerance = 1e-9

// Validate checks what Run refuses before it opens anything (Run calls
// it first). Its errors are *tidemark.ConfigError, naming the config's
// fields.
func (c Config) Validate() error {
	switch {
	case c.Since < 0:
		return tidemark.ConfigErrorf("reconcile", "{Since} must not be negative, got %s", c.Since)
	case c.Since > 0 && (!c.From.IsZero() || !c.To.IsZero()):
		return tidemark.ConfigErrorf("reconcile", "give {Since} or {From}/{To}, not both")
	case c.From.IsZero() != c.To.IsZero():
		return tidemark.ConfigErrorf("reconcile", "{From} and {To} go together")
	case !c.From.IsZero() && !c.To.After(c.From):
		return tidemark.ConfigErrorf("reconcile", "{To} %s is not after {From} %s", c.To.Format(time.RFC3339), c.From.Format(time.RFC3339))
	}
	return nil
}

func (c Config) logger() *slog.Logger {
	if c.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return c.Logger
}
