package stream

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"tidemark"
)

// windower is everything the runner asks of its engine, so that `tidemark
// stream --session-gap` can run a SessionEngine where it runs an Engine
// today. The runner does not use it yet: its files (loop, recovery,
// checkpoint, report, inspect) hold *Engine and read its w/hasW fields
// directly. Wiring it is, in order:
//   - runner.engine becomes a windower; loop.go, recovery.go and report.go
//     call the methods below instead of reading fields;
//   - checkpoint.saveState writes snapshot() or changelog(), and a restart
//     picks the decoder by the file's magic (stateMagic or
//     sessionStateMagic, changesMagic or sessionChangesMagic);
//   - recovery.finishDrain drains with drainForCheckpoint;
//   - the runner refuses sessions on a sharded lake with
//     CheckSessionShards, and the lake records the gap in its table
//     configuration beside the window (lake.Config), so a run with other
//     window settings fails.
//
// Both engines satisfy it (checked below), so each step compiles on its
// own.
type windower interface {
	Process(recs []tidemark.Record, now time.Time) BatchResult
	Drain() BatchResult
	SetFrontier(name string, frontier int64, held bool)
	watermark() (int64, bool)
	sourceWatermarks() map[string]int64
	sourceMarks(now time.Time) []sourceMark
	stateBytes() int64
	snapshot() []byte
	changelog() ([]byte, error)
}

var (
	_ windower = (*Engine)(nil)
	_ windower = (*SessionEngine)(nil)
)

func (e *Engine) watermark() (int64, bool)   { return e.w, e.hasW }
func (e *Engine) snapshot() []byte           { return e.MarshalSnapshot() }
func (e *Engine) changelog() ([]byte, error) { return e.Changes().MarshalBinary() }

func (e *SessionEngine) watermark() (int64, bool) { return e.w, e.hasW }

func (e *SessionEngine) snapshot() []byte {
	b, _ := e.State().MarshalBinary() // never fails
	return b
}

func (e *SessionEngine) changelog() ([]byte, error) { return e.Changes().MarshalBinary() }

// sourceWatermarks and sourceMarks read only the sources and the config,
// which the session engine keeps as Engine does.
func (e *SessionEngine) sourceWatermarks() map[string]int64 {
	return (&Engine{cfg: e.cfg, sources: e.sources}).sourceWatermarks()
}

func (e *SessionEngine) sourceMarks(now time.Time) []sourceMark {
	return (&Engine{cfg: e.cfg, sources: e.sources}).sourceMarks(now)
}

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
