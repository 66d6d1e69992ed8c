package stream

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"strconv"
	"strings"

	"tidemark/lake/store"
)

// The engine state after each batch lives beside the commits, in state/:
//
//	state/<batch>.snapshot   the whole state (State.MarshalBinary)
//	state/<batch>.changelog  what the batch changed (Changes.MarshalBinary)
//
// The state after batch n is the newest snapshot s <= n with the changelogs
// s+1..n applied in order; commits/<n>.json names s (stateRef). A batch
// writes its state file before its commit entry, and old files are deleted
// only after a commit naming a newer snapshot is written, so a crash at any
// point leaves a complete chain for the last commit; files no commit needs
// (a crashed attempt's, an old chain's) are swept at the next start.
//
// The snapshot rule: a batch writes a snapshot instead of a changelog when
// there is none yet, at --drain, after maxChangelogs changelogs, or when the
// changelogs since the last snapshot, its own included, would outweigh that
// snapshot. So the checkpoint bytes a batch writes are, amortized, at most
// twice what it changed (a snapshot is paid for by as many changelog bytes
// before it), and a restart reads at most about twice the state's size.
const maxChangelogs = 100

// stateRef is the part of a commit entry that locates the engine state.
type stateRef struct {
	Snapshot       int64  `json:"snapshot"`        // the batch whose snapshot the chain starts from
	File           string `json:"file"`            // this batch's state file
	Bytes          int64  `json:"bytes"`           // its size
	CRC            uint32 `json:"crc32c"`          // its CRC-32C
	SnapshotBytes  int64  `json:"snapshot_bytes"`  // size of the chain's snapshot
	ChangelogBytes int64  `json:"changelog_bytes"` // changelog bytes after the snapshot, this batch's included
	Changelogs     int    `json:"changelogs"`      // changelogs after the snapshot, this batch's included
}

// snapshotKey and changelogKey name the state files of a batch.
func snapshotKey(id int64) string  { return fmt.Sprintf("state/%020d.snapshot", id) }
func changelogKey(id int64) string { return fmt.Sprintf("state/%020d.changelog", id) }

// saveState writes the engine state after batch id, a changelog or a
// snapshot by the rule above, and returns the reference its commit entry
// carries. override replaces the engine's state (the drain batch, whose
// checkpointed watermark is not the engine's); it is always a snapshot.
func (c *checkpoint) saveState(ctx context.Context, id int64, eng windower, override drainState) (*stateRef, error) {
	prev := c.chain
	var data []byte
	var err error
	limit := c.maxChangelogs
	if limit <= 0 {
		limit = maxChangelogs
	}
	snapshot := override != nil || prev == nil || prev.Changelogs >= limit
	if !snapshot {
		if data, err = eng.changelog(); err != nil {
			return nil, fmt.Errorf("encode the changelog of batch %d: %w", id, err)
		}
		snapshot = prev.ChangelogBytes+int64(len(data)) > prev.SnapshotBytes
	}
	ref := &stateRef{Snapshot: id}
	if snapshot {
		if override == nil {
			data = eng.snapshot()
		} else if data, err = override.MarshalBinary(); err != nil {
			return nil, fmt.Errorf("encode the state after batch %d: %w", id, err)
		}
		ref.File, ref.SnapshotBytes = snapshotKey(id), int64(len(data))
	} else {
		ref.Snapshot, ref.SnapshotBytes = prev.Snapshot, prev.SnapshotBytes
		ref.File = changelogKey(id)
		ref.ChangelogBytes = prev.ChangelogBytes + int64(len(data))
		ref.Changelogs = prev.Changelogs + 1
	}
	ref.Bytes, ref.CRC = int64(len(data)), crc32.Checksum(data, castagnoli)
	if err := c.put(ctx, ref.File, data); err != nil {
		return nil, err
	}
	return ref, nil
}

