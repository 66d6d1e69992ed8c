package stream

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"tidemark"
)

// windower is everything the runner asks of its engine: `tidemark stream`
// runs an Engine, or with --session-gap a SessionEngine (both satisfy it,
// checked below). The session wiring lives here:
//   - RunnerConfig.validateSessions checks the flags;
//   - saveState writes snapshot() or changelog(), and loadState decodes a
//     state file by its magic (decodeStateFile, decodeChangelog), so a
//     session stream's checkpoint carries SessionState and SessionChanges;
//   - finishDrain drains a session engine with drainForCheckpoint;
//   - lake.Config.SessionGap records the gap in the lake's tables, so a run
//     with other window settings on that lake fails, and
//     checkSessionShards refuses a lake other streams write.
type windower interface {
	Process(recs []tidemark.Record, now time.Time) BatchResult
	Drain() BatchResult
	SetFrontier(name string, frontier int64, held bool)
	watermark() (int64, bool)
	sourceWatermarks() map[string]int64
	sourceMarks(now time.Time) []sourceMark
	stateBytes() int64
	openRows() int64 // open (window, key) pairs or sessions: state_rows
	snapshot() []byte
	changelog() ([]byte, error)
	// Err and Close are the state store's (a Pebble database for Engine;
	// sessions live in memory only).
	Err() error
	Close() error
}

var (
	_ windower = (*Engine)(nil)
	_ windower = (*SessionEngine)(nil)
)

func (e *Engine) snapshot() []byte           { return e.MarshalSnapshot() }
func (e *Engine) changelog() ([]byte, error) { return e.marshalChanges(), nil }

func (e *SessionEngine) openRows() int64 { return int64(e.open) }

// Err and Close: a session engine's state is in memory; nothing fails or
// needs releasing.
func (e *SessionEngine) Err() error   { return nil }
func (e *SessionEngine) Close() error { return nil }

func (e *SessionEngine) snapshot() []byte {
	b, _ := e.State().MarshalBinary() // never fails
	return b
}

func (e *SessionEngine) changelog() ([]byte, error) { return e.Changes().MarshalBinary() }

// drainForCheckpoint is Drain for the --drain batch of a run: it returns
// the emitted sessions and the state to checkpoint, as
// recovery.finishDrain builds it for windows: W is the largest of the
// watermark before the drain and the ends of the sessions emitted (not
// +infinity, so a later run goes on from there), and under the window rule
// every key keeps the end of its last closed session while a row could
// touch it, so a later run never opens a session overlapping one the drain
// emitted.
func (e *SessionEngine) drainForCheckpoint() (BatchResult, *SessionState) {
	w, hasW := e.w, e.hasW
	last := map[tidemark.Key]int64{}
	for k, ks := range e.keys {
		if ks.hasClosed {
			last[k] = ks.closedEnd
		}
	}
	res := e.Drain()
	for _, r := range res.Emitted {
		if !hasW || r.Window.End > w {
			w, hasW = r.Window.End, true
		}
		last[r.Key] = max(last[r.Key], r.Window.End)
	}
	st := e.State()
	st.Watermark, st.HasWatermark = w, hasW
	if e.cfg.LateRule == LateWindow {
		for k, end := range last {
			if tidemark.AddSat(end, e.gap) > w {
				st.Closed = append(st.Closed, ClosedSession{Key: k, End: end})
			}
		}
		slices.SortFunc(st.Closed, func(a, b ClosedSession) int { return a.Key.Compare(b.Key) })
	}
	return res, st
}

// ErrSessionShards refuses session windows on a lake that several streams
// (shards) write: a session of one key can take rows from two shards, and
// merging partial sessions across shards is not defined yet.
var ErrSessionShards = errors.New("stream: session windows need a lake written by one stream; this lake has several shards")

// CheckSessionShards is the check the runner makes before a session
// stream starts: shards is how many streams write the lake (issue 17's
// shard registry), counting this one.
func CheckSessionShards(shards int) error {
	if shards > 1 {
		return fmt.Errorf("%w (%d)", ErrSessionShards, shards)
	}
	return nil
}

// validateSessions checks the session settings of a config: a gap
// replaces the window and excludes the slide, and sessions are emitted
// once, when they close.
func (c RunnerConfig) validateSessions() error {
	if c.SessionGap == 0 {
		return nil
	}
	switch {
	case c.Engine.Window.Size != 0 || c.Engine.Window.Slide != 0:
		return errors.New("--session-gap replaces --window and --slide: a session's length is set by its events and the gap; leave them out")
	case c.Engine.OutputMode != Append:
		return errors.New("--session-gap supports only --output-mode append: a session is emitted once, when it closes")
	case c.State.Store == StatePebble:
		return errors.New("--session-gap keeps its open sessions in memory: --state-store pebble is not supported with it")
	}
	_, err := sessionGap(c.SessionGap)
	if err != nil {
		return fmt.Errorf("--session-gap: %w", err)
	}
	return nil
}

// checkSessionShards refuses a session stream on a lake other streams
// write (ErrSessionShards). It runs before this stream registers as a
// shard, so a refused run leaves no trace that would refuse the lake's own
// stream later.
func (r *runner) checkSessionShards(ctx context.Context) error {
	if r.cfg.SessionGap == 0 {
		return nil
	}
	others, err := r.lake.OtherShards(ctx, r.id)
	if err != nil {
		return err
	}
	if err := CheckSessionShards(len(others) + 1); err != nil {
		return fmt.Errorf("%w: run one session stream per lake, or use another --lake", err)
	}
	return nil
}

