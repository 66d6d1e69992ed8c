package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"testing"
	"time"
	"unicode/utf8"
)

func generate(t *testing.T, cfg Config) (*Summary, string) {
	t.Helper()
	cfg.Out = t.TempDir()
	sum, err := Generate(cfg)
	if err != nil {
		t.Fatalf("Generate: %v", err)
	}
	return sum, cfg.Out
}

// readTree returns every file under dir, by relative path.
func readTree(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	files := map[string][]byte{}
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		rel, _ := filepath.Rel(dir, p)
		files[rel] = b
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

func TestDeterministic(t *testing.T) {
	for _, format := range []string{"ndjson", "csv"} {
		t.Run(format, func(t *testing.T) {
			cfg := Config{Events: 5000, Seed: 7, Files: 3, Format: format, Sources: []string{"a", "b"}, BadFrac: 0.05, FutureFrac: 0.01, LateFrac: 0.03}
			_, d1 := generate(t, cfg)
			_, d2 := generate(t, cfg)
			a, b := readTree(t, d1), readTree(t, d2)
			if len(a) != 6 {
				t.Errorf("got %d files, want 6", len(a))
			}
			for name, data := range a {
				if !bytes.Equal(data, b[name]) {
					t.Errorf("%s differs between two runs with the same seed", name)
				}
			}
			cfg.Seed = 8
			_, d3 := generate(t, cfg)
			if c := readTree(t, d3); bytes.Equal(c["a/events-00000."+format], a["a/events-00000."+format]) {
				t.Errorf("seed 8 wrote the same bytes as seed 7")
			}
		})
	}
}

type line struct {
	EventTime   *string `json:"event_time"`
	ArrivalTime string  `json:"arrival_time"`
	Page        string  `json:"page"`
	Client      string  `json:"client"`
	Value       any     `json:"value"`
}

// classify reads one NDJSON line as tidemark would and names its
// quarantine reason ("" for a valid event).
func classify(t *testing.T, raw []byte) (string, line) {
	var l line
	if !utf8.Valid(raw) {
		return "bad_utf8", l
	}
	if err := json.Unmarshal(raw, &l); err != nil {
		return "malformed", l
	}
	if l.EventTime == nil {
		return "missing_time", l
	}
	et, err := time.Parse(time.RFC3339Nano, *l.EventTime)
	if err != nil {
		return "bad_time", l
	}
	if _, ok := l.Value.(string); ok {
		return "bad_value", l
	}
	at, err := time.Parse(time.RFC3339Nano, l.ArrivalTime)
	if err != nil {
		t.Fatalf("arrival_time %q: %v", l.ArrivalTime, err)
	}
	if et.Sub(at) > time.Hour {
		return "future_time", l
	}
	return "", l
}

func TestProportions(t *testing.T) {
	const n = 40000
	cfg := Config{Events: n, Seed: 3, Files: 4, Keys: 500, BadFrac: 0.02, FutureFrac: 0.01, LateFrac: 0.03, NullValueFrac: 0.01}
	sum, dir := generate(t, cfg)

	names, _ := filepath.Glob(filepath.Join(dir, "*.ndjson"))
	if !slices.Equal(names, sum.Files) || len(names) != 4 {
		t.Fatalf("got files %v, want the summary's %v (4, sorted)", names, sum.Files)
	}
	got := map[string]int{}
	pages := map[string]int{}
	var lags []float64
	var lastArrival string
	lines, late := 0, 0
	for _, name := range names {
		f, err := os.Open(name)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			lines++
			reason, l := classify(t, sc.Bytes())
			got[reason]++
			if reason == "malformed" || reason == "bad_utf8" {
				continue
			}
			// Lexical file order and line order are arrival order.
			if l.ArrivalTime < lastArrival {
				t.Fatalf("%s: arrival %s after %s", name, l.ArrivalTime, lastArrival)
			}
			lastArrival = l.ArrivalTime
			if reason != "" {
				continue
			}
			pages[l.Page]++
			et, _ := time.Parse(time.RFC3339Nano, *l.EventTime)
			at, _ := time.Parse(time.RFC3339Nano, l.ArrivalTime)
			lag := at.Sub(et)
			if lag >= time.Hour {
				late++
				if l.Client == "web" || lag > 6*time.Hour {
					t.Errorf("hours-late event from %s with lag %v, want a mobile client, lag <= 6h", l.Client, lag)
				}
			} else {
				lags = append(lags, lag.Seconds())
			}
		}
		f.Close()
	}
	if lines != n || sum.Lines != n {
		t.Errorf("got %d lines (summary %d), want %d", lines, sum.Lines, n)
	}
	for reason, want := range sum.Bad {
		if got[reason] != want {
			t.Errorf("%s: got %d lines, summary says %d", reason, got[reason], want)
		}
	}
	if got[""] != sum.Valid {
		t.Errorf("valid: got %d, summary says %d", got[""], sum.Valid)
	}
	within := func(name string, got int, frac float64) {
		want := frac * n
		if math.Abs(float64(got)-want) > 4*math.Sqrt(want)+1 {
			t.Errorf("%s: got %d, want about %.0f", name, got, want)
		}
	}
	for _, k := range badKinds {
		within(k.reason(), got[k.reason()], cfg.BadFrac/float64(len(badKinds)))
	}
	within("future_time", got["future_time"], cfg.FutureFrac)
	within("late", late, cfg.LateFrac)
	within("null values", sum.NullValue, cfg.NullValueFrac*(1-cfg.BadFrac-cfg.FutureFrac))

	sort.Float64s(lags)
	if med := lags[len(lags)/2]; med < 1.8 || med > 2.2 {
		t.Errorf("median lag: got %.2fs, want about 2s", med)
	}
	// Zipf: /p/0 is the most popular page, by far.
	counts := make([]int, 0, len(pages))
	for _, c := range pages {
		counts = append(counts, c)
	}
	slices.Sort(counts)
	if top := counts[len(counts)-1]; pages["/p/0"] != top || top < 5*counts[len(counts)/2] {
		t.Errorf("/p/0 count %d, top %d, median %d: want /p/0 on top, >= 5x the median", pages["/p/0"], top, counts[len(counts)/2])
	}
	if len(pages) > cfg.Keys {
		t.Errorf("got %d distinct pages, want <= %d", len(pages), cfg.Keys)
	}
}

