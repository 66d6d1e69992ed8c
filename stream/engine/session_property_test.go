package engine

import (
	"bytes"
	"cmp"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"tidemark"
)

// sessionize is the naive definition of sessions, from scratch: sort a
// key's rows by event time and cut wherever the next row is at least gap
// after the previous one.
func sessionize(rows map[tidemark.Key][]tidemark.Record, gap int64) []tidemark.Result {
	var out []tidemark.Result
	for key, rs := range rows {
		rs = slices.Clone(rs)
		slices.SortStableFunc(rs, func(a, b tidemark.Record) int { return cmp.Compare(a.EventTime, b.EventTime) })
		var cur *tidemark.Result
		for _, r := range rs {
			if cur == nil || r.EventTime-(cur.Window.End-gap) >= gap {
				out = append(out, tidemark.Result{Window: tidemark.Window{Start: r.EventTime}, Key: key, Final: true})
				cur = &out[len(out)-1]
			}
			cur.Window.End = r.EventTime + gap
			cur.Agg.Add(r.Value, r.HasValue)
		}
	}
	slices.SortFunc(out, tidemark.CompareResults)
	return out
}

// sessionRef replays a run naively: after each batch it sessionizes every
// accepted row from scratch and emits the sessions the watermark closes
// that it has not emitted yet. A row is late by the rules as the README
// states them, checked against every session emitted so far.
type sessionRef struct {
	cfg      Config
	gap      int64
	srcs     map[string]*refSource
	accepted map[tidemark.Key][]tidemark.Record
	emitted  map[tidemark.Key][]tidemark.Result
	w        int64
	hasW     bool
}

type refSource struct {
	max      int64
	hasMax   bool
	lastSeen time.Time
}

func newSessionRef(cfg Config, gap int64) *sessionRef {
	return &sessionRef{cfg: cfg, gap: gap, srcs: map[string]*refSource{},
		accepted: map[tidemark.Key][]tidemark.Record{}, emitted: map[tidemark.Key][]tidemark.Result{}}
}

func (f *sessionRef) late(r tidemark.Record) bool {
	if !f.hasW {
		return false
	}
	if f.cfg.LateRule == LateEvent {
		return r.EventTime < f.w
	}
	if r.EventTime+f.gap <= f.w {
		return true
	}
	for _, s := range f.emitted[r.Key] {
		if r.EventTime < s.Window.End && s.Window.Start < r.EventTime+f.gap {
			return true
		}
	}
	return false
}

// batch returns what one batch must emit, its statuses and drop count.
func (f *sessionRef) batch(b batchIn) (emitted []tidemark.Result, statuses []tidemark.Status, dropped int64, err error) {
	for _, r := range b.recs {
		s := f.srcs[r.Source]
		if s == nil {
			s = &refSource{}
			f.srcs[r.Source] = s
		}
		s.lastSeen = b.now
		if r.Reason != tidemark.ReasonNone {
			statuses = append(statuses, tidemark.StatusOK)
			continue
		}
		if !s.hasMax || r.EventTime > s.max {
			s.max, s.hasMax = r.EventTime, true
		}
		if f.late(r) {
			statuses = append(statuses, tidemark.StatusLate)
			dropped++
			continue
		}
		statuses = append(statuses, tidemark.StatusOK)
		f.accepted[r.Key] = append(f.accepted[r.Key], r)
	}
	var cands []int64
	for _, s := range f.srcs {
		if !s.hasMax || (f.cfg.IdleTimeout > 0 && b.now.Sub(s.lastSeen) >= f.cfg.IdleTimeout) {
			continue
		}
		cands = append(cands, s.max-f.cfg.Lateness.Microseconds())
	}
	if len(cands) > 0 {
		c := slices.Min(cands)
		if f.cfg.Policy == PolicyMax {
			c = slices.Max(cands)
		}
		if !f.hasW || c > f.w {
			f.w, f.hasW = c, true
		}
	}
	emitted, err = f.close(f.hasW, f.w)
	return emitted, statuses, dropped, err
}

