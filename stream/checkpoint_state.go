package stream

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"strconv"
	"strings"

	"tidemark/lake/store"
	"tidemark/stream/engine"
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
// chain a restart would read (the last snapshot and the changelogs since,
// this batch's included) would outgrow twice the snapshot the state would
// make now. That size is estimated without encoding anything: the last
// snapshot's bytes scaled by how the state's heap estimate (state_bytes)
// moved since it was written. So a restart reads at most about twice the
// state's current size, and the checkpoint bytes a batch writes are,
// amortized, at most twice what it changed: a snapshot of size S comes only
// after about S changelog bytes. A state that only grows (a backfill, a
// stream filling its lateness window with new keys) writes changelogs,
// since each one adds to the state about as much as to the chain; before
// this rule, snapshots came at doubling intervals while a state grew (three
// of 22 MB in all for the 600k-event per-user run), each encoding the whole
// state.
const maxChangelogs = 100

// snapshotDue reports whether a batch whose changelog is changes bytes
// writes a snapshot after prev by the rule above; open is the engine's open
// rows after the batch.
func snapshotDue(prev *stateRef, changes, open int64, limit int) bool {
	if prev == nil || prev.Changelogs >= limit {
		return true
	}
	chain := prev.SnapshotBytes + prev.ChangelogBytes + changes
	if prev.SnapshotRows <= 0 {
		// Written before snapshot_rows was recorded, or of an empty
		// state: the changelogs may weigh what the snapshot does.
		return prev.ChangelogBytes+changes > prev.SnapshotBytes
	}
	now := float64(prev.SnapshotBytes) * float64(open) / float64(prev.SnapshotRows)
	return float64(chain) > 2*now
}

// stateRef is the part of a commit entry that locates the engine state.
type stateRef struct {
	Snapshot       int64  `json:"snapshot"`        // the batch whose snapshot the chain starts from
	File           string `json:"file"`            // this batch's state file
	Bytes          int64  `json:"bytes"`           // its size
	CRC            uint32 `json:"crc32c"`          // its frame's CRC-32C (frameCRC)
	SnapshotBytes  int64  `json:"snapshot_bytes"`  // size of the chain's snapshot
	ChangelogBytes int64  `json:"changelog_bytes"` // changelog bytes after the snapshot, this batch's included
	Changelogs     int    `json:"changelogs"`      // changelogs after the snapshot, this batch's included
	// SnapshotRows is how many open rows the chain's snapshot holds: the
	// snapshot rule scales SnapshotBytes by the rows open now against it.
	SnapshotRows int64 `json:"snapshot_rows,omitempty"`
	// Token is the frame CRC-32C of the batch's changes
	// (Changes.MarshalBinary), whichever file the batch wrote: a local Pebble state records it with
	// the batch id, and a restart reuses that state only when both match.
	Token uint32 `json:"changes_crc32c"`
}

// snapshotKey and changelogKey name the state files of a batch.
func snapshotKey(id int64) string  { return fmt.Sprintf("state/%020d.snapshot", id) }
func changelogKey(id int64) string { return fmt.Sprintf("state/%020d.changelog", id) }

// saveState writes the engine state after batch id, a changelog or a
// snapshot by the rule above, and returns the reference its commit entry
// carries. override replaces the engine's state (the drain batch, whose
// checkpointed watermark is not the engine's); it is always a snapshot.
// changes is the batch's encoded changelog (its CRC is the ref's Token).
func (c *checkpoint) saveState(ctx context.Context, id int64, eng engine.Windower, override engine.Saved, changes []byte) (*stateRef, error) {
	prev := c.tip
	limit := c.maxChangelogs
	if limit <= 0 {
		limit = maxChangelogs
	}
	open := eng.OpenRows()
	snapshot := override != nil || snapshotDue(prev, int64(len(changes)), open, limit)
	ref := &stateRef{Snapshot: id, Token: frameCRC(changes), SnapshotRows: open}
	if !snapshot {
		ref.Snapshot, ref.SnapshotBytes, ref.SnapshotRows = prev.Snapshot, prev.SnapshotBytes, prev.SnapshotRows
		ref.File = changelogKey(id)
		ref.ChangelogBytes = prev.ChangelogBytes + int64(len(changes))
		ref.Changelogs = prev.Changelogs + 1
		ref.Bytes, ref.CRC = int64(len(changes)), frameCRC(changes)
		if err := c.put(ctx, ref.File, changes); err != nil {
			return nil, err
		}
		c.tip = ref
		return ref, nil
	}
	ref.File = snapshotKey(id)
	if override != nil {
		data, err := override.MarshalBinary()
		if err != nil {
			return nil, fmt.Errorf("encode the state after batch %d: %w", id, err)
		}
		ref.SnapshotBytes = int64(len(data))
		ref.Bytes, ref.CRC = int64(len(data)), frameCRC(data)
		if err := c.put(ctx, ref.File, data); err != nil {
			return nil, err
		}
		c.tip = ref
		return ref, nil
	}
	n, sum, err := c.putSnapshot(ctx, ref.File, eng)
	if err != nil {
		return nil, err
	}
	ref.Bytes, ref.CRC, ref.SnapshotBytes = n, sum, n
	c.tip = ref
	return ref, nil
}

