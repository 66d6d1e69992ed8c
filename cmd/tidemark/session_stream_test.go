package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestSessionStreamWalkthrough runs the README's session walk-through
// through the built binary with `stream --session-gap 5m` (lateness 0, one
// row per batch; 10:00, 10:03, 10:11, then the late 10:07), under both late
// rules, with and without --drain: --print and window_results carry
// [10:00,10:08) (and, drained, [10:11,10:16)), 10:07 is late, recompute on
// the session lake gives the one exact session 10:07 bridges, and
// reconcile merges the two stream sessions into it (without --drain once
// a later row has closed [10:11,10:16); before that it leaves the open
// session to the stream), logging one reconcile_log row per replaced
// session; a second reconcile changes nothing.
func TestSessionStreamWalkthrough(t *testing.T) {
	needBinary(t)
	t.Parallel() // waits mostly on fsync, beside the other slow binary tests
	dir := t.TempDir()
	first := `{"window_start":"2026-01-01T10:00:00Z","window_end":"2026-01-01T10:08:00Z","user":"u1","count":2,"sum":3,"min":1,"max":2,"final":true}` + "\n"
	second := `{"window_start":"2026-01-01T10:11:00Z","window_end":"2026-01-01T10:16:00Z","user":"u1","count":1,"sum":3,"min":3,"max":3,"final":true}` + "\n"
	for _, rule := range []string{"window", "event"} {
		for _, drain := range []bool{false, true} {
			lk := filepath.Join(dir, fmt.Sprintf("lake-%s-%v", rule, drain))
			caseDir := filepath.Join(dir, fmt.Sprintf("src-%s-%v", rule, drain))
			if err := os.MkdirAll(caseDir, 0o755); err != nil {
				t.Fatal(err)
			}
			src := walkthroughInput(t, caseDir)
			args := []string{"stream", "--source", src, "--key", "user", "--value", "value", "--session-gap", "5m",
				"--lateness", "0", "--late-rule", rule, "--max-batch-rows", "1", "--once", "--print", "--lake", lk}
			if drain {
				args = append(args, "--drain")
			}
			out, stderr, code := run(t, args...)
			if code != 0 || !strings.Contains(stderr, "ok 3 + late 1") {
				t.Fatalf("%s drain=%v: stream exit %d:\n%s", rule, drain, code, stderr)
			}
			want, rows := first, "10:00-10:08 u1 n=2 s=3 final=true"
			if drain {
				want += second
				rows += "\n10:11-10:16 u1 n=1 s=3 final=true"
			}
			if out != want {
				t.Errorf("%s drain=%v: --print gave\n%s\nwant\n%s", rule, drain, out, want)
			}
			if got := sessionRows(t, lk); got != rows {
				t.Errorf("%s drain=%v: window_results\n%s\nwant\n%s", rule, drain, got, rows)
			}
			// `tidemark checkpoint` shows the open session a restart resumes.
			out, stderr, code = run(t, "checkpoint", "--lake", lk)
			open := "1 open windows, 1 (window, key) rows"
			if drain {
				open = "0 open windows"
			}
			if code != 0 || !strings.Contains(out, open) || (!drain && !strings.Contains(out, "from 2026-01-01T10:11:00Z to 2026-01-01T10:16:00Z")) {
				t.Errorf("%s drain=%v: checkpoint exit %d, want %q:\n%s%s", rule, drain, code, open, out, stderr)
			}
			out, stderr, code = run(t, "recompute", "--lake", lk, "--format", "csv")
			exact := "window_start,window_end,user,count,sum,min,max,late_rows\n" +
				"2026-01-01T10:00:00Z,2026-01-01T10:16:00Z,u1,4,10,1,4,1\n"
			if code != 0 || out != exact {
				t.Errorf("%s drain=%v: recompute exit %d:\n%s%s\nwant\n%s", rule, drain, code, out, stderr, exact)
			}
			if !drain {
				// W is 10:11: the exact session ends at 10:16, after W, so
				// reconcile leaves it to the stream, which still holds
				// [10:11,10:16) open.
				out, stderr, code = run(t, "reconcile", "--lake", lk)
				if code != 0 || !strings.Contains(out, "pending (open)     1") || strings.Contains(out, "merged") {
					t.Errorf("%s: reconcile before the session closed: exit %d\n%s%s", rule, code, out, stderr)
				}
				if got := sessionRows(t, lk); got != rows {
					t.Errorf("%s: window_results after the deferring reconcile:\n%s", rule, got)
				}
				// A later row (another user, 10:30) moves W past 10:16.
				appendFile(t, src, `{"event_time":"2026-01-01T10:30:00Z","user":"u2","value":5}`+"\n")
				out, stderr, code = run(t, args...)
				if code != 0 || out != second {
					t.Errorf("%s: the second stream run exit %d printed\n%s%s\nwant\n%s", rule, code, out, stderr, second)
				}
			}
			out, stderr, code = run(t, "reconcile", "--lake", lk)
			merge := "  sessions merged    2\n" +
				"    [2026-01-01T10:00:00Z, 2026-01-01T10:16:00Z) <- [2026-01-01T10:00:00Z, 2026-01-01T10:08:00Z) + [2026-01-01T10:11:00Z, 2026-01-01T10:16:00Z) (key u1)\n"
			if code != 0 || !strings.Contains(out, "  corrected          1\n") || !strings.Contains(out, merge) {
				t.Errorf("%s drain=%v: reconcile exit %d, want the merge:\n%s%s", rule, drain, code, out, stderr)
			}
			if got, want := sessionRows(t, lk), "10:00-10:16 u1 n=4 s=10 final=true"; got != want {
				t.Errorf("%s drain=%v: window_results after reconcile\n%s\nwant\n%s", rule, drain, got, want)
			}
			if got, want := reconcileLogText(t, lk), "10:00-10:16 u1 replaced 10:00-10:08 old n=2 new n=4 late 1\n"+
				"10:00-10:16 u1 replaced 10:11-10:16 old n=1 new n=4 late 1"; got != want {
				t.Errorf("%s drain=%v: reconcile_log\n%s\nwant\n%s", rule, drain, got, want)
			}
			out, stderr, code = run(t, "reconcile", "--lake", lk)
			if code != 0 || !strings.Contains(out, "  corrected          0\n") || strings.Contains(out, "merged") {
				t.Errorf("%s drain=%v: second reconcile exit %d, want no change:\n%s%s", rule, drain, code, out, stderr)
			}
			if got := reconcileLogText(t, lk); strings.Count(got, "\n") != 1 {
				t.Errorf("%s drain=%v: reconcile_log after the second run\n%s", rule, drain, got)
			}
		}
	}
}

