package stream

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"strconv"
	"strings"

	"github.com/google/uuid"

	"tidemark/lake/store"
	"tidemark/stream/engine"
)

// The checkpoint is a small directory of JSON files, on the same kind of
// store as the lake (SPEC §4.5), modelled on Spark's offsets/ and commits/
// logs:
//
//	metadata.json        the stream id (the lake's txn appId), written once
//	offsets/<batch>.json  write-ahead: a batch's input ranges, before it is processed
//	state/<batch>.*       the engine state after the batch: snapshot or changelog (checkpoint_state.go)
//	commits/<batch>.json  after the lake commits: end positions and where the state is
//
// Only the newest few offsets and commits entries are kept, and only the
// state files the last commit needs, so it does not grow with history.
type checkpoint struct {
	st            store.Store
	maxChangelogs int    // changelogs between snapshots at most; 0 = maxChangelogs (tests set it lower)
	id            string // the stream id, once streamID has read it: a Pebble state's marker names it

	chain    *stateRef // the state chain of the last commit; nil before any
	obsolete []string  // state files of chains no commit needs, for cleanup
	written  int64     // bytes written since takeWritten

	// tip is the state chain the next state file extends: the last one
	// written. It runs ahead of chain while a batch's state file is written
	// before the batch before it committed (pipeline.go); only the
	// goroutine writing state files uses it.
	tip *stateRef
}

// checkpointMeta is metadata.json.
type checkpointMeta struct {
	ID string `json:"id"`
}

// offsetsEntry is the write-ahead record of one batch.
type offsetsEntry struct {
	BatchID    int64                      `json:"batch_id"`
	ReadTime   int64                      `json:"read_time_us"` // arrival and ingest time of the batch
	Start      map[string]json.RawMessage `json:"start"`        // per source, the position before the batch
	End        map[string]json.RawMessage `json:"end"`          // per source, the position after it
	Rows       int                        `json:"rows"`
	SourceRows map[string]int             `json:"source_rows,omitempty"` // records per source
	Drain      bool                       `json:"drain,omitempty"`       // the --drain batch: no input, closes every window
}

// commitEntry is written once a batch is in the lake.
type commitEntry struct {
	BatchID   int64                      `json:"batch_id"`
	End       map[string]json.RawMessage `json:"end"`
	State     *stateRef                  `json:"state,omitempty"`
	Engine    []byte                     `json:"engine,omitempty"` // the whole state, inline: checkpoints written before state/ existed
	Watermark *int64                     `json:"watermark,omitempty"`
	// SourceWatermarks is each source's watermark (µs) after the batch,
	// with its own budget: for inspection, which knows no budgets.
	SourceWatermarks map[string]int64 `json:"source_watermarks,omitempty"`
}

// keepEntries is how many offsets/commits entries survive cleanup.
const keepEntries = 5

func batchKey(dir string, id int64) string {
	return fmt.Sprintf("%s/%020d.json", dir, id)
}

// streamID returns the checkpoint's stream id, creating it on first use.
func (c *checkpoint) streamID(ctx context.Context) (string, error) {
	data, err := store.ReadAll(ctx, c.st, "metadata.json")
	if errors.Is(err, fs.ErrNotExist) {
		meta, _ := json.Marshal(checkpointMeta{ID: uuid.NewString()})
		err = c.st.PutIfAbsent(ctx, "metadata.json", meta)
		if err != nil && !errors.Is(err, store.ErrExists) {
			return "", fmt.Errorf("create checkpoint metadata: %w", err)
		}
		data, err = store.ReadAll(ctx, c.st, "metadata.json")
	}
	if err != nil {
		return "", fmt.Errorf("read checkpoint metadata: %w", err)
	}
	var meta checkpointMeta
	if err := json.Unmarshal(data, &meta); err != nil || meta.ID == "" {
		return "", fmt.Errorf("checkpoint metadata.json in %s is corrupt", c.st)
	}
	c.id = meta.ID
	return meta.ID, nil
}

