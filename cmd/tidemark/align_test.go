package main

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"tidemark"
	"tidemark/stream"
	"tidemark/stream/engine"
)

// The flags of issue 10 refuse bad values with one clear line.
func TestAlignFlagErrors(t *testing.T) {
	tests := []struct {
		flags []string
		want  string
	}{
		{[]string{"--source-lateness", "testdata/example"}, "want SOURCE=DURATION"},
		{[]string{"--source-lateness", "testdata/example=soon"}, `"soon" is not a duration`},
		{[]string{"--source-lateness", "testdata/example=-1m"}, `"-1m" is not a duration`},
		{[]string{"--source-lateness", "logs/mobile=30m"}, `"logs/mobile" is not one of the --source values`},
		{[]string{"--source-lateness", "testdata/example=1m", "--source-lateness", "testdata/example=2m"}, "given twice"},
		{[]string{"--min-event-time", "last year"}, "--min-event-time"},
	}
	for _, tc := range tests {
		args := append([]string{"stream", "--source", "testdata/example", "--once", "--window", "1m", "--lake", t.TempDir()}, tc.flags...)
		stdout, stderr, code := run(t, args...)
		if code == 0 {
			t.Fatalf("%v: exit 0, want an error; stdout:\n%s", tc.flags, stdout)
		}
		if !strings.Contains(stderr, tc.want) || len(lines(stderr)) != 1 {
			t.Errorf("%v: stderr %q, want one line with %q", tc.flags, stderr, tc.want)
		}
	}
}

// writeLines writes NDJSON events (minute offsets from 10:00) to a file.
func writeEvents(t *testing.T, path string, minutes ...int) {
	t.Helper()
	var b strings.Builder
	base := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	for _, m := range minutes {
		fmt.Fprintf(&b, `{"event_time":%q,"page":"/a"}`+"\n", base.Add(time.Duration(m)*time.Minute).Format(time.RFC3339))
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
}

// A slow source gets a budget of its own (seed 001 §3.2): with
// --lateness 1m the mobile events 20 minutes out of order are late; with
// --source-lateness mobile=30m (or TIDEMARK_SOURCE_LATENESS) none is,
// while the web source keeps its 1m.
func TestPerSourceLateness(t *testing.T) {
	dir := t.TempDir()
	web, mobile := filepath.Join(dir, "web"), filepath.Join(dir, "mobile")
	var webMin []int
	for m := range 60 {
		webMin = append(webMin, 30+m)
	}
	writeEvents(t, filepath.Join(web, "web.log"), webMin...)
	writeEvents(t, filepath.Join(mobile, "mobile.log"), 30, 31, 10, 32, 12, 59, 40)
	base := []string{"stream", "--source", web, "--source", mobile, "--key", "page", "--window", "1m", "--lateness", "1m",
		"--max-batch-rows", "2", "--once", "--drain"}
	tests := []struct {
		name  string
		flags []string
		env   []string
		late  string
	}{
		{"one budget", nil, nil, "late 2 "},
		{"flag", []string{"--source-lateness", mobile + "=30m"}, nil, "late 0 "},
		{"environment", nil, []string{"TIDEMARK_SOURCE_LATENESS=" + mobile + "=30m"}, "late 0 "},
	}
	for _, tc := range tests {
		args := append(append(append([]string{}, base...), tc.flags...), "--lake", t.TempDir())
		_, stderr, code := runEnv(t, tc.env, args...)
		if code != 0 {
			t.Fatalf("%s: exit %d: %s", tc.name, code, stderr)
		}
		if acc := lastLine(stderr); !strings.Contains(acc, "lines read 67 = ok") || !strings.Contains(acc, tc.late) {
			t.Errorf("%s: accounting %q, want %q", tc.name, acc, tc.late)
		}
	}
}

// The time floor quarantines as too_old, blank lines are counted as blank
// (not malformed), and SQL-style times with a space are events.
func TestFloorBlankAndSpaceTimes(t *testing.T) {
	dir := t.TempDir()
	data := `{"event_time":"2026-03-01 10:00:00","page":"/a"}` + "\n" +
		`{"event_time":"0001-01-01T00:00:00Z","page":"/a"}` + "\n" +
		"\n" +
		`{"event_time":"2026-03-01 10:00:30.5","page":"/a"}` + "\n" +
		"  \r\n" +
		`{"event_time":"2019-12-31T23:59:59Z","page":"/a"}` + "\n\n"
	if err := os.WriteFile(filepath.Join(dir, "app.log"), []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
	stdout, stderr, code := run(t, "stream", "--source", dir, "--key", "page", "--window", "1m", "--once", "--drain", "--print",
		"--min-event-time", "2020-01-01", "--lake", t.TempDir())
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	want := "lines read 7 = ok 2 + late 0 + quarantined 5 (too_old 2, blank 3)"
	if acc := lastLine(stderr); !strings.HasPrefix(acc, want) {
		t.Errorf("accounting %q, want %q", acc, want)
	}
	if !strings.Contains(stdout, `"window_start":"2026-03-01T10:00:00Z","window_end":"2026-03-01T10:01:00Z","page":"/a","count":2`) {
		t.Errorf("windows:\n%s", stdout)
	}
}

// FuzzSourceLateness: the --source-lateness parser never panics, and what
// it accepts names a --source and a budget that prints back the same.
func FuzzSourceLateness(f *testing.F) {
	for _, s := range []string{"logs/mobile=30m", "a=b=1s", "=1m", "logs/mobile=", "s3://b/p=0s", "logs/mobile=-1s"} {
		f.Add(s)
	}
	sources := []string{"logs/mobile", "a=b", "s3://b/p"}
	f.Fuzz(func(t *testing.T, v string) {
		got, err := sourceLateness([]string{v})
		if err != nil {
			return
		}
		// Run refuses a SOURCE that is not a --source.
		cfg := stream.RunnerConfig{Sources: sources, Engine: engine.Config{Window: tidemark.WindowSpec{Size: 1}, SourceLateness: got}}
		if err := cfg.Validate(); err != nil {
			for name := range got {
				if slices.Contains(sources, name) {
					t.Fatalf("%q: a --source refused: %v", v, err)
				}
			}
			return
		}
		if len(got) != 1 {
			t.Fatalf("%q: got %v", v, got)
		}
		for name, budget := range got {
			d, perr := time.ParseDuration(v[len(name)+1:])
			if !strings.HasPrefix(v, name+"=") || perr != nil || d != budget || budget < 0 || !slices.Contains(sources, name) {
				t.Fatalf("%q: parsed as %s = %s", v, name, budget)
			}
		}
	})
}
