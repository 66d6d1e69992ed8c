package delta

import (
	"fmt"
	"io/fs"
	"log/slog"
	"path"
	"sync"
	"time"

	"tidemark/lake/store"
)

// ErrNoTable is returned when the path holds no Delta log. It matches
// fs.ErrNotExist.
var ErrNoTable = &sentinel{msg: "delta: no table", is: fs.ErrNotExist}

// ErrConflict is returned by Commit when a concurrent commit changed what
// the transaction read; Update redoes the transaction on the new snapshot.
var ErrConflict = &sentinel{msg: "delta: commit conflict"}

// ErrAlreadyCommitted is returned by Commit when the table already holds the
// transaction's Txn (same appId, version at least as high): the commit was
// done before and nothing was written.
var ErrAlreadyCommitted = &sentinel{msg: "delta: transaction already committed"}

// ErrUnsupported is returned for tables that use a protocol feature this
// package cannot read or write correctly (deletion vectors, column mapping,
// reader features, newer protocol versions). The wrapping error names it.
var ErrUnsupported = &sentinel{msg: "delta: unsupported table feature"}

type sentinel struct {
	msg string
	is  error
}

func (s *sentinel) Error() string { return s.msg }
func (s *sentinel) Is(target error) bool {
	return s.is != nil && target == s.is
}

// Options configure a Table. The zero value means the defaults.
type Options struct {
	// CheckpointInterval: a checkpoint is written after every commit whose
	// version is a positive multiple of it. 0 means 100; a negative value
	// disables checkpoint writing.
	CheckpointInterval int64
	// EngineInfo is written in commitInfo.engineInfo; "" means "tidemark".
	EngineInfo string
	// Clock gives commit timestamps; nil means time.Now.
	Clock func() time.Time
	// Logger receives non-fatal problems (a failed checkpoint write); nil
	// discards them.
	Logger *slog.Logger
	// IgnoreCheckpoints makes snapshots replay every JSON commit from
	// version 0 (for verification; needs the whole log).
	IgnoreCheckpoints bool
	// MaxAttempts bounds how often Update redoes a conflicting transaction;
	// 0 means 10.
	MaxAttempts int
}

// Table is one Delta table in a store. It is safe for concurrent use; it
// caches the latest snapshot it has read to replay only new commits.
type Table struct {
	st   store.Store
	path string // table directory within the store, "" for the root
	opts Options

	mu     sync.Mutex
	cached *state // latest state read or written, nil if none
}

// Open returns the table at path (a directory key within st, such as
// "raw_events"). It does no I/O: a missing table shows up as ErrNoTable from
// Snapshot, and is created by a Commit with ReadVersion -1.
func Open(st store.Store, tablePath string, opts Options) *Table {
	if opts.CheckpointInterval == 0 {
		opts.CheckpointInterval = 100
	}
	if opts.EngineInfo == "" {
		opts.EngineInfo = "tidemark"
	}
	if opts.Clock == nil {
		opts.Clock = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.MaxAttempts <= 0 {
		opts.MaxAttempts = 10
	}
	return &Table{st: st, path: path.Clean("/" + tablePath)[1:], opts: opts}
}

// Path returns the table's directory key within the store.
func (t *Table) Path() string { return t.path }

// Store returns the store the table lives in.
func (t *Table) Store() store.Store { return t.st }

// FileKey returns the store key of a data file given its path relative to the
// table (not URI-encoded), for writing data files before a commit.
func (t *Table) FileKey(rel string) string { return path.Join(t.path, rel) }

func (t *Table) logKey(name string) string { return path.Join(t.path, "_delta_log", name) }

func commitName(v int64) string { return fmt.Sprintf("%020d.json", v) }