// batchIDs lists the batch ids stored in dir, ascending.
func (c *checkpoint) batchIDs(ctx context.Context, dir string) ([]int64, error) {
	infos, err := c.st.List(ctx, dir+"/")
	if err != nil {
		return nil, fmt.Errorf("list checkpoint %s: %w", dir, err)
	}
	var ids []int64
	for _, in := range infos {
		name := strings.TrimSuffix(strings.TrimPrefix(in.Key, dir+"/"), ".json")
		id, err := strconv.ParseInt(name, 10, 64)
		if err != nil || strings.Contains(name, "/") {
			continue // not ours
		}
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids, nil
}

// latest returns the highest batch id stored in dir, or -1.
func (c *checkpoint) latest(ctx context.Context, dir string) (int64, error) {
	ids, err := c.batchIDs(ctx, dir)
	if err != nil || len(ids) == 0 {
		return -1, err
	}
	return ids[len(ids)-1], nil
}

func (c *checkpoint) read(ctx context.Context, key string, v any) error {
	data, err := store.ReadAll(ctx, c.st, key)
	if err != nil {
		return fmt.Errorf("read checkpoint %s: %w", c.describe(key), err)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(v); err != nil {
		return &corruptError{key: c.describe(key), err: err}
	}
	return nil
}

func (c *checkpoint) write(ctx context.Context, key string, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	if err := c.put(ctx, key, data); err != nil {
		return err
	}
	c.written += int64(len(data))
	return nil
}

// commit records a batch whose lake commits are done: its state file, then
// its commit entry (the commit point). state overrides the engine's state
// (the drain batch).
//
// With the Pebble store the engine's changes go to the local database
// first, in one Pebble batch with a marker naming this batch and its
// changes' CRC, so the snapshot can be a scan of it. A crash after that
// leaves a database ahead of the last commit: the marker no longer matches
// and the restart rebuilds it from the checkpoint.
func (c *checkpoint) commit(ctx context.Context, batchID int64, end map[string]json.RawMessage, eng engine.Windower, state engine.Saved) error {
	ref, err := c.writeState(ctx, batchID, eng, state)
	if err != nil {
		return err
	}
	return c.writeCommit(ctx, commitEntryOf(batchID, end, eng, state, ref))
}

// commitEntryOf is the commit entry of a batch whose state file is ref,
// taken from the engine right after the batch (state overrides its
// watermark: the drain batch).
func commitEntryOf(batchID int64, end map[string]json.RawMessage, eng engine.Windower, state engine.Saved, ref *stateRef) commitEntry {
	entry := commitEntry{BatchID: batchID, End: end, State: ref, SourceWatermarks: eng.SourceWatermarks()}
	w, hasW := eng.Watermark()
	if state != nil {
		w, hasW = state.Mark()
	}
	if hasW {
		entry.Watermark = &w
	}
	return entry
}

// writeCommit writes a commit entry, the batch's commit point. The batch's
// state file (entry.State) counts among the bytes written for the batch
// now, not when it was written, which may be before the batch before it
// committed.
func (c *checkpoint) writeCommit(ctx context.Context, entry commitEntry) error {
	if err := c.write(ctx, batchKey("commits", entry.BatchID), entry); err != nil {
		return err
	}
	if entry.State != nil {
		c.written += entry.State.Bytes
		c.committed(entry.BatchID, entry.State)
	}
	return nil
}

// writeState is the part of commit before the commit entry: the local
// Pebble state (when used) and the batch's state file. Nothing durable
// names the state file before the commit entry does, and a restart sweeps
// one no commit names, so the runner writes it while the lake commits the
// batch: it only reads the engine, which no one changes meanwhile.
func (c *checkpoint) writeState(ctx context.Context, batchID int64, eng engine.Windower, state engine.Saved) (*stateRef, error) {
	changes, err := eng.Changelog()
	if err != nil {
		return nil, fmt.Errorf("encode the changelog of batch %d: %w", batchID, err)
	}
	after, _ := state.(*engine.State) // a window engine's drain state
	if err := eng.Flush(engine.FlushTag{StreamID: c.id, BatchID: batchID, Token: frameCRC(changes), After: after}); err != nil {
		return nil, err
	}
	return c.saveState(ctx, batchID, eng, state, changes)
}

// recovered is what a restart finds in the checkpoint.
type recovered struct {
	commit  *commitEntry    // the last committed batch, nil on a fresh start
	state   *committedState // its engine state; nil with commit
	pending *offsetsEntry   // a batch logged but not committed: replay it first
}

// recover reads the newest commit, its engine state and any batch logged
// after it. It is also how the checkpoint is inspected: it only reads.
//
// When the newest commit entry or the state file it names is damaged, and
// the batch's write-ahead entry and the previous commit with its whole state
// chain are intact, that batch is recovered as if the crash had come just
// before its commit entry: it is replayed from its logged input, and the
// lake skips the table commits it already holds. That is provably the state
// the damaged entry recorded. Otherwise the error names the damaged file.
func (c *checkpoint) recover(ctx context.Context) (recovered, error) {
	var r recovered
	lastCommit, err := c.latest(ctx, "commits")
	if err != nil {
		return r, err
	}
	lastOffsets, err := c.latest(ctx, "offsets")
	if err != nil {
		return r, err
	}
	if lastCommit >= 0 {
		r.commit, r.state, err = c.loadCommit(ctx, lastCommit)
		var bad *corruptError
		if errors.As(err, &bad) && lastOffsets == lastCommit && lastCommit > 0 {
			prev, prevState, prevErr := c.loadCommit(ctx, lastCommit-1)
			if prevErr == nil {
				r.commit, r.state, err = prev, prevState, nil
				lastCommit--
			}
		}
		if err != nil {
			return r, err
		}
	}
	if lastOffsets > lastCommit {
		if lastOffsets != lastCommit+1 {
			return r, fmt.Errorf("checkpoint %s: batch %d logged after commit %d: entries are missing", c.st, lastOffsets, lastCommit)
		}
		r.pending = new(offsetsEntry)
		if err := c.read(ctx, batchKey("offsets", lastOffsets), r.pending); err != nil {
			return r, err
		}
	}
	return r, nil
}

// loadCommit reads commit id and its engine state, and makes its chain the
// checkpoint's current one.
func (c *checkpoint) loadCommit(ctx context.Context, id int64) (*commitEntry, *committedState, error) {
	key := batchKey("commits", id)
	data, err := store.ReadAll(ctx, c.st, key)
	if err != nil {
		return nil, nil, fmt.Errorf("read checkpoint %s: %w", c.describe(key), err)
	}
	entry := new(commitEntry)
	if err := json.Unmarshal(data, entry); err != nil || entry.BatchID != id {
		if err == nil {
			err = fmt.Errorf("it holds batch %d", entry.BatchID)
		}
		return nil, nil, &corruptError{key: c.describe(key), err: err}
	}
	if entry.State == nil {
		if entry.Engine == nil {
			return nil, nil, &corruptError{key: c.describe(key), err: errors.New("no engine state")}
		}
		st := new(engine.State) // written before state/ existed: the whole state inline
		if err := st.UnmarshalBinary(entry.Engine); err != nil {
			return nil, nil, &corruptError{key: c.describe(key), err: err}
		}
		c.chain, c.tip = nil, nil // the next batch writes a snapshot
		return entry, &committedState{snapshot: &engine.Encoded{State: st}}, nil
	}
	cs, err := c.loadState(ctx, id, entry.State)
	if err != nil {
		return nil, nil, err
	}
	c.chain, c.tip = entry.State, entry.State
	return entry, cs, nil
}

// cleanup deletes the entries that batch upTo pushed out of the newest
// keepEntries, one per log, and the state files of a chain its snapshot
// replaced: no listing on the batch path.
func (c *checkpoint) cleanup(ctx context.Context, upTo int64) error {
	errs := []error{c.deleteObsolete(ctx)}
	for _, dir := range []string{"offsets", "commits"} {
		if id := upTo - keepEntries; id >= 0 {
			errs = append(errs, c.st.Delete(ctx, batchKey(dir, id)))
		}
	}
	return errors.Join(errs...)
}

// sweep deletes every entry older than the newest keepEntries below upTo,
// including those a crash kept cleanup from deleting, and every state file
// commit upTo does not need; run at start, after recover.
func (c *checkpoint) sweep(ctx context.Context, upTo int64) error {
	errs := []error{c.sweepState(ctx, upTo)}
	for _, dir := range []string{"offsets", "commits"} {
		ids, err := c.batchIDs(ctx, dir)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, id := range ids {
			if id <= upTo-keepEntries {
				errs = append(errs, c.st.Delete(ctx, batchKey(dir, id)))
			}
		}
	}
	return errors.Join(errs...)
}

// resume is what a store engine resumes: the last commit and its state.
func (r recovered) resume(streamID string) engine.Resume {
	var res engine.Resume
	if r.commit != nil && r.commit.State != nil {
		res.Tag = engine.FlushTag{StreamID: streamID, BatchID: r.commit.BatchID, Token: r.commit.State.Token}
		res.Committed = true
	} else if r.commit != nil {
		res.Tag = engine.FlushTag{StreamID: streamID, BatchID: r.commit.BatchID}
	}
	if r.state != nil {
		res.Snapshot, res.Changelogs = r.state.snapshot, r.state.changelogs
	}
	return res
}

// engine builds the engine a restart resumes with: the committed state, or
// a fresh one.
func (r recovered) engine(cfg engine.Config) (*engine.Engine, error) {
	if r.state == nil {
		return engine.New(cfg, nil)
	}
	e, err := r.state.engine(cfg)
	if err != nil {
		return nil, fmt.Errorf("checkpoint engine state of batch %d: %w", r.commit.BatchID, err)
	}
	return e, nil
}

// openEngine is engine with the state store opts: for StatePebble the
// local database of stream streamID, reused when its marker matches the
// last commit and rebuilt from the checkpoint otherwise.
func (r recovered) openEngine(cfg engine.Config, opts StateOptions, streamID string) (*engine.Engine, error) {
	if err := opts.validate(); err != nil {
		return nil, err
	}
	if opts.Store != StatePebble {
		return r.engine(cfg)
	}
	st, err := openPebbleStore(opts, streamID)
	if err != nil {
		return nil, err
	}
	e, err := engine.OpenStore(cfg, st, r.resume(streamID))
	if err != nil && r.commit != nil {
		return nil, fmt.Errorf("checkpoint engine state of batch %d: %w", r.commit.BatchID, err)
	}
	return e, err
}
