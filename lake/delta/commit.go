package delta

import (
	"context"
	"errors"
	"fmt"
	"io/fs"

	"github.com/google/uuid"

	"tidemark/lake/store"
)

// Transaction is one commit to make. Actions hold protocol, metaData, add
// and remove actions (a commitInfo is written for it; txn comes from Txn).
type Transaction struct {
	// ReadVersion is the snapshot version the transaction was built on; -1
	// creates the table (Actions must then hold Protocol and Metadata).
	ReadVersion int64
	// Actions are the adds, removes, protocol and metadata to commit; they
	// may also hold txn actions of other appIds: values recorded with the
	// commit (the snapshot keeps the latest per appId).
	Actions []Action
	// Operation, OperationParameters and OperationMetrics go to commitInfo
	// ("WRITE", "DELETE", "OPTIMIZE", "STREAMING UPDATE", ...).
	Operation           string
	OperationParameters map[string]string
	OperationMetrics    map[string]string
	// Txn makes the commit idempotent: if the table already holds a txn
	// for Txn.AppID with a version >= Txn.Version, Commit writes nothing
	// and returns ErrAlreadyCommitted. LastUpdated is filled in if 0.
	Txn *Txn
	// ReadPredicate reports whether the transaction read a partition (by
	// its partition values). A winning commit that added or removed files
	// in such a partition is a conflict. nil means the transaction read
	// nothing: with no removes, it is a blind append.
	ReadPredicate func(partitionValues map[string]*string) bool
}

// blindAppend reports whether the transaction only adds files without
// having read the table.
func (tx *Transaction) blindAppend() bool {
	if tx.ReadPredicate != nil {
		return false
	}
	for _, a := range tx.Actions {
		if a.Remove != nil {
			return false
		}
	}
	return true
}

// Commit writes the transaction as the next version and returns it. A lost
// race is resolved by reading the winning commits: a blind append moves on
// to the next version; a transaction whose reads or removes the winners
// touched, or any transaction when they changed the protocol or metadata,
// gets ErrConflict. With Txn set and already applied, it returns the
// latest version and ErrAlreadyCommitted.
func (t *Table) Commit(ctx context.Context, tx *Transaction) (int64, error) {
	if tx.ReadVersion < -1 {
		return -1, fmt.Errorf("commit %s: bad read version %d", t.path, tx.ReadVersion)
	}
	var hasProtocol, hasMetadata bool
	removes := map[string]bool{}
	proto := (*Protocol)(nil)
	for i, a := range tx.Actions {
		switch {
		case a.Protocol != nil:
			hasProtocol, proto = true, a.Protocol
		case a.Metadata != nil:
			hasMetadata = true
		case a.Remove != nil:
			removes[canonPath(a.Remove.Path)] = true
		case a.Add != nil:
		case a.Txn != nil && (tx.Txn == nil || a.Txn.AppID != tx.Txn.AppID):
			// A txn of another appId records a value (e.g. a stream's
			// watermark) without making this commit conditional on it.
		case a.CommitInfo != nil, a.Txn != nil:
			return -1, fmt.Errorf("commit %s: action %d: commitInfo and the idempotence txn come from the Transaction fields", t.path, i)
		default:
			return -1, fmt.Errorf("commit %s: action %d is empty", t.path, i)
		}
	}
	if tx.ReadVersion == -1 && (!hasProtocol || !hasMetadata) {
		return -1, fmt.Errorf("commit %s: creating a table needs protocol and metaData actions", t.path)
	}
	var meta *Metadata
	for _, a := range tx.Actions {
		if a.Metadata != nil {
			meta = a.Metadata
		}
	}
	if proto != nil {
		if err := checkWritable(*proto, meta); err != nil {
			return -1, fmt.Errorf("commit %s: %w", t.path, err)
		}
	}
	now := t.opts.Clock().UnixMilli()
	if tx.ReadVersion >= 0 {
		s, err := t.loadState(ctx, tx.ReadVersion)
		if err != nil {
			return -1, fmt.Errorf("commit %s: %w", t.path, err)
		}
		if meta == nil {
			meta = s.metadata
		}
		p := s.protocol
		if proto != nil {
			p = proto
		}
		if err := checkWritable(*p, meta); err != nil {
			return -1, fmt.Errorf("commit %s: %w", t.path, err)
		}
		if len(removes) > 0 && s.metadata.Configuration["delta.appendOnly"] == "true" {
			return -1, fmt.Errorf("commit %s: %w: removes in an appendOnly table", t.path, ErrUnsupported)
		}
		if tx.Txn != nil {
			if v, ok := s.txns[tx.Txn.AppID]; ok && v.Version >= tx.Txn.Version {
				return t.latestVersion(ctx, tx.ReadVersion), ErrAlreadyCommitted
			}
		}
	}

	if err := checkConstraints(meta, tx); err != nil {
		return -1, fmt.Errorf("commit %s: %w", t.path, err)
	}
	data, err := t.encodeCommit(tx, now)
	if err != nil {
		return -1, fmt.Errorf("commit %s: %w", t.path, err)
	}
	blind := tx.blindAppend()
	for v := tx.ReadVersion + 1; ; v++ {
		if err := ctx.Err(); err != nil {
			return -1, err
		}
		key := t.logKey(commitName(v))
		err := t.st.PutIfAbsent(ctx, key, data)
		if err == nil {
			t.afterCommit(ctx, v, data)
			return v, nil
		}
		if !errors.Is(err, store.ErrExists) {
			return -1, fmt.Errorf("commit %s version %d: %w", t.path, v, err)
		}
		winner, err := t.readCommit(ctx, key)
		if err != nil {
			return -1, fmt.Errorf("commit %s: read winner: %w", t.path, err)
		}
		if err := checkWinner(v, winner, tx, blind, removes); err != nil {
			if errors.Is(err, ErrAlreadyCommitted) {
				return t.latestVersion(ctx, v), err
			}
			return -1, fmt.Errorf("commit %s: %w", t.path, err)
		}
	}
}

