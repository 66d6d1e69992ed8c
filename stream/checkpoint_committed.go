package stream

import (
	"context"
	"encoding/json"
	"fmt"

	"tidemark/lake/store"
	"tidemark/stream/engine"
)

// committedState is the engine state of a commit: a snapshot and the
// changelogs after it, in batch order. The snapshot's open pairs stay
// encoded (pairs, n of them, checked) until an engine is built, so a
// restart that reuses a local Pebble state never decodes them and one that
// rebuilds it streams them in.
type committedState struct {
	snapshot   *engine.Encoded // its open pairs stay encoded until needed
	changelogs []*engine.Changes
	// session and sessionChanges replace them in a session stream's
	// checkpoint (decodeStateFile picks by the file's magic).
	session        *engine.SessionState
	sessionChanges []*engine.SessionChanges
}

// decodeSnapshot checks an encoded snapshot whole and returns it with its
// open pairs still encoded.
func decodeSnapshot(data []byte) (*committedState, error) {
	st, err := engine.DecodeState(data)
	if err != nil {
		return nil, err
	}
	return &committedState{snapshot: st}, nil
}

// engine builds an engine with cfg holding the committed state.
func (cs *committedState) engine(cfg engine.Config) (*engine.Engine, error) {
	e, err := engine.New(cfg, cs.snapshot.Full())
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
func (cs *committedState) State() (*engine.State, error) {
	if cs.snapshot == nil {
		return cs.sessionView()
	}
	e, err := cs.engine(engine.Config{Window: cs.snapshot.Window})
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
	State            *engine.State // the engine state, snapshot and changelogs folded (sorted)
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
