package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"tidemark/batch/lateness"
)

func TestParseBy(t *testing.T) {
	for _, c := range []struct {
		in     []string
		by     string
		period time.Duration
		err    string
	}{
		{nil, "none", 0, ""},
		{[]string{"none"}, "none", 0, ""},
		{[]string{"source"}, "source", 0, ""},
		{[]string{"hour"}, "none", lateness.PeriodHour, ""},
		{[]string{"source", "day"}, "source", lateness.PeriodDay, ""},
		{[]string{"day", "page"}, "page", lateness.PeriodDay, ""},
		{[]string{"hour", "day"}, "", 0, "one of hour and day"},
		{[]string{"source", "page"}, "", 0, "one grouping"},
		{[]string{"key:hour", "day"}, "key:hour", lateness.PeriodDay, ""},
		{[]string{"key:none"}, "key:none", 0, ""},
		{[]string{"key:"}, "", 0, "name the key field"},
	} {
		by, period, err := parseBy(c.in)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%v: got %v, want an error with %q", c.in, err, c.err)
			}
			continue
		}
		if err != nil || by != c.by || period != c.period {
			t.Errorf("%v: got %s %s %v, want %s %s", c.in, by, period, err, c.by, c.period)
		}
	}
}

// TestLatenessEpochZero is the report on the built binary: 10,000
// normal rows and 200 from a client sending epoch zero made `tidemark
// lateness` recommend --lateness 20395d. Now the 200 are named as bad
// timestamps, the recommendation is that of the normal rows, and the report
// points to the time floor.
func TestLatenessEpochZero(t *testing.T) {
	src, lakeDir := t.TempDir(), t.TempDir()
	var b strings.Builder
	base := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	for i := range 10_200 {
		arrival := base.Add(time.Duration(i) * time.Second)
		ev := arrival.Add(-time.Duration(i*37%11) * time.Second) // disorder up to 10s
		if i%51 == 50 {
			ev = time.Unix(0, 0)
		}
		fmt.Fprintf(&b, `{"event_time":%q,"arrival_time":%q,"page":"/a"}`+"\n", ev.UTC().Format(time.RFC3339), arrival.Format(time.RFC3339))
	}
	if err := os.WriteFile(filepath.Join(src, "events.ndjson"), []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, stderr, code := run(t, "stream", "--source", src, "--key", "page", "--arrival-field", "arrival_time", "--window", "1m",
		"--lateness", "10s", "--max-batch-rows", "500", "--once", "--lake", lakeDir); code != 0 {
		t.Fatalf("stream: exit %d\n%s", code, stderr)
	}
	out, stderr, code := run(t, "lateness", "--lake", lakeDir, "--format", "json")
	if code != 0 {
		t.Fatalf("lateness: exit %d\n%s", code, stderr)
	}
	var rep struct {
		Groups []struct {
			Rows        int64   `json:"rows"`
			Recommended float64 `json:"recommended_lateness_s"`
			Bad         struct {
				Rows  int64  `json:"rows"`
				Past  int64  `json:"past"`
				Floor string `json:"suggested_min_event_time"`
			} `json:"bad_timestamps"`
		} `json:"groups"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil || len(rep.Groups) != 1 {
		t.Fatalf("lateness json: %v\n%s", err, out)
	}
	g := rep.Groups[0]
	if g.Rows != 10_000 || g.Bad.Rows != 200 || g.Bad.Past != 200 || g.Bad.Floor != "2026-03-01T00:00:00Z" {
		t.Errorf("got %d rows measured, bad timestamps %+v; want 10,000 and 200 in the past, floor 2026-03-01", g.Rows, g.Bad)
	}
	if g.Recommended <= 0 || g.Recommended > 15 {
		t.Errorf("recommended --lateness %vs, want the normal rows' disorder p99 (at most 10s) rounded up", g.Recommended)
	}
	table, _, _ := run(t, "lateness", "--lake", lakeDir)
	for _, want := range []string{"bad timestamps: 200 rows", "--min-event-time 2026-03-01T00:00:00Z", "--max-future", fmt.Sprintf("recommended --lateness %s ", lateness.FormatDuration(g.Recommended))} {
		if !strings.Contains(table, want) {
			t.Errorf("report lacks %q:\n%s", want, table)
		}
	}
}

// FuzzParseBy: any --by values give an error or a grouping and a period
// that are each one of the allowed kinds.
func FuzzParseBy(f *testing.F) {
	f.Add("source", "hour")
	f.Add("day", "page")
	f.Add("hour", "day")
	f.Add("", "none")
	f.Fuzz(func(t *testing.T, a, b string) {
		by, period, err := parseBy([]string{a, b})
		if err != nil {
			return
		}
		if period != 0 && period != lateness.PeriodHour && period != lateness.PeriodDay {
			t.Fatalf("%q %q: period %s", a, b, period)
		}
		if by == "hour" || by == "day" || by == "" {
			t.Fatalf("%q %q: grouping %q", a, b, by)
		}
	})
}

// A lake keyed by a field named source: on the binary, `lateness --by
// source` groups by that key (the lake's column named source) and
// `--by _tm_source` by tidemark's own source column, which that lake
// stores under that name; the --by help names both.
func TestLatenessByWhenAKeyIsNamedSource(t *testing.T) {
	needBinary(t)
	dir := t.TempDir()
	var b strings.Builder
	for i := range 90 {
		at := time.Date(2026, 1, 1, 10, 0, i, 0, time.UTC).Format(time.RFC3339)
		fmt.Fprintf(&b, `{"event_time":%q,"arrival_time":%q,"source":"app%d"}`+"\n", at, at, i%3)
	}
	src := filepath.Join(dir, "logs")
	writeWorld(t, filepath.Join(src, "a.ndjson"), b.String())
	lakeDir := filepath.Join(dir, "lake")
	if _, stderr, code := run(t, "stream", "--source", src, "--lake", lakeDir, "--key", "source", "--window", "1m",
		"--arrival-field", "arrival_time", "--once", "--progress", os.DevNull); code != 0 {
		t.Fatalf("stream: exit %d\n%s", code, stderr)
	}
	groups := func(by string) string {
		out, stderr, code := run(t, "lateness", "--lake", lakeDir, "--by", by, "--format", "csv")
		if code != 0 {
			t.Fatalf("lateness --by %s: exit %d\n%s", by, code, stderr)
		}
		var g []string
		for _, l := range lines(out)[1:] {
			f := strings.Split(l, ",")
			g = append(g, f[0]+"="+f[1])
		}
		return strings.Join(g, " ")
	}
	if got, want := groups("source"), "app0=30 app1=30 app2=30"; got != want {
		t.Errorf("--by source: got %q, want the key's groups %q", got, want)
	}
	if got, want := groups("_tm_source"), src+"=90"; got != want {
		t.Errorf("--by _tm_source: got %q, want tidemark's source %q", got, want)
	}
	if _, stderr, code := run(t, "lateness", "--lake", lakeDir, "--by", "host"); code == 0 || !strings.Contains(stderr, "tidemark's source column is _tm_source") {
		t.Errorf("--by host: exit %d\n%s", code, stderr)
	}
}
