package engine

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"tidemark"
)

// batchIn is one micro-batch of a generated run.
type batchIn struct {
	recs []tidemark.Record
	now  time.Time
}

// refOut is what the reference says one batch must produce.
type refOut struct {
	emitted   []tidemark.Result
	dropped   int64
	w         int64
	hasW      bool
	statuses  []tidemark.Status // per record; StatusOK for quarantined ones
	disorders []int64
}

type winKey struct {
	w   tidemark.Window
	key tidemark.Key
}

// naiveWindows lists the windows containing t without WindowSpec.Assign:
// every multiple of slide in (t-size, t].
func naiveWindows(size, slide, t int64) []tidemark.Window {
	var out []tidemark.Window
	for s := ((t-size)/slide - 2) * slide; s <= t; s += slide {
		if s > t-size {
			out = append(out, tidemark.Window{Start: s, End: s + size})
		}
	}
	return out
}

// reference recomputes, from the full history, what the last batch of
// history must produce, and the open aggregates after it. drain adds a
// final Drain after the last batch and returns its output instead.
func reference(cfg Config, history []batchIn, drain bool) (refOut, map[winKey]tidemark.Agg) {
	size, slide := cfg.Window.Size, cfg.Window.Normalized().Slide
	type src struct {
		max      int64
		hasMax   bool
		lastSeen time.Time
	}
	srcs := map[string]*src{}
	open := map[winKey]tidemark.Agg{}
	var w int64
	var hasW bool
	var out refOut
	for _, b := range history {
		out = refOut{}
		changed := map[winKey]bool{}
		prevW, prevHas := w, hasW
		for _, r := range b.recs {
			s := srcs[r.Source]
			if s == nil {
				s = &src{}
				srcs[r.Source] = s
			}
			s.lastSeen = b.now
			if r.Reason != tidemark.ReasonNone {
				out.statuses = append(out.statuses, tidemark.StatusOK)
				out.disorders = append(out.disorders, 0)
				continue
			}
			var dis int64
			if s.hasMax && s.max > r.EventTime {
				dis = s.max - r.EventTime
			}
			if !s.hasMax || r.EventTime > s.max {
				s.max, s.hasMax = r.EventTime, true
			}
			late := false
			for _, win := range naiveWindows(size, slide, r.EventTime) {
				drop := prevHas && win.End <= prevW
				if cfg.LateRule == LateEvent {
					drop = prevHas && r.EventTime < prevW
				}
				if drop {
					late = true
					continue
				}
				k := winKey{win, r.Key}
				a := open[k]
				a.Add(r.Value, r.HasValue)
				open[k] = a
				changed[k] = true
			}
			st := tidemark.StatusOK
			if late {
				st = tidemark.StatusLate
				out.dropped++
			}
			out.statuses = append(out.statuses, st)
			out.disorders = append(out.disorders, dis)
		}
		// W from every source that has an event and is not idle.
		var cands []int64
		for _, s := range srcs {
			if !s.hasMax || (cfg.IdleTimeout > 0 && b.now.Sub(s.lastSeen) >= cfg.IdleTimeout) {
				continue
			}
			cands = append(cands, s.max-cfg.Lateness.Microseconds())
		}
		if len(cands) > 0 {
			c := slices.Min(cands)
			if cfg.Policy == PolicyMax {
				c = slices.Max(cands)
			}
			if !hasW || c > w {
				w, hasW = c, true
			}
		}
		for k, a := range open {
			switch {
			case hasW && k.w.End <= w:
				out.emitted = append(out.emitted, tidemark.Result{Window: k.w, Key: k.key, Agg: a, Final: true})
				delete(open, k)
			case cfg.OutputMode == Update && changed[k]:
				out.emitted = append(out.emitted, tidemark.Result{Window: k.w, Key: k.key, Agg: a})
			}
		}
		out.w, out.hasW = w, hasW
	}
	if drain {
		out = refOut{w: tidemark.MaxTime, hasW: true}
		for k, a := range open {
			out.emitted = append(out.emitted, tidemark.Result{Window: k.w, Key: k.key, Agg: a, Final: true})
		}
		clear(open)
	}
	slices.SortFunc(out.emitted, tidemark.CompareResults)
	return out, open
}