// putSnapshot streams the engine's snapshot to key through a pipe. The
// store needs its size up front: the memory engine adds up its encoded
// lengths without encoding; the Pebble store measures it (and its CRC) by a
// first scan of the same Pebble snapshot the second writes. Memory stays at
// the encoder's 64 KiB buffer whatever the state's size.
func (c *checkpoint) putSnapshot(ctx context.Context, key string, eng engine.Windower) (int64, uint32, error) {
	snap, err := eng.Snapshot()
	if err != nil {
		return 0, 0, fmt.Errorf("write checkpoint %s: %w", key, err)
	}
	defer snap.Release()
	size, sum := snap.Size, snap.Sum
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		n, again, err := snap.WriteTo(pw)
		if err == nil && (n != size || (snap.Measured && again != sum)) {
			err = errors.New("stream: the state changed while its snapshot was written")
		}
		sum = again
		pw.CloseWithError(err)
		done <- err
	}()
	putErr := c.st.Put(ctx, key, pr, size)
	pr.CloseWithError(io.ErrClosedPipe) // unblock the writer if Put stopped early
	if err := errors.Join(<-done, putErr); err != nil {
		return 0, 0, fmt.Errorf("write checkpoint %s: %w", key, err)
	}
	return size, sum, nil // the frame's CRC, as frameCRC reads it from the file
}

// frameCRC is a state file's own CRC-32C, of everything before it (its
// last four bytes): what a commit entry records of the file (crc32c) and
// of the batch's changes (changes_crc32c). Entries written before recorded
// the CRC-32C of the whole file instead, frame CRC included, which is the
// same constant for every intact file (a CRC's residue); checkFileCRC
// accepts it for them.
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

func frameCRC(data []byte) uint32 {
	if len(data) < 4 {
		return crc32.Checksum(data, castagnoli)
	}
	return binary.LittleEndian.Uint32(data[len(data)-4:])
}

// checkFileCRC reports whether a state file matches the CRC its commit
// entry recorded: its frame's CRC, or for entries written before that, the
// whole file's.
func checkFileCRC(data []byte, recorded uint32) bool {
	return frameCRC(data) == recorded || crc32.Checksum(data, castagnoli) == recorded
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

// put writes one checkpoint object. Its bytes are counted by the caller
// (write, writeCommit): put also serves the state files, written
// off the committing goroutine.
func (c *checkpoint) put(ctx context.Context, key string, data []byte) error {
	if err := c.st.Put(ctx, key, bytes.NewReader(data), int64(len(data))); err != nil {
		return fmt.Errorf("write checkpoint %s: %w", key, err)
	}
	return nil
}

// takeWritten returns the checkpoint bytes written since the last call: a
// batch's offsets entry, state file and commit entry.
func (c *checkpoint) takeWritten() int64 {
	n := c.written
	c.written = 0
	return n
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
		if last && (int64(len(data)) != ref.Bytes || !checkFileCRC(data, ref.CRC)) {
			return nil, &corruptError{key: c.describe(key), err: fmt.Errorf("%d bytes and checksum differ from what commit %d recorded (%d bytes)", len(data), id, ref.Bytes)}
		}
		return data, nil
	}
	data, err := read(snapshotKey(ref.Snapshot), ref.Snapshot == id)
	if err != nil {
		return nil, err
	}
	cs, err := decodeStateFile(data)
	if err != nil {
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
