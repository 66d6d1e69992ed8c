package lake

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strings"

	"tidemark"
	"tidemark/lake/delta"
	"tidemark/lake/store"
)

// The table side of `tidemark requeue` (package requeue decides which
// quarantined lines now parse). Moving a line from quarantine to raw_events
// touches two Delta tables, which cannot commit atomically, so a move is:
//
//  1. the intent, _requeue/<run>.json: the run id, the settings the lines
//     were decoded with, and the identity of every row that moves; written
//     before anything else, never changed;
//  2. raw_events: one commit adding the moved rows, with txn
//     {appId: tidemark-requeue:<run>, version: 0};
//  3. quarantine: one commit rewriting the files that hold the moved rows
//     without them (remove + add), with the same txn.
//
// A run killed at any point is completed by the next one (FinishRequeue,
// from the intent: the rows still sit in quarantine until step 3, and
// decode the same way under the recorded settings); the txns make each
// step happen once. Between steps 2 and 3 a moved row is in both tables:
// ScanQuarantine leaves out the rows of an intent whose raw_events commit
// has landed and whose quarantine commit is not in the snapshot it reads,
// so no reader counts a line twice. Intents are kept (a reader with an old
// quarantine snapshot needs them; they hold row identities, not lines).

// requeueDir holds the intents.
const requeueDir = "_requeue/"

// RequeueLockKey is the lease that keeps two requeue runs apart.
const RequeueLockKey = requeueDir + "lock"

// requeuePrefix starts the txn appId of a requeue run.
const requeuePrefix = "tidemark-requeue:"

// RequeueAppID is the txn appId of the run id's commits.
func RequeueAppID(runID string) string { return requeuePrefix + runID }

// QuarantineID names one quarantine row: where the line was read and the
// batch that quarantined it.
type QuarantineID struct {
	Source     string `json:"source"`
	File       string `json:"file"`
	Offset     int64  `json:"offset"`
	IngestTime int64  `json:"ingest_time"`
	BatchID    int64  `json:"batch_id"`
}

// ID returns the row's identity.
func (r QuarantineRow) ID() QuarantineID {
	return QuarantineID{Source: r.Source, File: r.File, Offset: r.Offset, IngestTime: r.IngestTime, BatchID: r.BatchID}
}

// RequeueIntent is the durable plan of one requeue run.
type RequeueIntent struct {
	RunID    string          `json:"run_id"`
	Created  int64           `json:"created"`  // µs, the lake's clock
	Settings json.RawMessage `json:"settings"` // how the rows were decoded; the lake does not read it
	Rows     []QuarantineID  `json:"rows"`     // in the order of the records CommitRequeue gets
	// Payloads holds, by index into Rows, the whole lines of rows
	// quarantined as too long, read again from their files (quarantine
	// kept only their first bytes), so a rerun decodes what this run did.
	Payloads map[int][]byte `json:"payloads,omitempty"`
}

// Moved is one line that moves: the valid record decoded from its
// quarantine row, and the row's identity (its ingest time and batch id
// stay the line's in raw_events).
type Moved struct {
	ID     QuarantineID
	Record tidemark.Record
}

// BeginRequeue writes the intent (step 1). An intent with the same run id
// must not exist.
func (l *Lake) BeginRequeue(ctx context.Context, in RequeueIntent) error {
	if in.RunID == "" || strings.ContainsAny(in.RunID, "/") {
		return fmt.Errorf("begin requeue: bad run id %q", in.RunID)
	}
	if in.Created == 0 {
		in.Created = l.clock().UnixMicro()
	}
	data, err := json.Marshal(in)
	if err != nil {
		return fmt.Errorf("begin requeue: %w", err)
	}
	if err := l.st.PutIfAbsent(ctx, requeueDir+in.RunID+".json", data); err != nil {
		return fmt.Errorf("begin requeue %s: %w", in.RunID, err)
	}
	return nil
}

