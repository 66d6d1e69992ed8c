package lateness

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"tidemark"
	"tidemark/lake"
	"tidemark/lake/store"
	"tidemark/stream/engine"
)

// t0 is the first event time of the generated data.
var t0 = time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC).UnixMicro()

const testWindow = int64(time.Minute / time.Microsecond)

// testData is a generated lake and what was appended to it, in the order
// and batches the stream processed it.
type testData struct {
	lk      *lake.Lake
	batches [][]tidemark.Record
	recs    []tidemark.Record // all records, with the Status and Disorder the stream gave them
}

// genConfig shapes generated data.
type genConfig struct {
	n        int
	sources  []string
	lateness int64 // µs, of the stream that wrote the lake (window rule)
	seed     uint64
	maxBatch int // rows per micro-batch are 1..maxBatch
	// bad adds rows whose event time is badTime (epoch zero when 0),
	// arriving among the others: a client with a broken clock.
	bad     int
	badTime int64
	// outage, when not 0, is the start of an hour (µs) in which 30% of
	// the events arrive 1–3 hours late (a source that stopped and caught
	// up); the other hours then have no hours-late tail.
	outage int64
	// files spreads each source's events over this many files (0: one),
	// so the replay caps sources at their frontiers.
	files int
	// slide, when not 0, makes the lake's windows sliding.
	slide int64
	// shift moves every event (and its arrival) by this much, µs: a
	// negative one puts them before 1970.
	shift int64
}

// makeLake generates n events over several sources whose arrival delay is
// heavy-tailed (most rows seconds late, some minutes, a few hours), runs them
// through the real stream engine in arrival order in batches of random size,
// and appends each batch to a fresh lake, as the stream does.
func makeLake(t testing.TB, g genConfig) *testData {
	t.Helper()
	st, err := store.OpenDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	win := tidemark.WindowSpec{Size: testWindow, Slide: g.slide}
	lk, err := lake.Open(ctx, st, lake.Config{Keys: []string{"page"}, Window: win})
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(g.seed, 7))
	pages := []tidemark.Key{tidemark.MakeKey(tidemark.KeyPart{Value: "/a"}), tidemark.MakeKey(tidemark.KeyPart{Value: "/b"}),
		tidemark.MakeKey(tidemark.KeyPart{Value: "/c"}), tidemark.MakeKey(tidemark.KeyPart{Null: true})}
	recs := make([]tidemark.Record, g.n)
	for i := range recs {
		r := &recs[i]
		r.Source = g.sources[i%len(g.sources)]
		r.File = "events-" + r.Source + ".ndjson"
		if g.files > 1 {
			r.File = fmt.Sprintf("events-%s-%d.ndjson", r.Source, (i/len(g.sources))%g.files)
		}
		r.EventTime = t0 + g.shift + int64(i)*500_000 + rng.Int64N(1000) // 2 events/s
		var delay float64
		switch u := rng.Float64(); {
		case u < 0.90:
			delay = rng.ExpFloat64() * 2e6 // seconds
		case u < 0.99:
			delay = rng.ExpFloat64() * 120e6 // minutes
		default:
			delay = rng.ExpFloat64() * 3600e6 // hours
		}
		if rng.IntN(50) == 0 {
			delay = -rng.Float64() * 5e6 // clock skew: arrival before event time
		}
		if g.outage != 0 {
			delay = min(delay, 600e6)
			if r.EventTime >= g.outage && r.EventTime < g.outage+usHour && rng.Float64() < 0.3 {
				delay = 3600e6 + rng.Float64()*7200e6
			}
		}
		r.Arrival = r.EventTime + int64(delay)
		r.Key = pages[rng.IntN(len(pages))]
		r.Payload = []byte("{}")
	}
	for i := range g.bad {
		r := recs[rng.IntN(g.n)]
		r.EventTime = g.badTime + int64(i)
		r.Arrival += int64(rng.IntN(1000))
		recs = append(recs, r)
	}
	slices.SortFunc(recs, func(a, b tidemark.Record) int {
		return cmp.Or(cmp.Compare(a.Arrival, b.Arrival), cmp.Compare(a.Source, b.Source), cmp.Compare(a.File, b.File))
	})
	offsets := map[string]int64{}
	for i := range recs {
		recs[i].Offset = offsets[recs[i].File]
		offsets[recs[i].File] += 100
	}
	e, err := engine.New(engine.Config{Window: win, Lateness: time.Duration(g.lateness) * time.Microsecond}, nil)
	if err != nil {
		t.Fatal(err)
	}
	d := &testData{lk: lk}
	for start, id := 0, int64(1); start < len(recs); id++ {
		end := min(len(recs), start+1+rng.IntN(g.maxBatch))
		b := recs[start:end]
		e.Process(b, time.UnixMicro(b[len(b)-1].Arrival))
		if err := lk.AppendBatch(ctx, lake.Batch{AppID: "test", BatchID: id, Records: b}); err != nil {
			t.Fatal(err)
		}
		d.batches = append(d.batches, b)
		start = end
	}
	d.recs = recs
	return d
}

