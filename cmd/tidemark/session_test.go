package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestSessionsWalkthrough runs the README's session walk-through through
// the built binary, as far as the binary goes today: the stream (1-minute
// windows, lateness 0, one row per batch) stores 10:00, 10:03, 10:11 as ok
// and the late 10:07 as late under either rule, and `tidemark sessions`
// with a 5-minute gap finds the one session 10:07 bridges, whole, even
// when asked for a minute at its end.
func TestSessionsWalkthrough(t *testing.T) {
	dir := t.TempDir()
	src := walkthroughInput(t, dir)
	for _, rule := range []string{"event", "window"} {
		lk := filepath.Join(dir, "lake-"+rule)
		_, stderr, code := run(t, "stream", "--source", src, "--key", "user", "--value", "value", "--window", "1m",
			"--lateness", "0", "--late-rule", rule, "--max-batch-rows", "1", "--once", "--lake", lk)
		if code != 0 || !strings.Contains(stderr, "ok 3 + late 1") {
			t.Fatalf("%s: stream exit %d:\n%s", rule, code, stderr)
		}
		want := "window_start,window_end,user,count,sum,min,max,late_rows\n" +
			"2026-01-01T10:00:00Z,2026-01-01T10:16:00Z,u1,4,10,1,4,1\n"
		for _, rng := range [][]string{nil, {"--from", "2026-01-01T10:15:00Z", "--to", "2026-01-01T10:16:00Z"}} {
			out, stderr, code := run(t, append([]string{"sessions", "--lake", lk, "--gap", "5m", "--format", "csv"}, rng...)...)
			if code != 0 || out != want {
				t.Fatalf("%s %v: sessions exit %d, got\n%s%s\nwant\n%s", rule, rng, code, out, stderr, want)
			}
		}
		// A 4-minute gap: 10:07 is exactly a gap from 10:03 and from
		// 10:11, so it starts a session of its own and bridges nothing.
		out, _, _ := run(t, "sessions", "--lake", lk, "--gap", "4m", "--format", "csv")
		want = "window_start,window_end,user,count,sum,min,max,late_rows\n" +
			"2026-01-01T10:00:00Z,2026-01-01T10:07:00Z,u1,2,3,1,2,0\n" +
			"2026-01-01T10:07:00Z,2026-01-01T10:11:00Z,u1,1,4,4,4,1\n" +
			"2026-01-01T10:11:00Z,2026-01-01T10:15:00Z,u1,1,3,3,3,0\n"
		if out != want {
			t.Fatalf("%s: gap 4m: got\n%s\nwant\n%s", rule, out, want)
		}
	}
	if _, stderr, code := run(t, "sessions", "--lake", filepath.Join(dir, "lake-event")); code == 0 || !strings.Contains(stderr, "--gap is required") {
		t.Fatalf("no --gap: exit %d, %s", code, stderr)
	}
}
