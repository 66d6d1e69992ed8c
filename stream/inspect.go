package stream

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"slices"
	"time"

	"tidemark"
	"tidemark/ingest"
	"tidemark/lake/store"
	"tidemark/stream/engine"
)

// Status is where a stream stands, as its checkpoint records it: what
// `tidemark checkpoint` prints. Inspect reads it without taking the
// checkpoint's lock, so it works while the stream runs.
type Status struct {
	StreamID   string `json:"stream_id"`  // the lake's txn appId
	Checkpoint string `json:"checkpoint"` // where the checkpoint is
	Lock       Holder `json:"lock"`       // whether a stream holds the checkpoint now

	// Committed is the last batch in the lake and the checkpoint; nil before
	// the first commit.
	Committed *CommittedBatch `json:"last_committed,omitempty"`
	// Pending is a batch written ahead but not committed: in flight while the
	// stream runs, or interrupted by a crash (a restart replays it first).
	Pending *PendingBatch `json:"pending,omitempty"`

	Watermark *time.Time `json:"watermark,omitempty"` // W after the last commit; nil before there is one
	// HeldBy is the source whose watermark W is (the lowest, under the min
	// policy); "" when none recorded one equal to W.
	HeldBy  string         `json:"watermark_held_by,omitempty"`
	Sources []SourceStatus `json:"sources"`

	OpenWindows int   `json:"open_windows"` // distinct open windows
	StateRows   int   `json:"state_rows"`   // open (window, key) aggregates
	StateBytes  int64 `json:"state_bytes"`  // estimate of the memory they take in a running stream
	// EncodedStateBytes is the size of the engine state as a snapshot
	// holds it (the checkpoint keeps it as a snapshot plus changelogs).
	EncodedStateBytes int `json:"encoded_state_bytes"`
	// OpenFrom and OpenTo bound the open windows: the earliest start and
	// the latest end; nil when none is open.
	OpenFrom *time.Time `json:"open_from,omitempty"`
	OpenTo   *time.Time `json:"open_to,omitempty"`
}

// CommittedBatch is the last committed batch.
type CommittedBatch struct {
	BatchID int64 `json:"batch_id"`
	// ReadTime is when the batch was read (its write-ahead record's time);
	// the commit follows within the batch's duration. Zero if unknown.
	ReadTime time.Time `json:"read_time,omitzero"`
	Drain    bool      `json:"drain,omitempty"`
}

// PendingBatch is a batch logged in the write-ahead record, not committed.
type PendingBatch struct {
	BatchID    int64          `json:"batch_id"`
	ReadTime   time.Time      `json:"read_time"`
	Rows       int            `json:"rows"`
	SourceRows map[string]int `json:"source_rows,omitempty"`
	Drain      bool           `json:"drain,omitempty"`
}

// SourceStatus is one --source as of the last commit.
type SourceStatus struct {
	Name         string     `json:"name"`
	MaxEventTime *time.Time `json:"max_event_time,omitempty"` // nil while it has sent no valid event
	Watermark    *time.Time `json:"watermark,omitempty"`      // its max event time minus its budget; nil before one
	LastSeen     *time.Time `json:"last_seen,omitempty"`      // the last batch holding a line of it
	// HeldBy is the file at the source's frontier: the one its watermark
	// waits for (ingest.Position.Holder); nil when no file holds it.
	HeldBy *HeldFile    `json:"held_by,omitempty"`
	Files  []FileStatus `json:"files"`
	// Unreadable lists the paths the source skipped, as of the last commit.
	Unreadable []ingest.Unreadable `json:"unreadable,omitempty"`
}

// HeldFile is the file a source's watermark waits for.
type HeldFile struct {
	Path      string     `json:"path"`
	EventTime *time.Time `json:"event_time,omitempty"` // its newest event time: the source's watermark follows it; nil before its first
	LastLine  *time.Time `json:"last_line,omitempty"`  // when its last line was read
}

