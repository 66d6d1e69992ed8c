package stream

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"tidemark"
	"tidemark/ingest"
	"tidemark/stream/engine"
)

// genEvent is one generated input line and the producer that wrote it.
type genEvent struct {
	producer int
	line     string
}

// genBacklog generates n events of two producers (web, mobile) as they
// arrive: 10 per second, each with a lag of 0-4 s, and with hoursLate of the
// mobile events hours late (mobile apps offline). Lines are in arrival
// order, as a log shipper writes them.
func genBacklog(seed uint64, n int, hoursLate float64) []genEvent {
	rng := rand.New(rand.NewPCG(seed, 1))
	base := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	out := make([]genEvent, n)
	for i := range out {
		arrival := base.Add(time.Duration(i) * 100 * time.Millisecond)
		p := 0
		if rng.IntN(3) == 0 {
			p = 1
		}
		lag := time.Duration(rng.Int64N(int64(4 * time.Second)))
		if p == 1 && rng.Float64() < hoursLate {
			lag = time.Duration(1+rng.IntN(3)) * time.Hour
		}
		et := arrival.Add(-lag)
		out[i] = genEvent{producer: p, line: fmt.Sprintf(`{"event_time":%q,"page":"/p%d","value":%d}`, et.Format(time.RFC3339Nano), rng.IntN(5), rng.IntN(100))}
	}
	return out
}