// close emits the from-scratch sessions with end <= w not emitted before,
// and checks that every session emitted before is still one of them,
// unchanged: an emitted session must never grow or merge.
func (f *sessionRef) close(hasW bool, w int64) ([]tidemark.Result, error) {
	all := sessionize(f.accepted, f.gap)
	have := map[tidemark.Result]bool{}
	for _, s := range all {
		have[s] = true
	}
	var out []tidemark.Result
	for key, ss := range f.emitted {
		for _, s := range ss {
			if !have[s] {
				return nil, fmt.Errorf("emitted session %v %q changed after it was emitted", s.Window, key)
			}
		}
	}
	for _, s := range all {
		if hasW && s.Window.End <= w && !slices.Contains(f.emitted[s.Key], s) {
			out = append(out, s)
			f.emitted[s.Key] = append(f.emitted[s.Key], s)
		}
	}
	return out, nil
}

// openSessions are the from-scratch sessions not emitted yet.
func (f *sessionRef) openSessions() []tidemark.Result {
	var out []tidemark.Result
	for _, s := range sessionize(f.accepted, f.gap) {
		if !slices.Contains(f.emitted[s.Key], s) {
			s.Final = false
			out = append(out, s)
		}
	}
	return out
}

// genSessionRun draws a run as genRun does, with a gap and append output.
func genSessionRun(rng *rand.Rand) (int64, Config, []batchIn) {
	cfg, batches := genRun(rng)
	cfg.OutputMode = Append
	gap := 1 + rng.Int64N(20)
	return gap, cfg, batches
}

// TestSessionEngineMatchesReference runs random gaps, budgets, rules,
// arrival orders and batch sizes through the engine and the naive
// reference, batch by batch: emitted sessions, late marks and drops, the
// watermark, the open state, and that no key ever has two overlapping
// sessions emitted. Half the runs restart from a marshalled state.
func TestSessionEngineMatchesReference(t *testing.T) {
	runs := 1500
	if testing.Short() {
		runs = 300
	}
	for seed := range runs {
		rng := rand.New(rand.NewPCG(uint64(seed), 13))
		gap, cfg, batches := genSessionRun(rng)
		restartAt := -1
		if rng.IntN(2) == 0 {
			restartAt = rng.IntN(len(batches))
		}
		drain := rng.IntN(2) == 0
		if err := checkSessionRun(gap, cfg, batches, restartAt, drain); err != nil {
			t.Fatalf("seed %d, gap %d, cfg %+v, restart at %d, drain %v: %v", seed, gap, cfg, restartAt, drain, err)
		}
	}
}

