package lateness

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"time"

	"tidemark"
)

// The late rules of the what-if, as the stream's --late-rule spells them.
const (
	RuleEvent  = "event"
	RuleWindow = "window"
)

const (
	ruleEvent = iota
	ruleWindow
)

// Replayer is one stream engine with one lateness budget and late rule.
// Process runs one micro-batch and sets each record's Status (StatusLate
// for the rows the watermark dropped); now is the batch's wall clock, for
// idle sources.
type Replayer interface {
	Process(recs []tidemark.Record, now time.Time)
}

// Watermarker is what a Replayer may also do (cmd's wiring of engine.Engine
// does): report the watermark W after its last Process, and whether there
// is one yet. With it the what-if replays once, through one engine, for
// every budget and rule at once (replayOnce).
type Watermarker interface {
	Watermark() (w int64, ok bool)
}

// NewReplayer makes a fresh Replayer for a lateness budget (µs) and a late
// rule (RuleEvent or RuleWindow). cmd/tidemark wires it to engine.Engine
// with the lake's window spec.
type NewReplayer func(lateness int64, rule string) (Replayer, error)

// replay runs the rows in arrival order through one engine per (budget,
// rule) and counts each group's dropped rows: drops[budget][rule][group].
//
// Micro-batches: consecutive rows (in arrival order) with the same
// batch_id form one batch, split at cfg.MaxBatchRows. When arrival_time is
// the stream's read clock (no --arrival-field), arrival order is the order
// the stream read the rows and these runs are exactly its micro-batches, so
// the replay at the stream's own budget reproduces its late marks. When
// arrivals come from a field and disagree with read order, runs get
// shorter: the replay errs toward per-event processing, which drops at
// least as much. Within a batch the order does not change what is dropped:
// every row is judged by the watermark of the batch before.
//
// With a time range the replay sees only the rows in it, so it starts with
// no watermark at the range's start, as a stream started there would.
// The replay uses the engine's policy and idle timeout as cmd configures
// it (default: min over sources, no idle timeout), with the batch's latest
// arrival time as the engine's clock.
//
// Records carry no key: the engine's late decision reads only event time,
// source and the watermark, and without keys its state is one slot per
// open window.
func replay(ctx context.Context, srt *sorter, cfg Config, win tidemark.WindowSpec, budgets []int64, groups int) ([][2][]int64, error) {
	r0, err := cfg.Replay(0, RuleEvent)
	if err != nil {
		return nil, fmt.Errorf("lateness: replay with lateness 0, rule %s: %w", RuleEvent, err)
	}
	if wm, ok := r0.(Watermarker); ok && win.Size > 0 {
		return replayOnce(ctx, srt, cfg, win, r0, wm, budgets, groups)
	}
	type engine struct {
		r     Replayer
		drops []int64
	}
	drops := make([][2][]int64, len(budgets))
	var engines []engine
	for bi, b := range budgets {
		for ri, rule := range []string{RuleEvent, RuleWindow} {
			r, err := cfg.Replay(b, rule)
			if err != nil {
				return nil, fmt.Errorf("lateness: replay with lateness %dµs, rule %s: %w", b, rule, err)
			}
			drops[bi][ri] = make([]int64, groups)
			engines = append(engines, engine{r, drops[bi][ri]})
		}
	}
	var (
		recs    []tidemark.Record
		grp     []uint32
		batch   int64
		latest  int64
		counter int
	)
	// The engines are independent: they run on every core, each worker on
	// its own copy of the batch (Process writes each record's Status).
	workers := min(runtime.GOMAXPROCS(0), len(engines))
	copies := make([][]tidemark.Record, workers)
	front := newReplayFrontier(srt)
	flush := func() error {
		if len(recs) == 0 {
			return nil
		}
		if front != nil {
			all := make([]Replayer, len(engines))
			for i := range engines {
				all[i] = engines[i].r
			}
			front.apply(all)
		}
		now := time.UnixMicro(latest)
		var wg sync.WaitGroup
		for w := range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for ei := w; ei < len(engines); ei += workers {
					e := engines[ei]
					copies[w] = append(copies[w][:0], recs...)
					e.r.Process(copies[w], now)
					for i := range copies[w] {
						if copies[w][i].Status == tidemark.StatusLate {
							e.drops[grp[i]]++
						}
					}
				}
			}()
		}
		wg.Wait()
		recs, grp = recs[:0], grp[:0]
		return nil
	}
	err = srt.each(func(r *row) error {
		if len(recs) > 0 && (r.batch != batch || len(recs) >= cfg.MaxBatchRows) {
			if err := flush(); err != nil {
				return err
			}
		}
		if counter++; counter%65536 == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		batch, latest = r.batch, max(latest, r.arrival)
		if front != nil {
			front.see(r)
		}
		recs = append(recs, tidemark.Record{
			Source: srt.names[r.source], File: srt.names[r.file], Offset: r.offset,
			Arrival: r.arrival, EventTime: r.event,
		})
		grp = append(grp, r.group)
		return nil
	})
	if err == nil {
		err = flush()
	}
	if err != nil {
		return nil, fmt.Errorf("lateness: replay: %w", err)
	}
	return drops, nil
}