// committed records that the commit entry carrying ref is written: from now
// on ref's chain is the one a restart needs, and an older chain is garbage
// for cleanup.
func (c *checkpoint) committed(id int64, ref *stateRef) {
	if prev := c.chain; prev != nil && ref.Snapshot != prev.Snapshot {
		c.obsolete = append(c.obsolete, snapshotKey(prev.Snapshot))
		for b := prev.Snapshot + 1; b < ref.Snapshot; b++ {
			c.obsolete = append(c.obsolete, changelogKey(b))
		}
	}
	c.chain = ref
}

// deleteObsolete deletes the files of chains no commit needs any more.
func (c *checkpoint) deleteObsolete(ctx context.Context) error {
	var errs []error
	for _, key := range c.obsolete {
		errs = append(errs, c.st.Delete(ctx, key))
	}
	c.obsolete = c.obsolete[:0]
	return errors.Join(errs...)
}

// sweepState deletes every state file outside the current chain: old
// chains a crash kept cleanup from deleting, and files of attempts that
// never committed.
func (c *checkpoint) sweepState(ctx context.Context, upTo int64) error {
	infos, err := c.st.List(ctx, "state/")
	if err != nil {
		return fmt.Errorf("list checkpoint state: %w", err)
	}
	var errs []error
	for _, in := range infos {
		if !c.needed(in.Key, upTo) {
			errs = append(errs, c.st.Delete(ctx, in.Key))
		}
	}
	return errors.Join(errs...)
}

// needed reports whether a state file belongs to the chain of commit upTo.
func (c *checkpoint) needed(key string, upTo int64) bool {
	if c.chain == nil {
		return false
	}
	name := strings.TrimPrefix(key, "state/")
	num, kind, ok := strings.Cut(name, ".")
	id, err := strconv.ParseInt(num, 10, 64)
	if !ok || err != nil {
		return true // not ours: leave it
	}
	switch kind {
	case "snapshot":
		return id == c.chain.Snapshot
	case "changelog":
		return id > c.chain.Snapshot && id <= upTo
	}
	return true
}

// put writes one checkpoint object and counts its bytes.
func (c *checkpoint) put(ctx context.Context, key string, data []byte) error {
	if err := c.st.Put(ctx, key, bytes.NewReader(data), int64(len(data))); err != nil {
		return fmt.Errorf("write checkpoint %s: %w", key, err)
	}
	c.written += int64(len(data))
	return nil
}

// takeWritten returns the checkpoint bytes written since the last call: a
// batch's offsets entry, state file and commit entry.
func (c *checkpoint) takeWritten() int64 {
	n := c.written
	c.written = 0
	return n
}

// committedState is the engine state of a commit: a snapshot and the
// changelogs after it, in batch order.
type committedState struct {
	snapshot   *State
	changelogs []*Changes
	// session and sessionChanges replace them in a session stream's
	// checkpoint (decodeSnapshot picks by the file's magic).
	session        *SessionState
	sessionChanges []*SessionChanges
}

// loadState reads the chain ref names for commit id, checking each file;
// a damaged or missing one is an error naming it.
func (c *checkpoint) loadState(ctx context.Context, id int64, ref *stateRef) (*committedState, error) {
	if ref.Snapshot > id || (ref.Snapshot == id) != (ref.Changelogs == 0) {
		return nil, fmt.Errorf("checkpoint %s: commit %d names an impossible state chain (snapshot %d, %d changelogs)", c.st, id, ref.Snapshot, ref.Changelogs)
	}
	read := func(key string, last bool) ([]byte, error) {
		data, err := c.readFile(ctx, key)
		if err != nil {
			return nil, err
		}
		if last && (int64(len(data)) != ref.Bytes || crc32.Checksum(data, castagnoli) != ref.CRC) {
			return nil, &corruptError{key: c.describe(key), err: fmt.Errorf("%d bytes and checksum differ from what commit %d recorded (%d bytes)", len(data), id, ref.Bytes)}
		}
		return data, nil
	}
	data, err := read(snapshotKey(ref.Snapshot), ref.Snapshot == id)
	if err != nil {
		return nil, err
	}
	cs := new(committedState)
	if err := cs.decodeSnapshot(data); err != nil {
		return nil, &corruptError{key: c.describe(snapshotKey(ref.Snapshot)), err: err}
	}
	for b := ref.Snapshot + 1; b <= id; b++ {
		data, err := read(changelogKey(b), b == id)
		if err != nil {
			return nil, err
		}
		if err := cs.decodeChangelog(data); err != nil {
			return nil, &corruptError{key: c.describe(changelogKey(b)), err: err}
		}
	}
	return cs, nil
}