// genRun draws a random configuration and a random run of batches.
func genRun(rng *rand.Rand) (Config, []batchIn) {
	size := 1 + rng.Int64N(20)
	slide := size
	if rng.IntN(2) == 0 {
		slide = 1 + rng.Int64N(size)
	}
	cfg := Config{
		Window:     tidemark.WindowSpec{Size: size, Slide: slide},
		Lateness:   time.Duration(rng.Int64N(15)) * time.Microsecond,
		LateRule:   LateRule(rng.IntN(2)),
		OutputMode: OutputMode(rng.IntN(2)),
		Policy:     Policy(rng.IntN(2)),
	}
	if rng.IntN(2) == 0 {
		cfg.IdleTimeout = time.Duration(1+rng.IntN(5)) * time.Second
	}
	nsrc := 1 + rng.IntN(3)
	clocks := make([]int64, nsrc)
	base := rng.Int64N(2000) - 1000
	for i := range clocks {
		clocks[i] = base + rng.Int64N(20)
	}
	keys := []tidemark.Key{"", tidemark.MakeKey(tidemark.KeyPart{Null: true}), tidemark.MakeKey(tidemark.KeyPart{Value: "a"}), tidemark.MakeKey(tidemark.KeyPart{Value: "b"})}
	keys = keys[:1+rng.IntN(len(keys))]
	var recs []tidemark.Record
	for range 1 + rng.IntN(150) {
		s := rng.IntN(nsrc)
		clocks[s] += rng.Int64N(4)
		r := tidemark.Record{
			Source:    fmt.Sprintf("src%d", s),
			EventTime: clocks[s] - rng.Int64N(1+rng.Int64N(25)),
			Key:       keys[rng.IntN(len(keys))],
		}
		if rng.IntN(3) > 0 {
			r.Value, r.HasValue = float64(rng.IntN(100)-50), true
		}
		switch rng.IntN(20) {
		case 0:
			r.Reason, r.EventTime = tidemark.ReasonFutureTime, clocks[s]+1_000_000
		case 1:
			r.Reason, r.EventTime = tidemark.ReasonMalformed, 0
		}
		recs = append(recs, r)
	}
	var batches []batchIn
	now := time.Unix(1_700_000_000, 0)
	for len(recs) > 0 {
		n := min(len(recs), 1+rng.IntN(8))
		if rng.IntN(10) == 0 {
			n = 0 // an empty batch: only the clock moves
		}
		now = now.Add(time.Duration(rng.IntN(3000)) * time.Millisecond)
		batches = append(batches, batchIn{recs: slices.Clone(recs[:n]), now: now})
		recs = recs[n:]
	}
	return cfg, batches
}

// TestEngineMatchesReference runs random configurations and arrival orders
// through the engine and through the naive reference, batch by batch, and
// checks the row accounting of every window. Half the runs restart the
// engine from a marshalled snapshot at a random batch.
func TestEngineMatchesReference(t *testing.T) {
	runs := 600
	if testing.Short() {
		runs = 200
	}
	for seed := range runs {
		rng := rand.New(rand.NewPCG(uint64(seed), 42))
		cfg, batches := genRun(rng)
		restartAt := -1
		if rng.IntN(2) == 0 {
			restartAt = rng.IntN(len(batches))
		}
		drain := rng.IntN(2) == 0
		if err := checkRun(cfg, batches, restartAt, drain); err != nil {
			t.Fatalf("seed %d, cfg %+v, restart at %d, drain %v: %v", seed, cfg, restartAt, drain, err)
		}
	}
}

func checkRun(cfg Config, batches []batchIn, restartAt int, drain bool) error {
	e, err := New(cfg, nil)
	if err != nil {
		return err
	}
	size := cfg.Window.Size
	final := map[winKey]int64{}   // count emitted final
	dropped := map[winKey]int64{} // rows the watermark left out of the window
	exact := map[winKey]int64{}   // every valid row
	prevW, prevHas := tidemark.MinTime, false
	lastW := tidemark.MinTime
	for i, b := range batches {
		if i == restartAt {
			data, err := e.State().MarshalBinary()
			if err != nil {
				return err
			}
			var st State
			if err := st.UnmarshalBinary(data); err != nil {
				return err
			}
			if e, err = New(cfg, &st); err != nil {
				return err
			}
		}
		want, _ := reference(cfg, batches[:i+1], false)
		recs := slices.Clone(b.recs)
		got := e.Process(recs, b.now)
		if err := compareBatch(i, got, want, recs); err != nil {
			return err
		}
		if got.HasWatermark && got.Watermark < lastW {
			return fmt.Errorf("batch %d: W went back from %d to %d", i, lastW, got.Watermark)
		}
		lastW = got.Watermark
		for _, r := range recs {
			if !r.Valid() {
				continue
			}
			for _, win := range cfg.Window.Assign(nil, r.EventTime) {
				k := winKey{win, r.Key}
				exact[k]++
				if r.Status == tidemark.StatusLate && (cfg.LateRule == LateEvent || (prevHas && win.End <= prevW)) {
					dropped[k]++
				}
			}
		}
		for _, res := range got.Emitted {
			if res.Final {
				final[winKey{res.Window, res.Key}] += res.Agg.Count
			}
		}
		prevW, prevHas = got.Watermark, got.HasWatermark
	}
	if drain {
		want, _ := reference(cfg, batches, true)
		got := e.Drain()
		if err := compareBatch(len(batches), got, want, nil); err != nil {
			return err
		}
		for _, res := range got.Emitted {
			final[winKey{res.Window, res.Key}] += res.Agg.Count
		}
	}
	_, wantOpen := reference(cfg, batches, drain)
	open := map[winKey]int64{}
	st := e.State()
	if len(st.Open) != len(wantOpen) {
		return fmt.Errorf("got %d open windows, want %d", len(st.Open), len(wantOpen))
	}
	for _, r := range st.Open {
		k := winKey{r.Window, r.Key}
		if r.Agg != wantOpen[k] {
			return fmt.Errorf("open %v %q: got %+v, want %+v", r.Window, r.Key, r.Agg, wantOpen[k])
		}
		open[k] = r.Agg.Count
	}
	for k, n := range exact {
		if k.w.End-k.w.Start != size {
			return fmt.Errorf("window %v has the wrong size", k.w)
		}
		if got := final[k] + open[k] + dropped[k]; got != n {
			return fmt.Errorf("window %v %q: emitted %d + open %d + dropped %d = %d, want %d",
				k.w, k.key, final[k], open[k], dropped[k], got, n)
		}
	}
	return nil
}

