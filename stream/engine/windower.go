package engine

import (
	"encoding/binary"
	"io"
	"slices"
	"time"

	"tidemark"
)

// Windower is everything a runner asks of an engine: `tidemark stream`
// runs an Engine (windows) or, with --session-gap, a SessionEngine. The
// runner holds one and calls nothing else on it: no type assertions on the
// concrete engines.
type Windower interface {
	// Process runs one micro-batch; Drain closes every open window.
	Process(recs []tidemark.Record, now time.Time) BatchResult
	Drain() BatchResult
	// SetFrontier caps a source's watermark (see watermarks.SetFrontier).
	SetFrontier(name string, frontier int64, held bool)

	// Watermark is W, false while there is none.
	Watermark() (int64, bool)
	// SourceWatermarks and SourceMarks are each source's part of W.
	SourceWatermarks() map[string]int64
	SourceMarks(now time.Time) []SourceMark
	// StateBytes and OpenRows measure the open state: open (window, key)
	// pairs or sessions (state_rows).
	StateBytes() int64
	OpenRows() int64

	// Snapshot returns the state to write as a snapshot file; Changelog
	// encodes the changes of the last batch.
	Snapshot() (*Snapshot, error)
	Changelog() ([]byte, error)
	// Flush writes the state after a committed batch to the engine's
	// store, tagged (Engine.Flush); engines without one do nothing.
	Flush(tag FlushTag) error

	// DrainForCheckpoint is Drain for the --drain batch of a run: it
	// returns the emitted windows and the state to checkpoint, whose
	// watermark is not +infinity (see the engines'). AfterDrain returns
	// the engine to go on with, holding that state once committed.
	DrainForCheckpoint() (BatchResult, Saved)
	AfterDrain(after Saved) (Windower, error)

	// Err reports a failure of the state store during the last Process
	// or Drain; Close releases it.
	Err() error
	Close() error
}

// BatchResult is what one Process or Drain call produced.
type BatchResult struct {
	// Emitted windows, sorted by window start, end and key. In append mode
	// only closing windows (Final); in update mode also every open window
	// whose aggregate changed in the batch (not Final). A window that changed
	// and closed in the same batch appears once, final.
	Emitted []tidemark.Result

	Watermark    int64 // W after the batch (tidemark.MaxTime after Drain)
	HasWatermark bool  // false until some batch ended with a valid event

	Rows        int64 // valid records in the batch
	Dropped     int64 // rows_dropped_by_watermark: valid records given StatusLate
	Quarantined int64 // records skipped because Reason != ReasonNone

	// Event time over the valid records of the batch; zero when Rows == 0.
	MinEventTime, MaxEventTime, AvgEventTime int64

	OpenWindows int   // open (window, key) state rows after the batch
	StateBytes  int64 // estimate of the memory those rows hold
}

// Saved is a state the --drain batch checkpoints in place of the engine's:
// a *State or a *SessionState.
type Saved interface {
	MarshalBinary() ([]byte, error)
	// Mark is the state's watermark, false while there is none.
	Mark() (int64, bool)
}

var (
	_ Windower = (*Engine)(nil)
	_ Windower = (*SessionEngine)(nil)
	_ Saved    = (*State)(nil)
	_ Saved    = (*SessionState)(nil)
)

func (s *State) Mark() (int64, bool)        { return s.Watermark, s.HasWatermark }
func (s *SessionState) Mark() (int64, bool) { return s.Watermark, s.HasWatermark }

// Snapshot is an engine's state ready to be written as a snapshot file:
// Size bytes, which WriteTo writes, returning the count and the frame's
// CRC-32C (the CRC of all but the last four bytes, which hold it). When
// Measured, Size and Sum come from a first write of the same view, and a
// second write must give them again. Release frees the view.
type Snapshot struct {
	Size     int64
	Sum      uint32
	Measured bool
	WriteTo  func(w io.Writer) (int64, uint32, error)
	Release  func()
}