// Advice says, at now, how long the file has been silent and, once that
// is DefaultStallAfter or more, the --idle-timeout that would release it.
func (h *HeldFile) Advice(now time.Time) string {
	if h.LastLine == nil {
		return "no line read from it yet"
	}
	silent := now.Sub(*h.LastLine)
	out := fmt.Sprintf("last line read %s ago", silent.Round(time.Second))
	if silent >= DefaultStallAfter {
		out += fmt.Sprintf("; if it is not written any more, --idle-timeout %s (or less) releases it", releaseAfter(silent))
	}
	return out
}

// FileStatus is one file or object of a source: how far it is read.
type FileStatus struct {
	Path     string `json:"path"`
	Offset   int64  `json:"offset"`   // next unread byte (decompressed, for .gz/.zst)
	Finished bool   `json:"finished"` // an immutable input read to its end
}

// Inspect reads the checkpoint in st (opened at a checkpoint location) and
// reports where the stream stands. It changes nothing and takes no lock. A
// location without a checkpoint is an error matching fs.ErrNotExist.
func Inspect(ctx context.Context, st store.Store) (Status, error) {
	var snap checkpointSnapshot
	var err error
	// A running stream deletes old entries as it commits: an entry listed
	// and then gone means a newer one exists, so look again.
	for range 5 {
		snap, err = readSnapshot(ctx, st)
		if !errors.Is(err, fs.ErrNotExist) || snap.meta.ID == "" {
			break
		}
	}
	if err != nil {
		return Status{}, err
	}
	out, err := snap.status(st.String())
	out.Lock = lockHolder(ctx, st)
	return out, err
}

// Holder is who holds a checkpoint's lock, as far as can be seen without
// taking it: on a local checkpoint the flock(2) on its lock file, found in
// /proc/locks (Linux); on S3 the lease object and its expiry.
type Holder struct {
	Known   bool       `json:"known"` // false: cannot tell (no /proc/locks, say)
	Held    bool       `json:"held"`  // a stream runs on this checkpoint now
	PID     int        `json:"pid,omitempty"`
	Host    string     `json:"host,omitempty"`
	Expires *time.Time `json:"lease_expires,omitempty"` // S3: until when the lease holds unless renewed
}

func lockHolder(ctx context.Context, st store.Store) Holder {
	if _, ok := st.(store.Locker); ok {
		// The lease's own test (store.AcquireLease): a store that locks a
		// local file holds the lock there, not in a lease object; only it
		// can tell who holds it.
		li, ok := st.(store.LockInspector)
		if !ok {
			return Holder{}
		}
		h := li.LockHolder(localKey)
		return Holder{Known: h.Known, Held: h.Held, PID: h.PID}
	}
	data, err := store.ReadAll(ctx, st, leaseKey)
	if errors.Is(err, fs.ErrNotExist) {
		return Holder{Known: true}
	}
	var l store.LeaseHolder
	if err != nil || json.Unmarshal(data, &l) != nil {
		return Holder{}
	}
	exp := l.Expires.UTC()
	if exp.IsZero() && l.LegacyExpires > 0 {
		exp = time.UnixMilli(l.LegacyExpires).UTC()
	}
	return Holder{Known: true, Held: time.Now().Before(exp), PID: l.PID, Host: l.Host, Expires: &exp}
}

// checkpointSnapshot is what Inspect needs from the checkpoint, read by
// readSnapshot alone: the one place that knows the checkpoint's reader.
type checkpointSnapshot struct {
	meta       checkpointMeta
	last       committedBatch
	commitRead *offsetsEntry // the committed batch's write-ahead record, if still there
}

func readSnapshot(ctx context.Context, st store.Store) (checkpointSnapshot, error) {
	var s checkpointSnapshot
	c := &checkpoint{st: st}
	if err := c.read(ctx, "metadata.json", &s.meta); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return s, fmt.Errorf("no stream checkpoint in %s: %w", st, fs.ErrNotExist)
		}
		return s, err
	}
	var err error
	if s.last, err = latestCommitted(ctx, st); err != nil {
		return s, err
	}
	if s.last.BatchID >= 0 {
		var e offsetsEntry
		if err := c.read(ctx, batchKey("offsets", s.last.BatchID), &e); err == nil {
			s.commitRead = &e
		}
	}
	return s, nil
}