func compareBatch(i int, got BatchResult, want refOut, recs []tidemark.Record) error {
	if !slices.Equal(got.Emitted, want.emitted) {
		return fmt.Errorf("batch %d: got emitted %v, want %v", i, got.Emitted, want.emitted)
	}
	if got.Dropped != want.dropped {
		return fmt.Errorf("batch %d: got dropped %d, want %d", i, got.Dropped, want.dropped)
	}
	if got.HasWatermark != want.hasW || (want.hasW && got.Watermark != want.w) {
		return fmt.Errorf("batch %d: got W %d (%v), want %d (%v)", i, got.Watermark, got.HasWatermark, want.w, want.hasW)
	}
	for j, r := range recs {
		if r.Status != want.statuses[j] || r.Disorder != want.disorders[j] {
			return fmt.Errorf("batch %d record %d: got %v/%d, want %v/%d", i, j, r.Status, r.Disorder, want.statuses[j], want.disorders[j])
		}
	}
	return nil
}

// TestEngineMatchesReferenceManyKeys is TestEngineMatchesReference with a
// state past touchMinKeys keys, so Process reads ahead of its records (and
// the tables grow and rebuild through their entries): 40k records over up
// to 100k keys, in batches of 8k, with a lateness that holds most of them
// open, the keys sharing a long prefix.
func TestEngineMatchesReferenceManyKeys(t *testing.T) {
	for seed := range 2 {
		rng := rand.New(rand.NewPCG(uint64(seed), 43))
		cfg := Config{
			Window:     tidemark.WindowSpec{Size: 20, Slide: []int64{20, 10}[seed%2]},
			Lateness:   time.Duration(12_000+rng.Int64N(2000)) * time.Microsecond,
			LateRule:   LateRule(seed % 2),
			OutputMode: OutputMode(rng.IntN(2)),
		}
		var batches []batchIn
		now := time.Unix(1_700_000_000, 0)
		clock := int64(0)
		for range 5 {
			recs := make([]tidemark.Record, 0, 8000)
			for range 8000 {
				clock += rng.Int64N(2)
				recs = append(recs, tidemark.Record{
					Source:    "s",
					EventTime: clock - rng.Int64N(30),
					Key:       tidemark.MakeKey(tidemark.KeyPart{Value: fmt.Sprintf("user-with-a-long-prefix-%d", rng.IntN(100_000))}),
					Value:     float64(rng.IntN(100)),
					HasValue:  true,
				})
			}
			now = now.Add(time.Second)
			batches = append(batches, batchIn{recs: recs, now: now})
		}
		e := mustNew(t, cfg, nil)
		peak := 0
		for _, b := range batches {
			e.Process(slices.Clone(b.recs), b.now)
			peak = max(peak, e.keyIDs.Len())
		}
		if peak < touchMinKeys+1000 {
			t.Fatalf("seed %d: at most %d open keys: the state never got past %d", seed, peak, touchMinKeys)
		}
		if err := checkRun(cfg, batches, 3, seed == 0); err != nil {
			t.Fatalf("seed %d, cfg %+v: %v", seed, cfg, err)
		}
	}
}
