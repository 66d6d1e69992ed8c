package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// accessLog is an app's JSON access log as it is: fields named like
// tidemark's own columns (status, source, count, offset).
const accessLog = `{"event_time":"2026-01-01T10:00:01Z","path":"/a","status":200,"source":"web","count":1,"latency_ms":12.5}
{"event_time":"2026-01-01T10:00:02Z","path":"/a","status":500,"source":"web","count":2,"latency_ms":30}
{"event_time":"2026-01-01T10:00:03Z","path":"/a","status":200,"source":"web","count":3,"latency_ms":7.5}
{"event_time":"2026-01-01T10:01:04Z","path":"/b","status":404,"source":"api","count":4}
`

func writeInput(t *testing.T, name, text string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestOwnNamesAsKeysCLI: --key status --key source works (issue 30): the
// stream ingests every line, prints and stores the keys under their own
// names, and reads the lake back with them.
func TestOwnNamesAsKeysCLI(t *testing.T) {
	if testing.Short() {
		t.Skip("full tier: runs the binary")
	}
	in := writeInput(t, "access.ndjson", accessLog)
	lk := filepath.Join(t.TempDir(), "lake")
	stdout, stderr, code := run(t, "stream", "--source", in, "--lake", lk, "--once", "--drain", "--window", "1m",
		"--key", "path", "--key", "status", "--key", "source", "--key", "count", "--value", "latency_ms", "--print")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if !strings.Contains(stderr, "lines read 4 = ok 4 + late 0 + quarantined 0") {
		t.Errorf("stderr lacks the accounting of 4 ok lines:\n%s", stderr)
	}
	if !strings.Contains(stdout, `"path":"/a","status":500,"source":"web","count":2,"_tm_count":1,"sum":30,`) {
		t.Errorf("--print lacks the /a 500 window, or names count twice:\n%s", stdout)
	}
	if !strings.Contains(stdout, `"path":"/b","status":404,"source":"api","count":4`) {
		t.Errorf("--print lacks the /b window with its keys:\n%s", stdout)
	}
	out, stderr, code := run(t, "windows", "--lake", lk, "--format", "csv")
	if code != 0 {
		t.Fatalf("windows: exit %d: %s", code, stderr)
	}
	if !strings.HasPrefix(out, "window_start,window_end,path,status,source,count,_tm_count,sum,") {
		t.Errorf("windows header: %s", out)
	}
	if !strings.Contains(out, ",/a,500,web,2,1,30,30,30,") {
		t.Errorf("windows lacks the /a 500 window:\n%s", out)
	}
}

// TestNestedFieldsCLI: --key request.path, --value timing.total_ms and
// --time-field meta.ts read nested fields (issue 30); the column is named
// after the last segment, or as name= says; a literal dotted top-level
// name is read in backticks.
func TestNestedFieldsCLI(t *testing.T) {
	if testing.Short() {
		t.Skip("full tier: runs the binary")
	}
	in := writeInput(t, "ecs.ndjson", `{"meta":{"ts":"2026-01-01T10:00:01Z"},"request":{"path":"/a"},"http":{"method":"GET"},"a.b":"x","timing":{"total_ms":2}}
{"meta":{"ts":"2026-01-01T10:00:02Z"},"request":{"path":"/a"},"http":{"method":"GET"},"a.b":"x","timing":{"total_ms":4}}
{"meta":{"ts":"2026-01-01T10:00:03Z"},"request":{"path":"/b"},"http":{"method":"POST"},"a":{"b":"nested"}}
`)
	lk := filepath.Join(t.TempDir(), "lake")
	stdout, stderr, code := run(t, "stream", "--source", in, "--lake", lk, "--once", "--drain", "--window", "1m",
		"--time-field", "meta.ts", "--key", "request.path", "--key", "verb=http.method", "--key", "`a.b`", "--value", "timing.total_ms", "--print")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, want := range []string{
		`"path":"/a","verb":"GET","a.b":"x","count":2,"sum":6,`,
		`"path":"/b","verb":"POST","a.b":null,"count":1,"sum":null,`,
	} {
		if !strings.Contains(stdout, want) {
			t.Errorf("--print lacks %s:\n%s", want, stdout)
		}
	}
	out, stderr, code := run(t, "windows", "--lake", lk, "--format", "csv")
	if code != 0 || !strings.HasPrefix(out, "window_start,window_end,path,verb,a.b,count,") {
		t.Errorf("windows: exit %d %s\n%s", code, stderr, out)
	}
}

// TestLakeRemembersInputCLI: the lake remembers --time-field (and unit,
// layout, format); a later run that reads otherwise is refused in one line
// that says how to change on purpose, and --change-input does.
func TestLakeRemembersInputCLI(t *testing.T) {
	if testing.Short() {
		t.Skip("full tier: runs the binary")
	}
	in := writeInput(t, "a.ndjson", `{"ts":1767261600123,"page":"/a"}`+"\n")
	lk := filepath.Join(t.TempDir(), "lake")
	base := []string{"stream", "--source", in, "--lake", lk, "--once", "--window", "1m", "--key", "page"}
	if _, stderr, code := run(t, append(base, "--time-field", "ts", "--time-unit", "ms")...); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	_, stderr, code := run(t, append(base, "--time-field", "ts")...)
	if code == 0 || !strings.Contains(stderr, "the lake reads its lines with --format ndjson --time-field ts --time-unit ms, this run asks for --format ndjson --time-field ts --time-unit s; use the same flags, or add --change-input") {
		t.Errorf("other --time-unit: exit %d, stderr %s", code, stderr)
	}
	if l := lines(stderr); !strings.HasPrefix(l[len(l)-1], "tidemark: open lake ") {
		t.Errorf("the error is not one line at the end of stderr:\n%s", stderr)
	}
	if _, stderr, code := run(t, append(base, "--time-field", "ts", "--time-unit", "ms")...); code != 0 {
		t.Errorf("the same flags again: exit %d: %s", code, stderr)
	}
	if _, stderr, code := run(t, append(base, "--time-field", "time", "--change-input")...); code != 0 {
		t.Errorf("--change-input: exit %d: %s", code, stderr)
	}
	if _, stderr, code := run(t, append(base, "--time-field", "time")...); code != 0 {
		t.Errorf("the changed input again: exit %d: %s", code, stderr)
	}
}
