package ingest

import (
	"context"
	"log/slog"
	"slices"
	"strings"
	"time"

	"tidemark"
	"tidemark/lake/store"
)

// Source yields records from one --source in a deterministic order.
type Source interface {
	// Name returns the --source value, as stored in each record's Source.
	Name() string
	// Read returns up to max records available now (complete lines only),
	// appended to dst. It returns no records (and nil error) when nothing is
	// available at the moment. The records' Payloads stay valid after later
	// Reads (each Read allocates its own arena, or keeps its read buffers),
	// until a Recycler is told the records are done with.
	Read(ctx context.Context, dst []tidemark.Record, max int) ([]tidemark.Record, error)
	// Position is the resume point after the last record Read returned.
	Position() Position
	// Exhausted reports, for --once, that everything present when the
	// source was opened has been read.
	Exhausted() bool
	Close() error
}

// Waiter is implemented by sources that can tell when new data may be
// available, so a runner starts a batch as soon as data appears instead
// of polling. Wait returns when there may be something to Read, when
// timeout passes, or when ctx is done (returning its error).
type Waiter interface {
	Wait(ctx context.Context, timeout time.Duration) error
}

// Recycler is implemented by sources whose records' payloads point into
// read buffers the source reuses once told the records are done with.
// Without a Recycle call nothing is reused.
type Recycler interface {
	// Mark returns a mark for every record returned so far. It is called
	// by the goroutine that reads.
	Mark() uint64
	// Recycle says that no record returned before mark is read any more
	// (nor its payload's bytes): the buffers they point into may be read
	// into again. It may be called while another goroutine reads.
	Recycle(mark uint64)
}

// Marks returns the call that tells each source that can recycle that the
// records it returned so far are done with: the reader takes it after a
// batch's Reads, and the batch's consumer calls it once it is finished
// with the batch's records.
func Marks(srcs []Source) func() {
	var marks []func()
	for _, s := range srcs {
		if r, ok := s.(Recycler); ok {
			m := r.Mark()
			marks = append(marks, func() { r.Recycle(m) })
		}
	}
	return func() {
		for _, f := range marks {
			f()
		}
	}
}

// Limiter is implemented by sources that can stop at a position: the
// replay of a logged batch bounds the source at the batch's end, so that
// event-time aligned reading takes exactly the batch's records, in the
// order of the first time.
type Limiter interface {
	Limit(end Position)
}

// SourceConfig configures Open. The zero value (plus a DecoderConfig) tails
// a directory with fsnotify and a rescan every 10 s.
type SourceConfig struct {
	DecoderConfig

	Clock  func() time.Time // read wall clock for Arrival; nil = time.Now
	Logger *slog.Logger     // nil = discard

	// Once reads only what is present at Open (--once): files present then,
	// up to their size then. A final line without "\n" is then a record.
	Once bool
	// Rescan is the period of the full directory rescan that backs up
	// fsnotify (events can be lost); 0 = 10 s.
	Rescan time.Duration
	// PollOnly disables fsnotify: only the periodic rescan finds changes
	// (for NFS and other file systems without inotify).
	PollOnly bool
	// FollowSymlinks follows every symbolic link of a local source, to files
	// and directories; by default only links resolving inside the source's
	// root are followed (symlink.go says why).
	FollowSymlinks bool

	// IdleTimeout is --idle-timeout: a live file read to its end that had
	// no new line for this long (by Clock) stops holding the source's
	// watermark back (FilePosition.Hold); 0 = never.
	IdleTimeout time.Duration

	// S3Settle is, for S3 sources, how long an object must be unchanged
	// before it is read; 0 = DefaultS3Settle, < 0 = no wait.
	S3Settle time.Duration
	// S3 sets up the client of S3 sources, as for an S3 lake (--s3-endpoint
	// and the rest); the zero value takes everything from the usual AWS
	// environment.
	S3 store.S3Config
}

// DefaultRescan is the rescan period of a zero SourceConfig.
const DefaultRescan = 10 * time.Second