// RequeueIntents lists the intents in the lake, oldest first, with
// whether each is done (its quarantine commit has landed).
func (l *Lake) RequeueIntents(ctx context.Context) ([]RequeueIntent, []bool, error) {
	keys, err := l.st.List(ctx, requeueDir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, nil, fmt.Errorf("list requeue intents: %w", err)
	}
	var out []RequeueIntent
	for _, info := range keys {
		k := info.Key
		if !strings.HasSuffix(k, ".json") {
			continue
		}
		data, err := store.ReadAll(ctx, l.st, k)
		if err != nil {
			return nil, nil, fmt.Errorf("read requeue intent %s: %w", k, err)
		}
		var in RequeueIntent
		if err := json.Unmarshal(data, &in); err != nil {
			return nil, nil, fmt.Errorf("read requeue intent %s: %w", k, err)
		}
		out = append(out, in)
	}
	slices.SortFunc(out, func(a, b RequeueIntent) int { return cmp.Compare(a.Created, b.Created) })
	snap, err := l.tables[TableQuarantine].dt.Snapshot(ctx, -1)
	if err != nil {
		return nil, nil, fmt.Errorf("list requeue intents: %w", err)
	}
	done := make([]bool, len(out))
	for i, in := range out {
		_, done[i] = snap.TxnVersion(RequeueAppID(in.RunID))
	}
	return out, done, nil
}

// CommitRequeue does steps 2 and 3 of the intent in: moved must be the
// intent's rows, in its order, decoded to valid records. Each step is
// skipped when its txn is already in its table, so a rerun after a crash
// completes the move.
func (l *Lake) CommitRequeue(ctx context.Context, in RequeueIntent, moved []Moved) error {
	if len(moved) != len(in.Rows) {
		return fmt.Errorf("commit requeue %s: %d records for %d rows", in.RunID, len(moved), len(in.Rows))
	}
	for i := range moved {
		if moved[i].ID != in.Rows[i] || !moved[i].Record.Valid() {
			return fmt.Errorf("commit requeue %s: record %d is not the intent's row %v as a valid event", in.RunID, i, in.Rows[i])
		}
	}
	txn := &delta.Txn{AppID: RequeueAppID(in.RunID), Version: 0}
	params := map[string]string{"requeueRun": in.RunID}
	if len(moved) > 0 {
		err := l.appendTable(ctx, l.tables[TableRawEvents], txn, nil, "WRITE", params, func() ([]addFile, error) {
			return l.writeMoved(ctx, moved)
		})
		if err != nil {
			return fmt.Errorf("commit requeue %s: %w", in.RunID, err)
		}
	}
	if err := l.removeQuarantined(ctx, in, txn, params); err != nil {
		return fmt.Errorf("commit requeue %s: %w", in.RunID, err)
	}
	return nil
}

// writeMoved writes the moved records to raw_events data files, each with
// its own row's ingest time and batch id.
func (l *Lake) writeMoved(ctx context.Context, moved []Moved) ([]addFile, error) {
	type group struct{ ingest, batch int64 }
	recs := make([]tidemark.Record, len(moved))
	idx := map[group][]int{}
	var order []group
	for i, m := range moved {
		recs[i] = m.Record
		g := group{m.ID.IngestTime, m.ID.BatchID}
		if idx[g] == nil {
			order = append(order, g)
		}
		idx[g] = append(idx[g], i)
	}
	var staged []stagedAdd
	for _, g := range order {
		s, err := l.stageRaw(ctx, recs, idx[g], g.ingest, g.batch)
		if err != nil {
			dropAll(staged)
			return nil, err
		}
		staged = append(staged, s...)
	}
	return l.publish(ctx, staged)
}

