package stream

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"tidemark"
	"tidemark/ingest"
	"tidemark/lake/store"
	"tidemark/lake/store/storetest"
	"tidemark/stream/engine"
)

// A property of event-time aligned input (SPEC §2, "Watermark"), over
// random events spread over 1-8 files of 1-2 sources (round-robin, one file
// per producer at different rates, rotated chunks whose names sort against
// time), random --max-batch-rows, both late rules, tumbling and sliding
// windows and per-source budgets, checked against a naive reference that
// looks at each file alone:
//
//   - a row is late only if it is late relative to the events of its own
//     file read before it (its own file's max event time minus its
//     source's budget passes it under the late rule);
//   - so when no file's own disorder exceeds its budget, no row is late and
//     the drained windows equal the exact windows of all events;
//   - the watermark is not held back for nothing: after the last batch it
//     is exactly min over sources of (max event time - budget);
//   - every line is read exactly once.

// propEvent is one generated event, in its file's order.
type propEvent struct {
	t     int64 // µs
	key   string
	value int
}

// propSource is one source's files, each a list of events in file order.
type propSource struct {
	lateness int64 // µs
	files    map[string][]propEvent
}

// genPropSource spreads the events of 1-4 producers (or one per file) over
// 1-8 files. Each producer emits at its own rate with a jitter of at most
// maxJitter (so its own disorder stays within it); with lateP, an event is
// instead hours late.
func genPropSource(rng *rand.Rand, lateness, maxJitter int64, lateP float64) propSource {
	nFiles := 1 + rng.IntN(8)
	layout := rng.IntN(3)
	producers := 1 + rng.IntN(4)
	if layout == 1 {
		producers = nFiles
	}
	base := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC).UnixMicro()
	type arrival struct {
		at int64
		p  int
		ev propEvent
	}
	var all []arrival
	for p := range producers {
		step := int64(1+rng.IntN(5)) * 1e6
		n := 20 + rng.IntN(120)
		for j := range n {
			at := base + int64(j)*step + int64(p) // distinct arrival times
			t := at
			if maxJitter > 0 {
				t -= rng.Int64N(maxJitter + 1)
			}
			if rng.Float64() < lateP {
				t -= int64(1+rng.IntN(3)) * int64(time.Hour/time.Microsecond)
			}
			all = append(all, arrival{at: at, p: p, ev: propEvent{t: t / 1e6 * 1e6, key: fmt.Sprintf("k%d", rng.IntN(3)), value: rng.IntN(100)}})
		}
	}
	slices.SortFunc(all, func(a, b arrival) int { return int(a.at - b.at) })
	src := propSource{lateness: lateness, files: map[string][]propEvent{}}
	for i, a := range all {
		var name string
		switch layout {
		case 0: // round-robin: nFiles producers writing at once
			name = fmt.Sprintf("host%d.log", i%nFiles)
		case 1: // one file per producer
			name = fmt.Sprintf("producer%d.log", a.p)
		default: // rotated chunks: app.log.1 is the newest, sorted first
			name = fmt.Sprintf("app.log.%d", nFiles-i*nFiles/len(all))
		}
		src.files[name] = append(src.files[name], a.ev)
	}
	return src
}

func (e propEvent) line() string {
	return fmt.Sprintf(`{"event_time":%d,"k":%q,"v":%d}`, e.t/1e6, e.key, e.value)
}

// lateByOwnFile is the naive reference: whether the row at index i of its
// file is late relative to its own file's earlier events alone.
func lateByOwnFile(cfg engine.Config, evs []propEvent, i int, lateness int64) bool {
	var own int64
	has := false
	for _, e := range evs[:i] {
		if !has || e.t > own {
			own, has = e.t, true
		}
	}
	if !has {
		return false
	}
	w := own - lateness
	t := evs[i].t
	if cfg.LateRule == engine.LateEvent {
		return t < w
	}
	first := cfg.Window.Assign(nil, t)[0] // windows in ascending order: the first ends first
	return first.End <= w
}

type propRun struct {
	cfg     engine.Config
	maxRows int
	sources []propSource
}

func genPropRun(rng *rand.Rand, beyondBudget bool) propRun {
	budgets := []time.Duration{0, 10 * time.Second, time.Minute, 5 * time.Minute}
	size := time.Minute
	slide := time.Duration(0)
	if rng.IntN(3) == 0 {
		slide = 20 * time.Second
	}
	spec, _ := tidemark.NewWindowSpec(size, slide)
	run := propRun{cfg: engine.Config{Window: spec, LateRule: engine.LateRule(rng.IntN(2))}, maxRows: []int{1, 7, 50, 200, 1000}[rng.IntN(5)]}
	nSources := 1 + rng.IntN(2)
	run.cfg.Lateness = budgets[rng.IntN(len(budgets))]
	for s := range nSources {
		lateness := run.cfg.Lateness.Microseconds()
		if s > 0 && rng.IntN(2) == 0 {
			lateness = budgets[rng.IntN(len(budgets))].Microseconds()
		}
		jitter := lateness
		lateP := 0.0
		if beyondBudget {
			jitter = lateness + 20e6
			lateP = 0.05
		}
		run.sources = append(run.sources, genPropSource(rng, lateness, jitter, lateP))
	}
	return run
}