// checkWinner decides whether a commit that won version v leaves tx valid.
func checkWinner(v int64, winner []Action, tx *Transaction, blind bool, removes map[string]bool) error {
	pred := tx.ReadPredicate
	if pred == nil && !blind {
		pred = func(map[string]*string) bool { return true } // removes without a predicate read everything
	}
	for _, a := range winner {
		switch {
		case a.Txn != nil && tx.Txn != nil && a.Txn.AppID == tx.Txn.AppID && a.Txn.Version >= tx.Txn.Version:
			return ErrAlreadyCommitted
		case a.Protocol != nil || a.Metadata != nil:
			return fmt.Errorf("%w: version %d changed the protocol or metadata", ErrConflict, v)
		case a.Remove != nil && removes[canonPath(a.Remove.Path)]:
			return fmt.Errorf("%w: version %d removed %s too", ErrConflict, v, a.Remove.Path)
		case a.Add != nil && pred != nil && pred(a.Add.PartitionValues):
			return fmt.Errorf("%w: version %d added %s in a partition this transaction read", ErrConflict, v, a.Add.Path)
		case a.Remove != nil && pred != nil && pred(a.Remove.PartitionValues):
			return fmt.Errorf("%w: version %d removed %s in a partition this transaction read", ErrConflict, v, a.Remove.Path)
		}
	}
	return nil
}

// latestVersion returns the newest committed version, or fallback when the
// log cannot be listed.
func (t *Table) latestVersion(ctx context.Context, fallback int64) int64 {
	l, err := t.listLog(ctx, 0)
	if err != nil || l.latest < fallback {
		return fallback
	}
	return l.latest
}

// encodeCommit renders the commit file in Spark's order: commitInfo,
// protocol, metaData, txn, then adds and removes as given.
func (t *Table) encodeCommit(tx *Transaction, now int64) ([]byte, error) {
	blind := tx.blindAppend()
	ci := &CommitInfo{
		Timestamp:           now,
		Operation:           tx.Operation,
		OperationParameters: tx.OperationParameters,
		IsolationLevel:      "Serializable",
		IsBlindAppend:       &blind,
		OperationMetrics:    tx.OperationMetrics,
		EngineInfo:          t.opts.EngineInfo,
		TxnID:               uuid.NewString(),
	}
	if ci.Operation == "" {
		ci.Operation = "WRITE"
	}
	if ci.OperationParameters == nil {
		ci.OperationParameters = map[string]string{}
	}
	if tx.ReadVersion >= 0 {
		rv := tx.ReadVersion
		ci.ReadVersion = &rv
	}
	out := []Action{{CommitInfo: ci}}
	for _, a := range tx.Actions {
		if a.Protocol != nil {
			out = append(out, a)
		}
	}
	for _, a := range tx.Actions {
		if a.Metadata != nil {
			out = append(out, a)
		}
	}
	if tx.Txn != nil {
		txn := *tx.Txn
		if txn.LastUpdated == 0 {
			txn.LastUpdated = now
		}
		out = append(out, Action{Txn: &txn})
	}
	for _, a := range tx.Actions {
		if a.Txn != nil {
			out = append(out, a)
		}
	}
	for _, a := range tx.Actions {
		if a.Add != nil || a.Remove != nil {
			out = append(out, a)
		}
	}
	return EncodeActions(out)
}

