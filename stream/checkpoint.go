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
)

// The checkpoint is a small directory of JSON files, on the same kind of
// store as the lake (SPEC §4.5), modelled on Spark's offsets/ and commits/
// logs:
//
//	metadata.json        the stream id (the lake's txn appId), written once
//	offsets/<batch>.json  write-ahead: a batch's input ranges, before it is processed
//	commits/<batch>.json  after the lake commits: end positions and engine state
//
// Only the newest few entries are kept, so it does not grow with history.
type checkpoint struct {
	st store.Store
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
	Engine    []byte                     `json:"engine"` // Engine.State().MarshalBinary
	Watermark *int64                     `json:"watermark,omitempty"`
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
		return fmt.Errorf("read checkpoint %s: %w", key, err)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("checkpoint %s is corrupt: %w", key, err)
	}
	return nil
}

func (c *checkpoint) write(ctx context.Context, key string, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	if err := c.st.Put(ctx, key, bytes.NewReader(data), int64(len(data))); err != nil {
		return fmt.Errorf("write checkpoint %s: %w", key, err)
	}
	return nil
}

// recovered is what a restart finds in the checkpoint.
type recovered struct {
	commit  *commitEntry  // the last committed batch, nil on a fresh start
	pending *offsetsEntry // a batch logged but not committed: replay it first
}

// recover reads the newest commit and any batch logged after it.
func (c *checkpoint) recover(ctx context.Context) (recovered, error) {
	var r recovered
	lastCommit, err := c.latest(ctx, "commits")
	if err != nil {
		return r, err
	}
	if lastCommit >= 0 {
		r.commit = new(commitEntry)
		if err := c.read(ctx, batchKey("commits", lastCommit), r.commit); err != nil {
			return r, err
		}
	}
	lastOffsets, err := c.latest(ctx, "offsets")
	if err != nil {
		return r, err
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

// cleanup deletes the entries that batch upTo pushed out of the newest
// keepEntries: one per log, no listing on the batch path.
func (c *checkpoint) cleanup(ctx context.Context, upTo int64) error {
	var errs []error
	for _, dir := range []string{"offsets", "commits"} {
		if id := upTo - keepEntries; id >= 0 {
			errs = append(errs, c.st.Delete(ctx, batchKey(dir, id)))
		}
	}
	return errors.Join(errs...)
}

// sweep deletes every entry older than the newest keepEntries below upTo,
// including those a crash kept cleanup from deleting; run at start.
func (c *checkpoint) sweep(ctx context.Context, upTo int64) error {
	var errs []error
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