// writePropSources writes each source into a directory of base and
// returns the --source values.
func writePropSources(t *testing.T, base string, run *propRun, put func(name string, data []byte)) []string {
	var specs []string
	for i, src := range run.sources {
		dir := base + "/" + fmt.Sprintf("src%d", i) // a directory or an s3:// prefix
		for name, evs := range src.files {
			var b strings.Builder
			for _, e := range evs {
				b.WriteString(e.line() + "\n")
			}
			put(filepath.Join(fmt.Sprintf("src%d", i), name), []byte(b.String()))
		}
		specs = append(specs, dir)
	}
	return specs
}

// runProp runs the sources through the runner's own reading, frontier and
// engine steps, batch by batch, and drains. It returns every record with
// its status, the emitted windows and the watermark before the drain.
func runProp(t *testing.T, run propRun, specs []string, scfg ingest.SourceConfig) ([]tidemark.Record, []tidemark.Result, int64) {
	t.Helper()
	ctx := context.Background()
	cfg := run.cfg
	cfg.SourceLateness = map[string]time.Duration{}
	for i, s := range specs {
		cfg.SourceLateness[s] = time.Duration(run.sources[i].lateness) * time.Microsecond
	}
	eng, err := engine.New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	r := &runner{cfg: RunnerConfig{MaxBatchRows: run.maxRows}, engine: eng}
	for _, spec := range specs {
		src, err := ingest.Open(ctx, spec, scfg, ingest.Position{})
		if err != nil {
			t.Fatal(err)
		}
		defer src.Close()
		r.sources = append(r.sources, src)
	}
	now := time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC)
	var all []tidemark.Record
	var out []tidemark.Result
	for range 100000 {
		recs, err := r.read(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		if len(recs) == 0 {
			if r.exhausted() {
				break
			}
			continue
		}
		end, err := marshalPositions(r.sources)
		if err != nil {
			t.Fatal(err)
		}
		decoded, err := r.disorder.decode(end, "end")
		if err != nil {
			t.Fatal(err)
		}
		r.setFrontiers(decoded)
		res := eng.Process(recs, now)
		all = append(all, recs...)
		out = append(out, res.Emitted...)
	}
	w := eng.State().Watermark
	out = append(out, eng.Drain().Emitted...)
	return all, out, w
}

type propWin struct {
	start int64
	key   tidemark.Key
}

// checkProp checks a run's records and windows against the reference.
func checkProp(t *testing.T, run propRun, specs []string, recs []tidemark.Record, wins []tidemark.Result, w int64, beyond bool) {
	t.Helper()
	fileOf := map[string]int{}
	for i, s := range specs {
		fileOf[s] = i
	}
	seen := map[string]bool{}
	total := 0
	for _, src := range run.sources {
		for _, evs := range src.files {
			total += len(evs)
		}
	}
	if len(recs) != total {
		t.Fatalf("read %d records, the files hold %d", len(recs), total)
	}
	index := map[string]map[string][]int64{} // source -> file -> offsets of its lines
	for i, src := range run.sources {
		index[specs[i]] = map[string][]int64{}
		for name, evs := range src.files {
			off := int64(0)
			for _, e := range evs {
				index[specs[i]][name] = append(index[specs[i]][name], off)
				off += int64(len(e.line()) + 1)
			}
		}
	}
	exact := map[propWin]tidemark.Agg{}
	for _, r := range recs {
		id := fmt.Sprintf("%s/%s@%d", r.Source, r.File, r.Offset)
		if seen[id] {
			t.Fatalf("line %s read twice", id)
		}
		seen[id] = true
		if !r.Valid() {
			t.Fatalf("line %s quarantined: %s", id, r.Err)
		}
		si := fileOf[r.Source]
		evs := run.sources[si].files[r.File]
		i, ok := slices.BinarySearch(index[r.Source][r.File], r.Offset)
		if !ok {
			t.Fatalf("line %s is not at a line start", id)
		}
		if r.EventTime != evs[i].t {
			t.Fatalf("line %s: event time %d, want %d", id, r.EventTime, evs[i].t)
		}
		allowed := lateByOwnFile(run.cfg, evs, i, run.sources[si].lateness)
		if r.Status == tidemark.StatusLate && !allowed {
			t.Fatalf("line %s (%s, %s budget %s) is late but not late relative to its own file's events",
				id, tidemark.FormatTime(r.EventTime), run.cfg.LateRule, time.Duration(run.sources[si].lateness)*time.Microsecond)
		}
		if !beyond && allowed {
			t.Fatalf("generator: line %s exceeds its budget", id)
		}
		if r.Status == tidemark.StatusLate {
			continue
		}
		for _, win := range run.cfg.Window.Assign(nil, r.EventTime) {
			a := exact[propWin{win.Start, r.Key}]
			a.Add(r.Value, r.HasValue)
			exact[propWin{win.Start, r.Key}] = a
		}
	}
	// Liveness: with everything read, nothing holds the watermark back.
	want := tidemark.MaxTime
	for i, src := range run.sources {
		m := tidemark.MinTime
		for _, evs := range src.files {
			for _, e := range evs {
				m = max(m, e.t)
			}
		}
		want = min(want, m-run.sources[i].lateness)
	}
	if w != want {
		t.Fatalf("watermark after the last batch: %s, want %s", tidemark.FormatTime(w), tidemark.FormatTime(want))
	}
	if beyond && run.cfg.LateRule == engine.LateWindow && run.cfg.Window.Slide != run.cfg.Window.Size {
		return // a late row still counts in its open sliding windows: no simple exact windows
	}
	got := map[propWin]tidemark.Agg{}
	for _, res := range wins {
		k := propWin{res.Window.Start, res.Key}
		if _, dup := got[k]; dup {
			t.Fatalf("window %s %s emitted twice", tidemark.FormatTime(k.start), k.key)
		}
		got[k] = res.Agg
	}
	if len(got) != len(exact) {
		t.Fatalf("%d windows, want %d", len(got), len(exact))
	}
	for k, a := range exact {
		if g := got[k]; g.Count != a.Count || g.Total() != a.Total() {
			t.Fatalf("window %s %s: count %d sum %v, want %d %v", tidemark.FormatTime(k.start), k.key, g.Count, g.Total(), a.Count, a.Total())
		}
	}
}

