package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// mistakeInput writes an app's access log as people have them into a new
// directory: ts with milliseconds and an offset (or epoch numbers), path,
// status, latency_ms, user, nested request fields.
func mistakeInput(t *testing.T, name string, n int, line func(i int) string) string {
	t.Helper()
	dir := t.TempDir()
	var b strings.Builder
	for i := range n {
		b.WriteString(line(i))
		b.WriteByte('\n')
	}
	if err := os.WriteFile(filepath.Join(dir, name), []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

func accessLine(ts func(int) any) func(i int) string {
	return func(i int) string {
		return fmt.Sprintf(`{"ts":%s,"path":"/p%d","status":%d,"latency_ms":%d.5,"user":"u%d","request":{"method":"GET"}}`,
			mustJSON(ts(i)), i%3, 200+i%2*300, i, i%4)
	}
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// tablesIn lists the Delta tables (directories with a _delta_log) a lake
// directory holds.
func tablesIn(t *testing.T, lake string) []string {
	t.Helper()
	var out []string
	entries, err := os.ReadDir(lake)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if _, err := os.Stat(filepath.Join(lake, e.Name(), "_delta_log")); err == nil {
			out = append(out, e.Name())
		}
	}
	return out
}

// The mistakes of issue 30, on the built binary: each stops a new stream
// with exit 1 and the fix, leaves no table in the lake, and the same
// command with the fix then ingests every line as ok.
func TestFirstBatchMistakes(t *testing.T) {
	if testing.Short() {
		t.Skip("full tier: runs the binary twice per case")
	}
	now := time.Now().UTC().Truncate(time.Minute).Add(-2 * time.Hour)
	rfc := func(i int) any {
		return now.Add(time.Duration(i) * time.Second).In(time.FixedZone("", 2*3600)).Format("2006-01-02T15:04:05.000-07:00")
	}
	ms := func(i int) any { return now.Add(time.Duration(i) * time.Second).UnixMilli() }
	secs := func(i int) any { return now.Add(time.Duration(i) * time.Second).Unix() }
	csvInput := func(t *testing.T) string {
		return mistakeInput(t, "app.csv", 61, func(i int) string {
			if i == 0 {
				return "ts,path,status"
			}
			return fmt.Sprintf("%s,/p%d,%d", now.Add(time.Duration(i)*time.Second).Format(time.RFC3339), i%3, 200)
		})
	}
	jsonInput := func(ts func(int) any) func(t *testing.T) string {
		return func(t *testing.T) string { return mistakeInput(t, "app.ndjson", 60, accessLine(ts)) }
	}
	tests := []struct {
		name  string
		input func(t *testing.T) string
		bad   []string // the flags of the mistake
		hint  string
		fixed []string // the flags of the fix, replacing bad
	}{
		{"time field", jsonInput(rfc), nil,
			`60 of the first 60 lines would be quarantined as missing_time: no "event_time" in the lines; they have ts, path, status, latency_ms, user, request.method: --time-field ts`,
			[]string{"--time-field", "ts"}},
		{"epoch milliseconds", jsonInput(ms), []string{"--time-field", "ts"},
			fmt.Sprintf("%d looks like epoch milliseconds: --time-unit ms", now.UnixMilli()),
			[]string{"--time-field", "ts", "--time-unit", "ms"}},
		{"epoch seconds read as ms", jsonInput(secs), []string{"--time-field", "ts", "--time-unit", "ms"},
			fmt.Sprintf("events are dated more than 30 years before they were read (the first 1970-01-%02d", 1+now.Unix()/1000/86400),
			[]string{"--time-field", "ts"}},
		{"csv as ndjson", csvInput, []string{"--time-field", "ts"},
			"the lines look like CSV: --format csv",
			[]string{"--time-field", "ts", "--format", "csv"}},
		{"misspelt key", jsonInput(rfc), []string{"--time-field", "ts", "--key", "pth"},
			`--key "pth" is in none of the first 60 lines: no line has "pth"; fields seen: ts, path, status, latency_ms, user, request.method: --key path`,
			[]string{"--time-field", "ts", "--key", "path"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			src := tc.input(t)
			lake := filepath.Join(t.TempDir(), "lake")
			base := []string{"stream", "--source", src, "--lake", lake, "--once", "--window", "1m", "--value", "latency_ms", "--progress", filepath.Join(t.TempDir(), "progress")}
			if tc.name == "csv as ndjson" {
				base = base[:len(base)-4] // no latency_ms in the CSV
				base = append(base, "--progress", filepath.Join(t.TempDir(), "progress"))
			}
			_, stderr, code := run(t, append(append([]string{}, base...), tc.bad...)...)
			if code != 1 {
				t.Fatalf("exit %d, want 1; stderr:\n%s", code, stderr)
			}
			if !strings.Contains(stderr, tc.hint) {
				t.Errorf("stderr lacks the hint %q:\n%s", tc.hint, stderr)
			}
			if !strings.Contains(stderr, "stream stopped before writing anything") {
				t.Errorf("stderr does not say nothing was written:\n%s", stderr)
			}
			if got := tablesIn(t, lake); len(got) != 0 {
				t.Errorf("the lake holds tables %v after the mistake, want none", got)
			}
			_, stderr, code = run(t, append(append([]string{}, base...), tc.fixed...)...)
			if code != 0 {
				t.Fatalf("with the fix: exit %d; stderr:\n%s", code, stderr)
			}
			want := "lines read 60 = ok 60 + late 0 + quarantined 0"
			if !strings.Contains(stderr, want) {
				t.Errorf("with the fix: stderr lacks %q:\n%s", want, stderr)
			}
		})
	}
}

// Past its first batch a stream never stops for bad data: a key missing
// from every row of a later batch is a warning and a progress-line field,
// and the lines are ingested.
func TestMissingKeyLaterBatchWarns(t *testing.T) {
	if testing.Short() {
		t.Skip("full tier: runs the binary")
	}
	now := time.Now().UTC().Add(-time.Hour)
	src := mistakeInput(t, "a.ndjson", 20, func(i int) string {
		return fmt.Sprintf(`{"event_time":%q,"page":"/a"}`, now.Add(time.Duration(i)*time.Second).Format(time.RFC3339))
	})
	lake := filepath.Join(t.TempDir(), "lake")
	progress := filepath.Join(t.TempDir(), "progress")
	args := []string{"stream", "--source", src, "--lake", lake, "--once", "--window", "1m", "--key", "page", "--progress", progress}
	if _, stderr, code := run(t, args...); code != 0 {
		t.Fatalf("first run: exit %d:\n%s", code, stderr)
	}
	var later strings.Builder
	for i := range 20 {
		fmt.Fprintf(&later, `{"event_time":%q,"pgae":"/a"}`+"\n", now.Add(time.Duration(30+i)*time.Second).Format(time.RFC3339))
	}
	if err := os.WriteFile(filepath.Join(src, "b.ndjson"), []byte(later.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	_, stderr, code := run(t, args...)
	if code != 0 {
		t.Fatalf("second run: exit %d, want 0 (bad data never stops a running stream):\n%s", code, stderr)
	}
	if !strings.Contains(stderr, "lines read 20 = ok 20") {
		t.Errorf("second run did not ingest the 20 lines:\n%s", stderr)
	}
	if !strings.Contains(stderr, "key or value fields missing") || !strings.Contains(stderr, "fields=page") {
		t.Errorf("no warning naming the missing key:\n%s", stderr)
	}
	data, err := os.ReadFile(progress)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(lastLine(string(data)), `"missing_fields":["page"]`) {
		t.Errorf("the last progress line lacks missing_fields:\n%s", lastLine(string(data)))
	}
	if strings.Contains(strings.Split(string(data), "\n")[0], "missing_fields") {
		t.Errorf("the first batch's progress line has missing_fields:\n%s", data)
	}
}