// replayOnce is the what-if in one pass through one engine, for every
// budget and both rules. A stream's watermark with budget L is, batch by
// batch, W(L) = max over the batches so far of (the policy's min or max
// over its active sources of their levels) − L: the levels (max event
// times, capped at frontiers) and which sources are active (idle) depend on
// the rows read, never on the budget or on what was dropped, and subtracting
// L commutes with min, max and the running max. So one engine with budget 0
// gives W(0) before each batch, and a row of that batch is dropped
//   - under the event rule iff its event time < W(0) − L,
//   - under the window rule iff its first window's end <= W(0) − L
//     (its first window ends first: some window of it is closed),
//
// each a prefix of the ascending budgets, found by a scan from the
// smallest (most rows are kept by every budget: one comparison). 12
// engines over 1M rows took 0.5 of the report's 2.1 CPU-seconds.
func replayOnce(ctx context.Context, srt *sorter, cfg Config, win tidemark.WindowSpec, r0 Replayer, wm Watermarker, budgets []int64, groups int) ([][2][]int64, error) {
	nb := len(budgets)
	// hist[rule][group*(nb+1)+k]: rows of the group dropped by the first
	// k budgets exactly.
	var hist [2][]int64
	hist[0], hist[1] = make([]int64, groups*(nb+1)), make([]int64, groups*(nb+1))
	th := make([]int64, nb) // W(0) − each budget, for the batch
	var (
		evs     []int64  // the batch's event times
		grp     []uint32 // and groups
		tops    []row    // per source in the batch, its row with the latest event time
		recs    []tidemark.Record
		wins    []tidemark.Window
		batch   int64
		latest  int64
		counter int
	)
	front := newReplayFrontier(srt)
	flush := func() {
		if len(evs) == 0 {
			return
		}
		if w, ok := wm.Watermark(); ok {
			for k, b := range budgets {
				th[k] = tidemark.SubSat(w, b) // descending
			}
			for i, ev := range evs {
				wins = win.Assign(wins[:0], ev)
				end := wins[0].End
				// Most rows are kept by every budget: one comparison.
				ke, kw := 0, 0
				for ke < nb && ev < th[ke] {
					ke++
				}
				for kw < nb && end <= th[kw] {
					kw++
				}
				g := int(grp[i]) * (nb + 1)
				hist[0][g+ke]++
				hist[1][g+kw]++
			}
		}
		if front != nil {
			front.apply([]Replayer{r0})
		}
		// The engine's watermark follows each source's latest event time
		// and which sources the batch saw: one record per source gives it
		// both, for a fraction of the batch's cost.
		recs = recs[:0]
		for _, t := range tops {
			recs = append(recs, tidemark.Record{Source: srt.names[t.source], File: srt.names[t.file], Offset: t.offset, Arrival: t.arrival, EventTime: t.event})
		}
		r0.Process(recs, time.UnixMicro(latest))
		evs, grp, tops = evs[:0], grp[:0], tops[:0]
	}
	err := srt.each(func(r *row) error {
		if len(evs) > 0 && (r.batch != batch || len(evs) >= cfg.MaxBatchRows) {
			flush()
		}
		if counter++; counter%65536 == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		batch, latest = r.batch, max(latest, r.arrival)
		if front != nil {
			front.see(r)
		}
		evs, grp = append(evs, r.event), append(grp, r.group)
		for i := range tops {
			if tops[i].source == r.source {
				if r.event > tops[i].event {
					tops[i] = *r
				}
				return nil
			}
		}
		tops = append(tops, *r)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("lateness: replay: %w", err)
	}
	flush()
	drops := make([][2][]int64, nb)
	for bi := range drops {
		drops[bi] = [2][]int64{make([]int64, groups), make([]int64, groups)}
	}
	for rule := range hist {
		for g := range groups {
			// A row dropped by the first k budgets counts for budgets 0..k-1.
			var dropped int64
			for k := nb; k >= 1; k-- {
				dropped += hist[rule][g*(nb+1)+k]
				drops[k-1][rule][g] = dropped
			}
		}
	}
	return drops, nil
}