func propOnce(t *testing.T, seed uint64, beyond bool, s3 *propS3) {
	rng := rand.New(rand.NewPCG(seed, 10))
	run := genPropRun(rng, beyond)
	base := t.TempDir()
	scfg := ingest.SourceConfig{
		DecoderConfig: ingest.DecoderConfig{Keys: []string{"k"}, ValueField: "v", MaxFuture: -1},
		Clock:         func() time.Time { return time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC) },
		Once:          true,
		PollOnly:      true,
	}
	put := func(name string, data []byte) {
		p := filepath.Join(base, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if s3 != nil {
		put = s3.put(t, seed)
		base = s3.base(seed)
		scfg.S3 = store.S3Config{Endpoint: s3.srv.Endpoint}
	}
	specs := writePropSources(t, base, &run, put)
	recs, wins, w := runProp(t, run, specs, scfg)
	checkProp(t, run, specs, recs, wins, w, beyond)
}

func TestAlignedInputMatchesReference(t *testing.T) {
	for seed := range uint64(60) {
		beyond := seed%2 == 1
		t.Run(fmt.Sprintf("seed%d_beyond%v", seed, beyond), func(t *testing.T) {
			propOnce(t, seed, beyond, nil)
		})
	}
}

// propS3 puts the generated files as objects of one bucket of a real
// S3-compatible server, one prefix per run and source.
type propS3 struct {
	srv    *storetest.Server
	st     *store.S3
	bucket string
}

func (p *propS3) base(seed uint64) string {
	return fmt.Sprintf("s3://%s/in/run%d", p.bucket, seed)
}

func (p *propS3) put(t *testing.T, seed uint64) func(name string, data []byte) {
	return func(name string, data []byte) {
		key := fmt.Sprintf("run%d/%s", seed, filepath.ToSlash(name))
		if err := p.st.Put(context.Background(), key, bytes.NewReader(data), int64(len(data))); err != nil {
			t.Fatal(err)
		}
	}
}

func TestAlignedS3MatchesReference(t *testing.T) {
	srv := storetest.StartVersity(t)
	t.Setenv("AWS_ACCESS_KEY_ID", srv.AccessKey)
	t.Setenv("AWS_SECRET_ACCESS_KEY", srv.SecretKey)
	t.Setenv("AWS_REGION", srv.Region)
	bucket := srv.Bucket(t)
	st, err := store.OpenS3(t.Context(), bucket, "in", store.S3Config{Endpoint: srv.Endpoint})
	if err != nil {
		t.Fatal(err)
	}
	p := &propS3{srv: srv, st: st, bucket: bucket}
	for seed := range uint64(12) {
		beyond := seed%2 == 1
		t.Run(fmt.Sprintf("seed%d_beyond%v", seed, beyond), func(t *testing.T) {
			propOnce(t, seed, beyond, p)
		})
	}
}