// removeQuarantined commits the quarantine files that hold rows of the
// intent rewritten without them, with txn, unless the table has txn.
// Whatever files hold the rows now (compaction may have merged them) are
// rewritten.
func (l *Lake) removeQuarantined(ctx context.Context, in RequeueIntent, txn *delta.Txn, params map[string]string) error {
	h := l.tables[TableQuarantine]
	gone := make(map[QuarantineID]bool, len(in.Rows))
	for _, id := range in.Rows {
		gone[id] = true
	}
	_, err := l.update(ctx, h, func(snap *delta.Snapshot) (*delta.Transaction, []addFile, error) {
		if snap == nil {
			return nil, nil, fmt.Errorf("table missing")
		}
		if _, ok := snap.TxnVersion(txn.AppID); ok {
			return nil, nil, nil
		}
		now := l.clock().UnixMilli()
		var actions []delta.Action
		var written []addFile
		removed := 0
		for _, a := range snap.Files {
			var keep []QuarantineRow
			hit := 0
			err := l.readQuarantineFile(ctx, a.Key(h.dt.Path()), func(r QuarantineRow) error {
				if gone[r.ID()] {
					hit++
					return nil
				}
				r.Payload = bytes.Clone(r.Payload)
				keep = append(keep, r)
				return nil
			})
			if err != nil {
				return nil, written, err
			}
			if hit == 0 {
				continue
			}
			removed += hit
			actions = append(actions, delta.Action{Remove: &delta.Remove{
				Path: a.Path, DeletionTimestamp: now, DataChange: true, ExtendedFileMetadata: true,
				PartitionValues: a.PartitionValues, Size: a.Size, Stats: a.Stats,
			}})
			if len(keep) == 0 {
				continue
			}
			f, err := l.writeQuarantineRows(ctx, keep, a.PartitionValues)
			if err != nil {
				return nil, written, err
			}
			written = append(written, f)
			actions = append(actions, f.action(now, true))
		}
		if removed != len(in.Rows) {
			// A row of the intent is in no file: another writer removed it,
			// or the intent does not match this lake. Committing would lose
			// or double lines; stop and say so.
			return nil, written, fmt.Errorf("%d of the intent's %d rows are in quarantine (a concurrent requeue or repair?)", removed, len(in.Rows))
		}
		return &delta.Transaction{
			Actions:             actions,
			Operation:           "DELETE",
			OperationParameters: params,
			OperationMetrics:    map[string]string{"numDeletedRows": fmt.Sprint(removed)},
			Txn:                 txn,
		}, written, nil
	})
	if err != nil && !errors.Is(err, delta.ErrAlreadyCommitted) {
		return fmt.Errorf("rewrite quarantine: %w", err)
	}
	return nil
}

// writeQuarantineRows writes rows as one quarantine data file of the
// partition pv.
func (l *Lake) writeQuarantineRows(ctx context.Context, rows []QuarantineRow, pv map[string]*string) (addFile, error) {
	t := l.tables[TableQuarantine].def
	w, err := newFileWriterIn(t, l.st, len(rows))
	if err != nil {
		return addFile{}, err
	}
	cReason, cError, cSource, cFile := t.col("reason"), t.col("error"), t.col("source"), t.col("file")
	cOffset, cIngest, cBatch, cPayload := t.col("offset"), t.col("ingest_time"), t.col("batch_id"), t.col("payload")
	cFileID := t.col(ColFileID)
	err = w.fillRows(len(rows), func(cols []*colBuf, lo, hi int) int64 {
		var size int
		for _, r := range rows[lo:hi] {
			cols[cReason].bytes = append(cols[cReason].bytes, []byte(r.Reason))
			cols[cError].bytes = append(cols[cError].bytes, []byte(r.Error))
			cols[cSource].bytes = append(cols[cSource].bytes, []byte(r.Source))
			cols[cFile].bytes = append(cols[cFile].bytes, []byte(r.File))
			fileID(cols[cFileID], r.FileID)
			cols[cOffset].ints = append(cols[cOffset].ints, r.Offset)
			cols[cIngest].ints = append(cols[cIngest].ints, r.IngestTime)
			cols[cBatch].ints = append(cols[cBatch].ints, r.BatchID)
			cols[cPayload].bytes = append(cols[cPayload].bytes, r.Payload)
			size += len(r.Reason) + len(r.Error) + len(r.Source) + len(r.File) + len(r.Payload)
		}
		for i, b := range cols {
			if i != cFileID {
				b.notNull(hi - lo)
			}
		}
		return int64(size)
	})
	if err != nil {
		w.abort()
		return addFile{}, err
	}
	var dir []string
	for _, c := range t.partCols {
		if v := pv[c]; v != nil {
			dir = append(dir, c+"="+*v)
		}
	}
	f, err := w.stage(l.st, strings.Join(dir, "/"))
	if err != nil {
		return addFile{}, err
	}
	files, err := l.publish(ctx, []stagedAdd{{f, pv}})
	if err != nil {
		return addFile{}, err
	}
	return files[0], nil
}