func (s checkpointSnapshot) status(where string) (Status, error) {
	out := Status{StreamID: s.meta.ID, Checkpoint: where, Sources: []SourceStatus{}}
	if p := s.last.Pending; p != nil {
		out.Pending = &PendingBatch{BatchID: p.BatchID, ReadTime: time.UnixMicro(p.ReadTime).UTC(), Rows: p.Rows, SourceRows: p.SourceRows, Drain: p.Drain}
	}
	c := s.last
	if c.BatchID < 0 {
		return out, nil
	}
	out.Committed = &CommittedBatch{BatchID: c.BatchID}
	if s.commitRead != nil {
		out.Committed.ReadTime = time.UnixMicro(s.commitRead.ReadTime).UTC()
		out.Committed.Drain = s.commitRead.Drain
	}
	if c.State == nil {
		return out, fmt.Errorf("checkpoint %s: batch %d has no engine state", where, c.BatchID)
	}
	state := *c.State
	if enc, err := state.MarshalBinary(); err == nil {
		out.EncodedStateBytes = len(enc)
	}
	if state.HasWatermark {
		out.Watermark = timePtr(state.Watermark)
	}
	out.StateRows = len(state.Open)
	windows := map[tidemark.Window]bool{}
	var from, to int64
	for i, r := range state.Open {
		windows[r.Window] = true
		if i == 0 || r.Window.Start < from {
			from = r.Window.Start
		}
		if i == 0 || r.Window.End > to {
			to = r.Window.End
		}
	}
	out.OpenWindows = len(windows)
	if len(state.Open) > 0 {
		out.OpenFrom, out.OpenTo = timePtr(from), timePtr(to)
	}
	if eng, err := engine.New(engine.Config{Window: state.Window}, &state); err == nil {
		out.StateBytes = eng.StateBytes()
	}

	// Sources: every one with a position or engine state, by name.
	byName := map[string]*SourceStatus{}
	get := func(name string) *SourceStatus {
		if s, ok := byName[name]; ok {
			return s
		}
		s := &SourceStatus{Name: name, Files: []FileStatus{}}
		byName[name] = s
		return s
	}
	for _, src := range state.Sources {
		ss := get(src.Name)
		if src.HasEventTime {
			ss.MaxEventTime = timePtr(src.MaxEventTime)
		}
		if w, ok := c.SourceWatermarks[src.Name]; ok && w > tidemark.MinTime {
			ss.Watermark = timePtr(w)
		}
		if src.LastSeen > 0 {
			t := time.Unix(0, src.LastSeen).UTC()
			ss.LastSeen = &t
		}
	}
	for name, raw := range c.End {
		var pos ingest.Position
		if err := json.Unmarshal(raw, &pos); err != nil {
			return out, fmt.Errorf("checkpoint %s: position of source %s: %w", where, name, err)
		}
		ss := get(name)
		for _, f := range pos.Files {
			ss.Files = append(ss.Files, FileStatus{Path: f.Path, Offset: f.Offset, Finished: f.Done})
		}
		if f, ok := pos.Holder(); ok {
			ss.HeldBy = &HeldFile{Path: f.Path}
			if t, ok := f.Standing(); ok {
				ss.HeldBy.EventTime = timePtr(t)
			}
			if f.LastLine > 0 {
				ss.HeldBy.LastLine = timePtr(f.LastLine)
			}
		}
		ss.Unreadable = pos.Unreadable
	}
	if state.HasWatermark {
		for _, name := range slices.Sorted(maps.Keys(c.SourceWatermarks)) {
			if c.SourceWatermarks[name] == state.Watermark {
				out.HeldBy = name
				break
			}
		}
	}
	for _, ss := range byName {
		out.Sources = append(out.Sources, *ss)
	}
	slices.SortFunc(out.Sources, func(a, b SourceStatus) int { return cmp.Compare(a.Name, b.Name) })
	return out, nil
}

func timePtr(us int64) *time.Time {
	t := time.UnixMicro(us).UTC()
	return &t
}

// CheckpointLocation is where a stream named name keeps its checkpoint in
// lake when --checkpoint is not given: <lake>/_checkpoints/<name>.
func CheckpointLocation(lake, name string) string {
	return joinLocation(lake, "_checkpoints", name)
}