// drainState is a state the --drain batch checkpoints in place of the
// engine's: a *State or a *SessionState.
type drainState interface {
	MarshalBinary() ([]byte, error)
	mark() (int64, bool)
}

func (s *State) mark() (int64, bool)        { return s.Watermark, s.HasWatermark }
func (s *SessionState) mark() (int64, bool) { return s.Watermark, s.HasWatermark }

// markOf is the watermark of an override state; false without one.
func markOf(s drainState) (int64, bool) {
	if s == nil {
		return 0, false
	}
	return s.mark()
}

// drainEngine drains the runner's engine for the --drain batch.
func (r *runner) drainEngine() (BatchResult, drainState) {
	if se, ok := r.engine.(*SessionEngine); ok {
		return se.drainForCheckpoint()
	}
	return r.engine.(*Engine).drainForCheckpoint()
}

// reload replaces the drained engine with one holding the checkpointed
// state after the drain.
func (r *runner) reload(after drainState) error {
	var err error
	switch st := after.(type) {
	case *SessionState:
		r.engine, err = NewSessionEngine(r.cfg.SessionGap, r.cfg.Engine, st)
	case *State:
		r.engine, err = r.engine.(*Engine).afterDrain(r.cfg.Engine, st)
	}
	return err
}

// sessionView is a session checkpoint's state as inspection reads a
// State: the gap as the window, the watermark, the sources, and the open
// sessions as the open rows (the closed-session horizons are not shown).
func (cs *committedState) sessionView() (*State, error) {
	gap := time.Duration(cs.session.Gap) * time.Microsecond
	e, err := NewSessionEngine(gap, Config{}, cs.session)
	if err != nil {
		return nil, err
	}
	for i, ch := range cs.sessionChanges {
		if err := e.Apply(ch); err != nil {
			return nil, fmt.Errorf("replay changelog %d of %d: %w", i+1, len(cs.sessionChanges), err)
		}
	}
	st := e.State()
	return &State{Window: tidemark.WindowSpec{Size: st.Gap, Slide: st.Gap}, Watermark: st.Watermark, HasWatermark: st.HasWatermark, Sources: st.Sources, Open: st.Open}, nil
}

// decodeStateFile decodes a snapshot file by its magic: a SessionState,
// or a State (decodeSnapshot).
func decodeStateFile(data []byte) (*committedState, error) {
	if bytes.HasPrefix(data, []byte(sessionStateMagic)) {
		cs := &committedState{session: new(SessionState)}
		return cs, cs.session.UnmarshalBinary(data)
	}
	return decodeSnapshot(data)
}

// decodeChangelog decodes a changelog file of the snapshot's kind and
// appends it.
func (cs *committedState) decodeChangelog(data []byte) error {
	if cs.session != nil {
		ch := new(SessionChanges)
		if err := ch.UnmarshalBinary(data); err != nil {
			return err
		}
		cs.sessionChanges = append(cs.sessionChanges, ch)
		return nil
	}
	ch := new(Changes)
	if err := ch.UnmarshalBinary(data); err != nil {
		return err
	}
	cs.changelogs = append(cs.changelogs, ch)
	return nil
}

// windower builds the engine a restart resumes with, refusing a checkpoint
// written with other window settings: windows, or sessions with another
// gap.
func (r recovered) windower(cfg RunnerConfig, streamID string) (windower, error) {
	cs := r.state
	if cfg.SessionGap == 0 {
		if cs != nil && cs.snapshot == nil {
			return nil, fmt.Errorf("checkpoint %s was written by a session stream (--session-gap %s); use a new --name or --checkpoint", cfg.Checkpoint, time.Duration(cs.session.Gap)*time.Microsecond)
		}
		if cs != nil && cs.snapshot.Window != cfg.Engine.Window.Normalized() {
			return nil, fmt.Errorf("checkpoint %s was written with different windows (%s); use a new --name or --checkpoint", cfg.Checkpoint, describeSpec(cs.snapshot.Window))
		}
		return r.openEngine(cfg.Engine, cfg.State, streamID)
	}
	if cs == nil {
		return NewSessionEngine(cfg.SessionGap, cfg.Engine, nil)
	}
	if cs.session == nil {
		return nil, fmt.Errorf("checkpoint %s was written with windows (%s), not sessions; use a new --name or --checkpoint", cfg.Checkpoint, describeSpec(cs.snapshot.Window))
	}
	if cs.session.Gap != cfg.SessionGap.Microseconds() {
		return nil, fmt.Errorf("checkpoint %s was written with --session-gap %s; use a new --name or --checkpoint", cfg.Checkpoint, time.Duration(cs.session.Gap)*time.Microsecond)
	}
	e, err := NewSessionEngine(cfg.SessionGap, cfg.Engine, cs.session)
	if err != nil {
		return nil, fmt.Errorf("checkpoint session state of batch %d: %w", r.commit.BatchID, err)
	}
	for i, ch := range cs.sessionChanges {
		if err := e.Apply(ch); err != nil {
			return nil, fmt.Errorf("checkpoint session state of batch %d: replay changelog %d of %d: %w", r.commit.BatchID, i+1, len(cs.sessionChanges), err)
		}
	}
	return e, nil
}