// inFlightRequeues returns the identities ScanQuarantine must leave out of
// snap: the rows of intents whose raw_events commit has landed while snap
// does not hold their quarantine commit. Intents are listed after snap was
// taken, so an intent that matters to snap is seen.
func (l *Lake) inFlightRequeues(ctx context.Context, snap *delta.Snapshot) (map[QuarantineID]bool, error) {
	keys, err := l.st.List(ctx, requeueDir)
	if errors.Is(err, fs.ErrNotExist) || err == nil && len(keys) == 0 {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list requeue intents: %w", err)
	}
	var raw *delta.Snapshot
	skip := map[QuarantineID]bool{}
	for _, info := range keys {
		k := info.Key
		if !strings.HasSuffix(k, ".json") {
			continue
		}
		id := strings.TrimSuffix(path.Base(k), ".json")
		if _, done := snap.TxnVersion(RequeueAppID(id)); done {
			continue
		}
		if raw == nil {
			if raw, err = l.tables[TableRawEvents].dt.Snapshot(ctx, -1); err != nil {
				return nil, err
			}
		}
		if _, landed := raw.TxnVersion(RequeueAppID(id)); !landed {
			continue
		}
		data, err := store.ReadAll(ctx, l.st, k)
		if err != nil {
			return nil, fmt.Errorf("read requeue intent %s: %w", k, err)
		}
		var in RequeueIntent
		if err := json.Unmarshal(data, &in); err != nil {
			return nil, fmt.Errorf("read requeue intent %s: %w", k, err)
		}
		for _, r := range in.Rows {
			skip[r] = true
		}
	}
	return skip, nil
}

// RequeueRows returns the quarantine rows of the intent in, in its order,
// from the latest version (those a rerun decodes again to complete the
// move). A row no longer there (the move is done) is an error.
func (l *Lake) RequeueRows(ctx context.Context, in RequeueIntent) ([]QuarantineRow, error) {
	h := l.tables[TableQuarantine]
	snap, err := h.dt.Snapshot(ctx, -1)
	if err != nil {
		return nil, fmt.Errorf("requeue rows: %w", err)
	}
	pos := make(map[QuarantineID]int, len(in.Rows))
	for i, id := range in.Rows {
		pos[id] = i
	}
	out := make([]QuarantineRow, len(in.Rows))
	found := 0
	for i := range snap.Files {
		err := l.readQuarantineFile(ctx, snap.Files[i].Key(h.dt.Path()), func(r QuarantineRow) error {
			if j, ok := pos[r.ID()]; ok {
				r.Payload = bytes.Clone(r.Payload)
				out[j] = r
				found++
			}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("requeue rows: %w", err)
		}
	}
	if found != len(in.Rows) {
		return nil, fmt.Errorf("requeue rows of run %s: %d of %d in quarantine", in.RunID, found, len(in.Rows))
	}
	return out, nil
}

// AppendRequeueRawOnly is CommitRequeue's raw_events step alone: what a
// run killed before its quarantine commit leaves. For tests of recovery.
func (l *Lake) AppendRequeueRawOnly(ctx context.Context, in RequeueIntent, moved []Moved) error {
	txn := &delta.Txn{AppID: RequeueAppID(in.RunID), Version: 0}
	return l.appendTable(ctx, l.tables[TableRawEvents], txn, nil, "WRITE", nil, func() ([]addFile, error) {
		return l.writeMoved(ctx, moved)
	})
}