// readFile reads a state file; a missing one is corruption too (the commit
// names it).
func (c *checkpoint) readFile(ctx context.Context, key string) ([]byte, error) {
	data, err := store.ReadAll(ctx, c.st, key)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, &corruptError{key: c.describe(key), err: errors.New("missing")}
	}
	if err != nil {
		return nil, fmt.Errorf("read checkpoint %s: %w", c.describe(key), err)
	}
	return data, nil
}

func (c *checkpoint) describe(key string) string {
	return strings.TrimSuffix(c.st.String(), "/") + "/" + key
}

// corruptError is a checkpoint file that is damaged, truncated or missing.
type corruptError struct {
	key string
	err error
}

func (e *corruptError) Error() string {
	return fmt.Sprintf("checkpoint file %s is corrupt: %v", e.key, e.err)
}

func (e *corruptError) Unwrap() error { return e.err }

// engine builds an engine with cfg holding the committed state.
func (cs *committedState) engine(cfg Config) (*Engine, error) {
	e, err := New(cfg, cs.snapshot)
	if err != nil {
		return nil, err
	}
	for i, ch := range cs.changelogs {
		if err := e.Apply(ch); err != nil {
			return nil, fmt.Errorf("replay changelog %d of %d: %w", i+1, len(cs.changelogs), err)
		}
	}
	return e, nil
}

// State returns the committed state as one snapshot (for inspection).
func (cs *committedState) State() (*State, error) {
	if cs.snapshot == nil {
		return cs.sessionView()
	}
	e, err := cs.engine(Config{Window: cs.snapshot.Window})
	if err != nil {
		return nil, err
	}
	return e.State(), nil
}

// committedBatch is the latest committed batch of a checkpoint, as a
// restart resumes from it.
type committedBatch struct {
	BatchID   int64                      // -1: nothing committed yet
	End       map[string]json.RawMessage // per source, the position after the batch
	Watermark *int64                     // nil before any watermark
	// SourceWatermarks is each source's watermark (µs), as the batch's
	// commit recorded it; nil in checkpoints written before it was.
	SourceWatermarks map[string]int64
	State            *State        // the engine state, snapshot and changelogs folded (sorted)
	Pending          *offsetsEntry // a batch logged after it and not committed (a restart replays it)
}

// latestCommitted reads, without changing anything, the latest committed
// batch of the checkpoint in st: the one function inspection (and anything
// else outside the runner) should use to see "the state and positions a
// restart would resume from". Damaged entries are errors naming the file,
// recovered as a restart would when that is provably safe.
func latestCommitted(ctx context.Context, st store.Store) (committedBatch, error) {
	ck := &checkpoint{st: st}
	rec, err := ck.recover(ctx)
	if err != nil {
		return committedBatch{BatchID: -1}, err
	}
	out := committedBatch{BatchID: -1, Pending: rec.pending}
	if rec.commit == nil {
		return out, nil
	}
	out.BatchID, out.End, out.Watermark = rec.commit.BatchID, rec.commit.End, rec.commit.Watermark
	out.SourceWatermarks = rec.commit.SourceWatermarks
	if out.State, err = rec.state.State(); err != nil {
		return out, fmt.Errorf("checkpoint %s: engine state of batch %d: %w", st, rec.commit.BatchID, err)
	}
	return out, nil
}