// layoutBacklog writes events into dir as one of the layouts of issue 10.
func layoutBacklog(t testing.TB, dir, layout string, evs []genEvent) {
	t.Helper()
	files := map[string]*strings.Builder{}
	add := func(name, line string) {
		b := files[name]
		if b == nil {
			b = &strings.Builder{}
			files[name] = b
		}
		b.WriteString(line + "\n")
	}
	for i, e := range evs {
		switch layout {
		case "one":
			add("app.log", e.line)
		case "round-robin":
			add(fmt.Sprintf("host%d.log", i%4), e.line)
		case "per-producer":
			add([]string{"web.log", "mobile.log"}[e.producer], e.line)
		case "rotated":
			add(fmt.Sprintf("app.log.%d", 4-i*4/len(evs)), e.line) // .4 is the oldest
		default:
			t.Fatalf("unknown layout %q", layout)
		}
	}
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// runBacklog runs `stream --once --drain` over dir and returns the summary
// and the printed windows, sorted.
func runBacklog(t testing.TB, dir string, maxRows int, lateness time.Duration) (*Summary, []string) {
	t.Helper()
	spec, err := tidemark.NewWindowSpec(time.Minute, 0)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	cfg := RunnerConfig{
		Sources:      []string{dir},
		Decoder:      ingest.DecoderConfig{Keys: []string{"page"}, ValueField: "value", MaxFuture: -1},
		Engine:       engine.Config{Window: spec, Lateness: lateness},
		Lake:         t.TempDir(),
		MaxBatchRows: maxRows,
		Once:         true,
		Drain:        true,
		Print:        &out,
	}
	sum, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	slices.Sort(lines)
	return sum, lines
}

// Issue 10's table: the same backlog in one file, in four files written
// round-robin, in one file per producer and in rotated chunks gives the
// same late rows and the same windows.
func TestBacklogLayoutsAgree(t *testing.T) {
	for _, hoursLate := range []float64{0, 0.03} {
		evs := genBacklog(7, 12000, hoursLate)
		oneDir := t.TempDir()
		layoutBacklog(t, oneDir, "one", evs)
		oneSum, oneWins := runBacklog(t, oneDir, 1000, 5*time.Minute)
		if hoursLate == 0 && oneSum.Late != 0 {
			t.Fatalf("one file, no late producer: %d late rows", oneSum.Late)
		}
		for _, layout := range []string{"round-robin", "per-producer", "rotated"} {
			dir := t.TempDir()
			layoutBacklog(t, dir, layout, evs)
			sum, wins := runBacklog(t, dir, 1000, 5*time.Minute)
			if sum.Lines != int64(len(evs)) {
				t.Errorf("%s: read %d lines, want %d", layout, sum.Lines, len(evs))
			}
			if sum.Late != oneSum.Late {
				t.Errorf("%s, %.0f%% hours late: %d late rows, one file: %d", layout, hoursLate*100, sum.Late, oneSum.Late)
			}
			if hoursLate == 0 && !slices.Equal(wins, oneWins) {
				t.Errorf("%s: windows differ from one file's (%d vs %d)", layout, len(wins), len(oneWins))
			}
		}
	}
}

// SetFrontier caps a source's watermark at the event time of its lagging
// input, lets a source with unread data hold W before its first event,
// and is lifted by held=false; SourceLateness gives a source its own
// budget.
func TestEngineFrontierAndSourceLateness(t *testing.T) {
	spec, _ := tidemark.NewWindowSpec(time.Minute, 0)
	min := func(m int) int64 { return time.Date(2026, 3, 1, 10, m, 0, 0, time.UTC).UnixMicro() }
	rec := func(src string, m int) tidemark.Record {
		return tidemark.Record{Source: src, EventTime: min(m)}
	}
	e, err := engine.New(engine.Config{Window: spec, Lateness: time.Minute, SourceLateness: map[string]time.Duration{"slow": 10 * time.Minute}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC)
	steps := []struct {
		recs     []tidemark.Record
		frontier map[string]*int64 // nil value: released
		want     int64
	}{
		// "other" has unread data and no event yet: it holds W where it is (none).
		{[]tidemark.Record{rec("fast", 30)}, map[string]*int64{"other": ptr(tidemark.MinTime)}, tidemark.MinTime},
		// fast's lagging file is at 10:20: W = 10:19, not 10:39.
		{[]tidemark.Record{rec("fast", 40)}, map[string]*int64{"fast": ptr(min(20)), "other": nil}, min(19)},
		// released: fast's own max rules.
		{nil, map[string]*int64{"fast": nil}, min(39)},
		// the slow source's own budget (10m) holds W at 10:40 - 10m.
		{[]tidemark.Record{rec("slow", 40), rec("fast", 50)}, nil, min(39)},
		{[]tidemark.Record{rec("slow", 55)}, nil, min(45)},
	}
	for i, st := range steps {
		for name, f := range st.frontier {
			if f == nil {
				e.SetFrontier(name, 0, false)
			} else {
				e.SetFrontier(name, *f, true)
			}
		}
		res := e.Process(st.recs, now)
		got := res.Watermark
		if !res.HasWatermark {
			got = tidemark.MinTime
		}
		if got != st.want {
			t.Errorf("step %d: W %s, want %s", i, tidemark.FormatTime(got), tidemark.FormatTime(st.want))
		}
	}
	if _, err := engine.New(engine.Config{Window: spec, SourceLateness: map[string]time.Duration{"x": -time.Microsecond}}, nil); err == nil {
		t.Error("negative source lateness accepted")
	}
}

func ptr(v int64) *int64 { return &v }

// A live stream with two files of one source: a file read to its end holds
// the watermark at its newest event, so windows the other file's events
// pass stay open; once it has had no line for --idle-timeout (on the
// runner's injected clock), the other file's next batch closes them.
func TestLiveIdleFileReleasesWatermark(t *testing.T) {
	dir, lakeDir := t.TempDir(), t.TempDir()
	cfg := runnerConfig(t, dir, lakeDir)
	cfg.Engine.IdleTimeout = time.Minute
	var mu sync.Mutex
	now := time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC)
	cfg.Clock = func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		return now
	}
	advance := func(d time.Duration) {
		mu.Lock()
		now = now.Add(d)
		mu.Unlock()
	}
	p, w := newPrinted(t)
	cfg.Print = w
	prog, pw := newPrinted(t)
	cfg.Progress = pw
	a, b := filepath.Join(dir, "a.ndjson"), filepath.Join(dir, "b.ndjson")
	appendLine(t, a, `{"event_time":"2026-01-01T00:00:00.5Z","page":"/a","value":1}`)
	appendLine(t, b, `{"event_time":"2026-01-01T00:00:00.7Z","page":"/b","value":1}`)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := Run(ctx, cfg)
		done <- err
	}()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("stop: %v", err)
		}
	}()
	// b runs ahead; a holds W at 00:00.5, so no window closes.
	for s := 1; s <= 5; s++ {
		appendLine(t, b, fmt.Sprintf(`{"event_time":"2026-01-01T00:00:0%d.5Z","page":"/b","value":1}`, s))
	}
	for rows := 0; rows < 7; {
		select {
		case line := <-prog.lines:
			var pl struct {
				Rows    int `json:"num_input_rows"`
				Emitted int `json:"windows_emitted"`
			}
			if err := json.Unmarshal([]byte(line), &pl); err != nil {
				t.Fatal(err)
			}
			if pl.Emitted != 0 {
				t.Fatalf("a window closed while a.ndjson held the watermark: %s", line)
			}
			rows += pl.Rows
		case err := <-done:
			t.Fatalf("stream ended: %v", err)
		case <-time.After(30 * time.Second):
			t.Fatal("the 7 lines were not processed within 30 s")
		}
	}
	// a.ndjson silent for 61 s of the stream's clock: b's next line closes
	// the windows up to b's watermark.
	advance(61 * time.Second)
	appendLine(t, b, `{"event_time":"2026-01-01T00:00:06.5Z","page":"/b","value":1}`)
	select {
	case line := <-p.lines:
		if !strings.Contains(line, `"window_start":"2026-01-01T00:00:00Z"`) || !strings.Contains(line, `"count":1`) {
			t.Errorf("first window: %s", line)
		}
	case err := <-done:
		t.Fatalf("stream ended: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("no window within 30 s after a.ndjson went idle")
	}
}