func (c SourceConfig) withDefaults() SourceConfig {
	c.DecoderConfig = c.DecoderConfig.withDefaults()
	if c.Clock == nil {
		c.Clock = time.Now
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Rescan <= 0 {
		c.Rescan = DefaultRescan
	}
	return c
}

// Position is a source's resume point: for each file (or object) still
// present, how far it has been read. It is plain data meant to be stored
// as JSON in a checkpoint.
type Position struct {
	Files []FilePosition `json:"files,omitempty"`
	// Gone lists local files read (in part or whole) that are no longer
	// there, the most recent last, at most maxGone: a compressed rotation
	// or a copy of one that appears later continues from where it ended.
	Gone []FilePosition `json:"gone,omitempty"`
	// Unreadable lists the paths the source skipped, as of the Position
	// (unreadable.go): shown by `tidemark checkpoint`, never read back.
	Unreadable []Unreadable `json:"unreadable,omitempty"`
}

// positionOf builds a Position from the files in order, each looked up by
// pos. Headers are copied: the caller keeps the Position while the source
// reads on. DirSource and the S3 source both use it, their file maps differing.
func positionOf(order []string, pos func(rel string) FilePosition) Position {
	var p Position
	for _, rel := range order {
		fp := pos(rel)
		fp.Header = slices.Clone(fp.Header)
		p.Files = append(p.Files, fp)
	}
	return p
}

// FilePosition is the resume point in one file. Offset is always at a
// record boundary: every byte before it belongs to a record already
// returned by Read.
type FilePosition struct {
	Path string `json:"path"` // relative to the source root, with "/" separators

	// ID is a local file's identity (the file_id column): the hash of its
	// first bytes, decompressed, when it was first seen (fingerprint.go). It
	// never changes, and a rename, a compressed or copied rotation or a
	// restored copy of the file has the same ID. Empty in checkpoints
	// written before content identity, and while a file has no complete
	// line yet.
	ID string `json:"id,omitempty"`
	// Hash is the hash of the file's first HashLen bytes (decompressed), up
	// to fingerprintBytes: it grows with a short file. Head is the hash of
	// its first line (CSV: header and first record). In checkpoints without
	// ID, Hash is the FNV-64a of the first HashLen raw bytes.
	Hash    string `json:"hash,omitempty"`
	HashLen int    `json:"hash_len,omitempty"`
	Head    string `json:"head,omitempty"`
	// Dev and Inode are the file's device and inode when last seen: a hint,
	// checked before the content (inode numbers are reused, and a copy or a
	// restore has new ones).
	Dev   uint64 `json:"dev,omitempty"`
	Inode uint64 `json:"inode,omitempty"`

	// ETag identifies an object version (S3 sources).
	ETag string `json:"etag,omitempty"`

	Offset int64  `json:"offset"`           // next unread byte, in the decompressed stream
	Header []byte `json:"header,omitempty"` // CSV header line, once read
	Done   bool   `json:"done,omitempty"`   // an immutable input read to its end

	// Event-time progress of the file (its own watermark input): the
	// largest event time of a valid record read from it, µs.
	Max    int64 `json:"max_us,omitempty"`
	HasMax bool  `json:"has_max,omitempty"`
	// LastLine is the read time (µs) of the last line read from the file,
	// for --idle-timeout per file.
	LastLine int64 `json:"last_line_us,omitempty"`
	// Next is, for a file with no valid event read yet, the event time of
	// the first valid record at Offset (DirSource.peek): where it stands in
	// aligned reading, and what it holds the watermark at, until it is read.
	Next    int64 `json:"next_us,omitempty"`
	HasNext bool  `json:"has_next,omitempty"`
	// Rotated: the file was renamed while tracked (rotated away), so once
	// read to its end it is taken as finished.
	Rotated bool `json:"rotated,omitempty"`
	// Hold says that when the Position was taken the file held the
	// source's watermark back: it had unread data, or it is a live file
	// that may still grow (not finished, rotated or idle). See Frontier.
	Hold bool `json:"hold,omitempty"`
}

// Open opens the source named by spec: s3://bucket/prefix (see s3Source),
// a directory, a directory with a glob ("logs/*.ndjson"), or a single file. resume is a Position previously
// returned by the source's Position (the zero Position starts afresh).
func Open(ctx context.Context, spec string, cfg SourceConfig, resume Position) (Source, error) {
	cfg = cfg.withDefaults()
	if err := cfg.DecoderConfig.Validate(); err != nil {
		return nil, err
	}
	if strings.HasPrefix(spec, "s3://") {
		return openS3(ctx, spec, cfg, resume)
	}
	return openDir(ctx, spec, cfg, resume)
}