// reconcileLogText renders reconcile_log of a session lake as "session key
// replaced session old new late" lines, sorted.
func reconcileLogText(t *testing.T, loc string) string {
	t.Helper()
	rows, err := openTestLake(t, loc).ReconcileLog(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	hm := func(us int64) string { return time.UnixMicro(us).UTC().Format("15:04") }
	var out []string
	for _, r := range rows {
		line := fmt.Sprintf("%s-%s %s", hm(r.Window.Start), hm(r.Window.End), r.Key)
		if r.Replaced != nil {
			line += fmt.Sprintf(" replaced %s-%s old n=%d", hm(r.Replaced.Start), hm(r.Replaced.End), r.Old.Count)
		}
		out = append(out, line+fmt.Sprintf(" new n=%d late %d", r.New.Count, r.LateRows))
	}
	slices.Sort(out)
	return strings.Join(out, "\n")
}

// TestSessionStreamRefusals: the settings a session stream refuses, each
// with a message naming what to change.
func TestSessionStreamRefusals(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "src")
	if err := os.MkdirAll(src, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(src, "e.ndjson"), []byte(`{"event_time":"2026-01-01T10:00:00Z","user":"u1"}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	stream := func(lk string, flags ...string) (string, int) {
		_, stderr, code := run(t, append([]string{"stream", "--source", src, "--key", "user", "--once", "--lake", lk}, flags...)...)
		return stderr, code
	}
	sessions, windows := filepath.Join(dir, "sessions"), filepath.Join(dir, "windows")
	if stderr, code := stream(sessions, "--session-gap", "5m"); code != 0 {
		t.Fatalf("session stream: exit %d\n%s", code, stderr)
	}
	if stderr, code := stream(windows, "--window", "5m"); code != 0 {
		t.Fatalf("window stream: exit %d\n%s", code, stderr)
	}
	for _, c := range []struct {
		lake  string
		flags []string
		want  string
	}{
		{sessions, []string{"--session-gap", "5m", "--window", "5m"}, "--session-gap replaces --window and --slide"},
		{sessions, []string{"--session-gap", "5m", "--slide", "1m"}, "--session-gap replaces --window and --slide"},
		{sessions, []string{"--session-gap", "5m", "--output-mode", "update"}, "only --output-mode append"},
		{sessions, []string{"--session-gap", "5m", "--state-store", "pebble"}, "--state-store pebble is not supported"},
		{sessions, []string{"--window", "5m"}, "the lake was created with --key user --session-gap 5m0s, this run asks for --key user --window 5m0s"},
		{sessions, []string{"--session-gap", "10m"}, "this run asks for --key user --session-gap 10m0s"},
		{windows, []string{"--session-gap", "5m"}, "the lake was created with --key user --window 5m0s, this run asks for --key user --session-gap 5m0s"},
		{sessions, []string{"--session-gap", "5m", "--name", "second"}, "session windows need a lake written by one stream"},
	} {
		if stderr, code := stream(c.lake, c.flags...); code == 0 || !strings.Contains(stderr, c.want) {
			t.Errorf("%v on %s: exit %d, want %q in\n%s", c.flags, filepath.Base(c.lake), code, c.want, stderr)
		}
	}
	// The refused second stream left no shard behind: the first runs on.
	if stderr, code := stream(sessions, "--session-gap", "5m"); code != 0 {
		t.Fatalf("the session stream after a refused second one: exit %d\n%s", code, stderr)
	}
}

// walkthroughInput writes the README's session walk-through input to
// dir/events.ndjson and returns its path: key u1 at 10:00, 10:03, 10:11
// and 10:07, in that order, with values 1 to 4.
func walkthroughInput(t *testing.T, dir string) string {
	t.Helper()
	src := filepath.Join(dir, "events.ndjson")
	lines := ""
	for i, mm := range []string{"00", "03", "11", "07"} {
		lines += fmt.Sprintf(`{"event_time":"2026-01-01T10:%s:00Z","user":"u1","value":%d}`+"\n", mm, i+1)
	}
	if err := os.WriteFile(src, []byte(lines), 0o644); err != nil {
		t.Fatal(err)
	}
	return src
}

// sessionRows renders window_results of a session lake with a 5-minute
// gap as "hh:mm-hh:mm key n= s= final=" lines, sorted by start.
func sessionRows(t *testing.T, loc string) string {
	t.Helper()
	lk := openTestLake(t, loc)
	if g := lk.Config().SessionGap; g != 5*time.Minute {
		t.Fatalf("lake %s records session gap %s", loc, g)
	}
	rows, err := lk.Windows(context.Background(), -1<<62, 1<<62, -1)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	hm := func(us int64) string { return time.UnixMicro(us).UTC().Format("15:04") }
	for _, r := range rows {
		out = append(out, fmt.Sprintf("%s-%s %s n=%d s=%g final=%v", hm(r.Window.Start), hm(r.Window.End), r.Key, r.Agg.Count, r.Agg.Sum, r.Final))
	}
	return strings.Join(out, "\n")
}

// TestSessionLatenessWhatIf: `tidemark lateness` on a session lake replays
// sessions. 10:06 arrives after 10:00, 10:04 and 10:09:20 (gap 5m): with a
// 10 s budget W is 10:09:10, so the session [10:00,10:09) is closed and
// 10:06, which touches it, is late under the window rule, while its
// tumbling 5-minute window [10:05,10:10) is still open on a window lake.
func TestSessionLatenessWhatIf(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "src")
	if err := os.MkdirAll(src, 0o755); err != nil {
		t.Fatal(err)
	}
	input := ""
	for _, ea := range [][2]string{{"10:00:00", "10:00:00"}, {"10:04:00", "10:04:00"}, {"10:09:20", "10:09:20"}, {"10:06:00", "10:09:30"}} {
		input += fmt.Sprintf(`{"event_time":"2026-01-01T%sZ","arrival":"2026-01-01T%sZ","user":"u1"}`+"\n", ea[0], ea[1])
	}
	if err := os.WriteFile(filepath.Join(src, "e.ndjson"), []byte(input), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		flag, want string // want: dropped_event_rule_10s,dropped_window_rule_10s
	}{{"--session-gap", "1,1"}, {"--window", "1,0"}} {
		lk := filepath.Join(dir, c.flag)
		if _, stderr, code := run(t, "stream", "--source", src, "--key", "user", "--arrival-field", "arrival", c.flag, "5m",
			"--max-batch-rows", "1", "--once", "--lake", lk); code != 0 {
			t.Fatalf("%s: stream exit %d\n%s", c.flag, code, stderr)
		}
		out, stderr, code := run(t, "lateness", "--lake", lk, "--format", "csv")
		rows := lines(out)
		if code != 0 || len(rows) != 2 {
			t.Fatalf("%s: lateness exit %d\n%s%s", c.flag, code, out, stderr)
		}
		head, vals := strings.Split(rows[0], ","), strings.Split(rows[1], ",")
		got := map[string]string{}
		for i, h := range head {
			if i < len(vals) {
				got[h] = vals[i]
			}
		}
		if g := got["dropped_event_rule_10s"] + "," + got["dropped_window_rule_10s"]; g != c.want {
			t.Errorf("%s: dropped at 10s (event rule, window rule) %s, want %s\n%s", c.flag, g, c.want, out)
		}
	}
}