// afterCommit advances the cached state by the commit just written and
// writes a checkpoint when one is due. Failures here never fail the commit.
func (t *Table) afterCommit(ctx context.Context, v int64, data []byte) {
	t.mu.Lock()
	var next *state
	if c := t.cached; c != nil && c.version == v-1 {
		actions, err := DecodeActions(commitName(v), data)
		if err == nil {
			next = c.clone()
			for _, a := range actions {
				next.apply(a)
			}
			next.version = v
			t.cached = next
		}
	}
	t.mu.Unlock()
	iv := t.opts.CheckpointInterval
	if iv <= 0 || v == 0 || v%iv != 0 {
		return
	}
	if next == nil {
		s, err := t.loadState(ctx, v)
		if err != nil {
			t.opts.Logger.Warn("delta checkpoint skipped", "table", t.path, "version", v, "error", err)
			return
		}
		next = s
	}
	if err := t.writeCheckpoint(ctx, next); err != nil {
		t.opts.Logger.Warn("delta checkpoint failed", "table", t.path, "version", v, "error", err)
		return
	}
	ret, err := RetentionOf(next.metadata.Configuration)
	if err != nil {
		t.opts.Logger.Warn("delta log cleanup skipped", "table", t.path, "error", err)
		return
	}
	// The cached state drops the expired tombstones too, so a long-lived
	// writer's memory stays bounded like its checkpoints (cached states
	// are never changed in place: a pruned copy replaces it).
	cutoff := t.opts.Clock().Add(-ret.DeletedFiles).UnixMilli()
	t.mu.Lock()
	if t.cached == next {
		pruned := next.clone()
		for k, r := range pruned.tombstones {
			if r.DeletionTimestamp < cutoff {
				delete(pruned.tombstones, k)
			}
		}
		t.cached = pruned
	}
	t.mu.Unlock()
	if !ret.CleanupLog {
		return
	}
	if n, err := t.cleanupLog(ctx, ret.Log); err != nil {
		t.opts.Logger.Warn("delta log cleanup failed", "table", t.path, "deleted", n, "error", err)
	} else if n > 0 {
		t.opts.Logger.Debug("delta log cleaned up", "table", t.path, "deleted", n, "retention", ret.Log)
	}
}

// Update commits the transaction fn builds from the latest snapshot. On
// ErrConflict it reads the new latest snapshot and calls fn again, up to
// Options.MaxAttempts times. fn returning a nil Transaction means nothing to
// do (the snapshot's version is returned). ReadVersion is set by Update. A
// missing table is passed as a nil snapshot with ReadVersion -1.
func (t *Table) Update(ctx context.Context, fn func(*Snapshot) (*Transaction, error)) (int64, error) {
	var err error
	for attempt := 0; attempt < t.opts.MaxAttempts; attempt++ {
		snap, serr := t.Snapshot(ctx, -1)
		readVersion := int64(-1)
		if serr != nil {
			if !errors.Is(serr, ErrNoTable) {
				return -1, serr
			}
			snap = nil
		} else {
			readVersion = snap.Version
		}
		tx, ferr := fn(snap)
		if ferr != nil {
			return -1, ferr
		}
		if tx == nil {
			return readVersion, nil
		}
		tx.ReadVersion = readVersion
		var v int64
		v, err = t.Commit(ctx, tx)
		if !errors.Is(err, ErrConflict) {
			return v, err
		}
	}
	return -1, fmt.Errorf("update %s: %d attempts: %w", t.path, t.opts.MaxAttempts, err)
}

// VersionInfo is one entry of a table's history.
type VersionInfo struct {
	Version    int64
	CommitInfo *CommitInfo // nil if the commit has none
}

// History returns the commitInfo of every version still in the log, oldest
// first.
func (t *Table) History(ctx context.Context) ([]VersionInfo, error) {
	l, err := t.listLog(ctx, 0)
	if err != nil {
		return nil, err
	}
	if len(l.commits) == 0 {
		return nil, fmt.Errorf("history %s: %w", t.path, ErrNoTable)
	}
	var out []VersionInfo
	for v := int64(0); v <= l.latest; v++ {
		key, ok := l.commits[v]
		if !ok {
			continue
		}
		actions, err := t.readCommit(ctx, key)
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				continue // cleaned up between list and read
			}
			return nil, err
		}
		vi := VersionInfo{Version: v}
		for _, a := range actions {
			if a.CommitInfo != nil {
				vi.CommitInfo = a.CommitInfo
			}
		}
		out = append(out, vi)
	}
	return out, nil
}