// Snapshot is the window engine's snapshot: streamed from the slab
// (its size added up without encoding), or from a view of its store,
// measured by a first scan.
func (e *Engine) Snapshot() (*Snapshot, error) {
	if e.disk == nil && !e.aggs() {
		return &Snapshot{Size: e.snapshotSize(), WriteTo: e.writeSnapshot, Release: func() {}}, nil
	}
	if e.disk == nil {
		// States' encodings are not summed up without encoding them:
		// measured by a first write, as a store's view is.
		s := &Snapshot{Measured: true, Release: func() {}, WriteTo: e.writeSnapshot}
		var err error
		if s.Size, s.Sum, err = s.WriteTo(io.Discard); err != nil {
			return nil, err
		}
		return s, nil
	}
	view, release := e.disk.st.View()
	open := e.disk.open
	s := &Snapshot{Measured: true, Release: release,
		WriteTo: func(w io.Writer) (int64, uint32, error) { return e.writeDiskSnapshot(view, open, w) }}
	var err error
	if s.Size, s.Sum, err = s.WriteTo(io.Discard); err != nil {
		release()
		return nil, err
	}
	return s, nil
}

// Snapshot is the session engine's snapshot: its SessionState, encoded.
func (e *SessionEngine) Snapshot() (*Snapshot, error) {
	data, err := e.State().MarshalBinary()
	if err != nil {
		return nil, err
	}
	return bytesSnapshot(data), nil
}

// bytesSnapshot is a Snapshot of encoded bytes.
func bytesSnapshot(data []byte) *Snapshot {
	sum := uint32(0)
	if len(data) >= 4 {
		sum = binary.LittleEndian.Uint32(data[len(data)-4:])
	}
	return &Snapshot{Size: int64(len(data)), Release: func() {},
		WriteTo: func(w io.Writer) (int64, uint32, error) {
			n, err := w.Write(data)
			return int64(n), sum, err
		}}
}

func (e *Engine) Watermark() (int64, bool)        { return e.w, e.hasW }
func (e *SessionEngine) Watermark() (int64, bool) { return e.w, e.hasW }

func (e *Engine) Changelog() ([]byte, error)        { return e.marshalChanges(), nil }
func (e *SessionEngine) Changelog() ([]byte, error) { return e.Changes().MarshalBinary() }

func (e *SessionEngine) OpenRows() int64 { return int64(e.open) }

// Flush: a session engine's state is in memory, with no store.
func (e *SessionEngine) Flush(FlushTag) error { return nil }

// Err and Close: a session engine's state is in memory; nothing fails or
// needs releasing.
func (e *SessionEngine) Err() error   { return nil }
func (e *SessionEngine) Close() error { return nil }

// DrainForCheckpoint is Drain for the --drain batch: the emitted windows
// and the state to checkpoint, whose watermark is the largest of the one
// before the drain and the ends of the windows emitted.
func (e *Engine) DrainForCheckpoint() (BatchResult, Saved) {
	w, hasW := e.w, e.hasW
	res := e.Drain()
	after := e.State() // empty but for the sources: Drain closed every window
	after.Watermark, after.HasWatermark = w, hasW
	for _, e := range res.Emitted {
		if !after.HasWatermark || e.Window.End > after.Watermark {
			after.Watermark, after.HasWatermark = e.Window.End, true
		}
	}
	return res, after
}

// AfterDrain returns the engine to keep after the drain batch committed
// after (a *State): a fresh memory engine holding it, or this store engine
// with its watermark set back from +infinity.
func (e *Engine) AfterDrain(after Saved) (Windower, error) {
	return e.afterDrain(after.(*State))
}

// DrainForCheckpoint is Drain for the --drain batch of a run: it returns
// the emitted sessions and the state to checkpoint, as
// Engine.DrainForCheckpoint does for windows: W is the largest of the
// watermark before the drain and the ends of the sessions emitted (not
// +infinity, so a later run goes on from there), and under the window rule
// every key keeps the end of its last closed session while a row could
// touch it, so a later run never opens a session overlapping one the drain
// emitted.
func (e *SessionEngine) DrainForCheckpoint() (BatchResult, Saved) {
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

// AfterDrain returns a session engine holding after (a *SessionState).
func (e *SessionEngine) AfterDrain(after Saved) (Windower, error) {
	return NewSessionEngine(e.Gap(), e.cfg, after.(*SessionState))
}