func TestCSVHeaderAndArity(t *testing.T) {
	sum, _ := generate(t, Config{Events: 3000, Seed: 1, Files: 2, Format: "csv", BadFrac: 0.05})
	malformed := 0
	for _, name := range sum.Files {
		b, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		rows := bytes.Split(bytes.TrimSuffix(b, []byte("\n")), []byte("\n"))
		if string(rows[0])+"\n" != csvHeader {
			t.Errorf("%s: first line %q, want the header", name, rows[0])
		}
		for _, r := range rows[1:] {
			if bytes.Count(r, []byte(",")) != 7 {
				malformed++
			}
		}
	}
	if malformed != sum.Bad["malformed"] || malformed == 0 {
		t.Errorf("got %d rows of wrong arity, want %d (> 0)", malformed, sum.Bad["malformed"])
	}
}

func TestConfigErrors(t *testing.T) {
	for _, cfg := range []Config{
		{Events: 1},                          // no Out
		{Events: 1, Out: "x", Format: "xml"}, // bad format
		{Events: 1, Out: "x", BadFrac: 0.6, LateFrac: 0.6}, // fractions over 1
		{Events: 1, Out: "x", Sources: []string{"../up"}},  // escapes Out
	} {
		if _, err := cfg.withDefaults(); err == nil {
			t.Errorf("%+v: got no error, want one", cfg)
		}
	}
}