// testReplayer is what cmd/tidemark wires: the stream engine itself.
func testReplayer(budget int64, rule string) (Replayer, error) {
	return replayerFor(tidemark.WindowSpec{Size: testWindow})(budget, rule)
}

// replayerFor is testReplayer for a lake with windows win.
func replayerFor(win tidemark.WindowSpec) NewReplayer {
	return func(budget int64, rule string) (Replayer, error) {
		r, err := engine.ParseLateRule(rule)
		if err != nil {
			return nil, err
		}
		e, err := engine.New(engine.Config{Window: win, Lateness: time.Duration(budget) * time.Microsecond, LateRule: r}, nil)
		if err != nil {
			return nil, err
		}
		return &engineAdapter{e: e}, nil
	}
}

// engineAdapter is cmd/tidemark's wiring: it reports the watermark, so
// the what-if replays once (replayOnce).
type engineAdapter struct {
	e    *engine.Engine
	w    int64
	hasW bool
}

func (a *engineAdapter) Process(recs []tidemark.Record, now time.Time) {
	res := a.e.Process(recs, now)
	a.w, a.hasW = res.Watermark, res.HasWatermark
}

func (a *engineAdapter) Watermark() (int64, bool) { return a.w, a.hasW }

func (a *engineAdapter) SetFrontier(source string, frontier int64, held bool) {
	a.e.SetFrontier(source, frontier, held)
}

// engineOnly hides the adapter's Watermark: the what-if then runs one
// engine per budget and rule, the way a Replayer without it is served.
type engineOnly struct{ a *engineAdapter }

func (o engineOnly) Process(recs []tidemark.Record, now time.Time) { o.a.Process(recs, now) }

func (o engineOnly) SetFrontier(source string, frontier int64, held bool) {
	o.a.SetFrontier(source, frontier, held)
}

// perEngine hides the Watermark of next's replayers.
func perEngine(next NewReplayer) NewReplayer {
	return func(budget int64, rule string) (Replayer, error) {
		r, err := next(budget, rule)
		if err != nil {
			return nil, err
		}
		return engineOnly{r.(*engineAdapter)}, nil
	}
}

// streamDrops runs a fresh stream engine over the original batches, as the
// stream would have with this budget and rule, and counts the dropped rows
// per group (group names the row's group).
func (d *testData) streamDrops(t testing.TB, budget int64, rule engine.LateRule, group func(*tidemark.Record) string) map[string]int64 {
	t.Helper()
	e, err := engine.New(engine.Config{Window: tidemark.WindowSpec{Size: testWindow}, Lateness: time.Duration(budget) * time.Microsecond, LateRule: rule}, nil)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int64{}
	for _, b := range d.batches {
		b = slices.Clone(b)
		e.Process(b, time.UnixMicro(b[len(b)-1].Arrival))
		for i := range b {
			if b[i].Status == tidemark.StatusLate {
				out[group(&b[i])]++
			}
		}
	}
	return out
}

// exactQuantile is the nearest-rank q-quantile of sorted values.
func exactQuantile(sorted []int64, q float64) float64 {
	rank := max(int(math.Ceil(q*float64(len(sorted)))), 1)
	return float64(sorted[min(rank, len(sorted))-1])
}

func keyGroup(r *tidemark.Record) string {
	p := r.Key.Parts()
	if p[0].Null {
		return nullGroup
	}
	return p[0].Value
}

func fmtGroup(g *Group) string { return fmt.Sprintf("%s (%d rows)", g.Group, g.Rows) }
