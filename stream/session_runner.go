package stream

import (
	"context"
	"errors"
	"fmt"
	"time"

	"tidemark"
	"tidemark/stream/engine"
)

// The session wiring of the runner (it runs an engine.Engine, or with
// --session-gap an engine.SessionEngine, through engine.Windower):
//   - RunnerConfig.validateSessions checks the flags;
//   - saveState writes the engine's Snapshot or Changelog, and loadState
//     decodes a state file by its magic (decodeStateFile, decodeChangelog),
//     so a session stream's checkpoint carries SessionState and
//     SessionChanges;
//   - lake.Config.SessionGap records the gap in the lake's tables, so a run
//     with other window settings on that lake fails, and
//     checkSessionShards refuses a lake other streams write.

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
		return configErr("{SessionGap} replaces {Engine.Window.Size} and {Engine.Window.Slide}: a session's length is set by its events and the gap; leave them out")
	case c.Engine.OutputMode != engine.Append:
		return configErr("{SessionGap} supports only {Engine.OutputMode} append: a session is emitted once, when it closes")
	case c.State.Store == StatePebble:
		return configErr("{SessionGap} keeps its open sessions in memory: {State.Store} pebble is not supported with it")
	}
	if err := engine.CheckSessionGap(c.SessionGap); err != nil {
		return &tidemark.ConfigError{Pkg: "stream", Format: "{SessionGap}", Err: err}
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

// markOf is the watermark of an override state; false without one.
func markOf(s engine.Saved) (int64, bool) {
	if s == nil {
		return 0, false
	}
	return s.Mark()
}

// reload replaces the drained engine with one holding the checkpointed
// state after the drain.
func (r *runner) reload(after engine.Saved) error {
	e, err := r.engine.AfterDrain(after)
	if err != nil {
		return err
	}
	r.engine = e
	return nil
}

// sessionView is a session checkpoint's state as inspection reads a
// State: the gap as the window, the watermark, the sources, and the open
// sessions as the open rows (the closed-session horizons are not shown).
func (cs *committedState) sessionView() (*engine.State, error) {
	gap := time.Duration(cs.session.Gap) * time.Microsecond
	e, err := engine.NewSessionEngine(gap, engine.Config{}, cs.session)
	if err != nil {
		return nil, err
	}
	for i, ch := range cs.sessionChanges {
		if err := e.Apply(ch); err != nil {
			return nil, fmt.Errorf("replay changelog %d of %d: %w", i+1, len(cs.sessionChanges), err)
		}
	}
	st := e.State()
	return &engine.State{Window: tidemark.WindowSpec{Size: st.Gap, Slide: st.Gap}, Watermark: st.Watermark, HasWatermark: st.HasWatermark, Sources: st.Sources, Open: st.Open}, nil
}

// decodeStateFile decodes a snapshot file by its magic: a SessionState,
// or a State (decodeSnapshot).
func decodeStateFile(data []byte) (*committedState, error) {
	if engine.IsSessionState(data) {
		cs := &committedState{session: new(engine.SessionState)}
		return cs, cs.session.UnmarshalBinary(data)
	}
	return decodeSnapshot(data)
}

// decodeChangelog decodes a changelog file of the snapshot's kind and
// appends it.
func (cs *committedState) decodeChangelog(data []byte) error {
	if cs.session != nil {
		ch := new(engine.SessionChanges)
		if err := ch.UnmarshalBinary(data); err != nil {
			return err
		}
		cs.sessionChanges = append(cs.sessionChanges, ch)
		return nil
	}
	ch := new(engine.Changes)
	if err := ch.UnmarshalBinary(data); err != nil {
		return err
	}
	cs.changelogs = append(cs.changelogs, ch)
	return nil
}

// windower builds the engine a restart resumes with, refusing a checkpoint
// written with other window settings: windows, or sessions with another
// gap.
func (r recovered) windower(cfg RunnerConfig, streamID string) (engine.Windower, error) {
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
		return engine.NewSessionEngine(cfg.SessionGap, cfg.Engine, nil)
	}
	if cs.session == nil {
		return nil, fmt.Errorf("checkpoint %s was written with windows (%s), not sessions; use a new --name or --checkpoint", cfg.Checkpoint, describeSpec(cs.snapshot.Window))
	}
	if cs.session.Gap != cfg.SessionGap.Microseconds() {
		return nil, fmt.Errorf("checkpoint %s was written with --session-gap %s; use a new --name or --checkpoint", cfg.Checkpoint, time.Duration(cs.session.Gap)*time.Microsecond)
	}
	e, err := engine.NewSessionEngine(cfg.SessionGap, cfg.Engine, cs.session)
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