func checkSessionRun(gap int64, cfg Config, batches []batchIn, restartAt int, drain bool) error {
	d := time.Duration(gap) * time.Microsecond
	e, err := NewSessionEngine(d, cfg, nil)
	if err != nil {
		return err
	}
	ref := newSessionRef(cfg, gap)
	// replica follows e through its changelog alone.
	replica, err := NewSessionEngine(d, cfg, nil)
	if err != nil {
		return err
	}
	var all []tidemark.Result
	for i, b := range batches {
		if i == restartAt {
			data, err := e.State().MarshalBinary()
			if err != nil {
				return err
			}
			var st SessionState
			if err := st.UnmarshalBinary(data); err != nil {
				return err
			}
			if e, err = NewSessionEngine(d, cfg, &st); err != nil {
				return err
			}
		}
		want, statuses, dropped, err := ref.batch(b)
		if err != nil {
			return fmt.Errorf("batch %d: reference: %v", i, err)
		}
		slices.SortFunc(want, tidemark.CompareResults)
		recs := slices.Clone(b.recs)
		got := e.Process(recs, b.now)
		if !slices.Equal(got.Emitted, want) {
			return fmt.Errorf("batch %d: got emitted %v, want %v", i, got.Emitted, want)
		}
		if got.Dropped != dropped {
			return fmt.Errorf("batch %d: got dropped %d, want %d", i, got.Dropped, dropped)
		}
		if got.HasWatermark != ref.hasW || (ref.hasW && got.Watermark != ref.w) {
			return fmt.Errorf("batch %d: got W %d (%v), want %d (%v)", i, got.Watermark, got.HasWatermark, ref.w, ref.hasW)
		}
		for j, r := range recs {
			if r.Status != statuses[j] {
				return fmt.Errorf("batch %d record %d (t=%d): got %v, want %v", i, j, r.EventTime, r.Status, statuses[j])
			}
		}
		all = append(all, got.Emitted...)
		if err := followChanges(e, replica); err != nil {
			return fmt.Errorf("batch %d: %v", i, err)
		}
	}
	wantOpen := ref.openSessions()
	if drain {
		got := e.Drain()
		if !slices.Equal(got.Emitted, func() []tidemark.Result {
			out := slices.Clone(wantOpen)
			for i := range out {
				out[i].Final = true
			}
			return out
		}()) {
			return fmt.Errorf("drain: got %v, want %v", got.Emitted, wantOpen)
		}
		all = append(all, got.Emitted...)
		wantOpen = nil
		if err := followChanges(e, replica); err != nil {
			return fmt.Errorf("drain: %v", err)
		}
	}
	st := e.State()
	if len(st.Open) != len(wantOpen) || (len(wantOpen) > 0 && !slices.Equal(st.Open, wantOpen)) {
		return fmt.Errorf("open state %v, want %v", st.Open, wantOpen)
	}
	if got := e.open; got != len(wantOpen) {
		return fmt.Errorf("open count %d, want %d", got, len(wantOpen))
	}
	return checkNoOverlap(all)
}

// checkNoOverlap fails if two sessions of one key overlap.
func checkNoOverlap(rs []tidemark.Result) error {
	byKey := map[tidemark.Key][]tidemark.Window{}
	for _, r := range rs {
		byKey[r.Key] = append(byKey[r.Key], r.Window)
	}
	for key, ws := range byKey {
		slices.SortFunc(ws, func(a, b tidemark.Window) int { return cmp.Compare(a.Start, b.Start) })
		for i := 1; i < len(ws); i++ {
			if ws[i].Start < ws[i-1].End {
				return fmt.Errorf("key %q: sessions %v and %v overlap", key, ws[i-1], ws[i])
			}
		}
	}
	return nil
}

// followChanges applies e's last changelog entry, through its encoding, to
// replica and checks both now hold the same state.
func followChanges(e, replica *SessionEngine) error {
	data, err := e.Changes().MarshalBinary()
	if err != nil {
		return err
	}
	var ch SessionChanges
	if err := ch.UnmarshalBinary(data); err != nil {
		return err
	}
	if err := replica.Apply(&ch); err != nil {
		return err
	}
	want, _ := e.State().MarshalBinary()
	got, _ := replica.State().MarshalBinary()
	if !bytes.Equal(got, want) {
		return fmt.Errorf("state from the changelog %+v differs from the engine's %+v", replica.State(), e.State())
	}
	if replica.open != e.open || len(replica.keys) != len(e.keys) || len(replica.due.entries) != len(e.due.entries) {
		return fmt.Errorf("replica holds %d/%d/%d sessions/keys/due, engine %d/%d/%d", replica.open, len(replica.keys), len(replica.due.entries), e.open, len(e.keys), len(e.due.entries))
	}
	return nil
}

// FuzzSessionEngine drives the session engine with a run drawn from the
// fuzzer's seed and compares it with the naive reference.
func FuzzSessionEngine(f *testing.F) {
	for _, s := range []uint64{0, 1, 2, 99} {
		f.Add(s, uint64(0))
	}
	f.Fuzz(func(t *testing.T, a, b uint64) {
		rng := rand.New(rand.NewPCG(a, b))
		gap, cfg, batches := genSessionRun(rng)
		restartAt := rng.IntN(len(batches)+1) - 1
		if err := checkSessionRun(gap, cfg, batches, restartAt, rng.IntN(2) == 0); err != nil {
			t.Fatalf("gap %d cfg %+v: %v", gap, cfg, err)
		}
	})
}
