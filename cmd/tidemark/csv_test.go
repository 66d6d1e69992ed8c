package main

import (
	"strings"
	"testing"
)

// CSV input end to end: a header, a quoted field holding a newline and a
// comma, an escaped quote, an empty value (counted, not summed), a
// non-numeric value (bad_value) and a short record (malformed).
func TestStreamCSV(t *testing.T) {
	stdout, stderr, code := run(t, "stream", "--source", "testdata/csv", "--format", "csv", "--key", "page", "--value", "value",
		"--window", "10m", "--lateness", "1m", "--max-batch-rows", "1", "--once", "--drain", "--print", "--lake", t.TempDir(),
		"--progress", "/dev/null")
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	want := []string{
		`{"window_start":"2026-01-01T10:00:00Z","window_end":"2026-01-01T10:10:00Z","page":"/a","count":2,"sum":1.5,"min":1.5,"max":1.5,"final":true}`,
		`{"window_start":"2026-01-01T10:00:00Z","window_end":"2026-01-01T10:10:00Z","page":"/b","count":2,"sum":5,"min":2,"max":3,"final":true}`,
		`{"window_start":"2026-01-01T10:10:00Z","window_end":"2026-01-01T10:20:00Z","page":"/a","count":1,"sum":4,"min":4,"max":4,"final":true}`,
	}
	if got := lines(stdout); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("windows:\n%s\nwant:\n%s", stdout, strings.Join(want, "\n"))
	}
	if !strings.Contains(stderr, "lines read 7 = ok 5 + late 0 + quarantined 2 (malformed 1, bad_value 1)") {
		t.Errorf("accounting: %s", stderr)
	}
}
