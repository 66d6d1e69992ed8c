package main

import (
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
)

// TestStreamNamesUnique: a second stream with the --name the lake has for
// another checkpoint is refused and names that checkpoint, and the lake
// holds every line once (before, both ran and every line landed twice); a
// restart keeps working; a copied checkpoint is refused until --take-name
// moves the name to it, which then reads nothing again.
func TestStreamNamesUnique(t *testing.T) {
	if testing.Short() {
		t.Skip("full tier: runs the binary")
	}
	lakeDir, other := t.TempDir(), filepath.Join(t.TempDir(), "ck")
	args := []string{"stream", "--source", "testdata/example", "--window", "10m", "--lake", lakeDir, "--once"}
	_, stderr, code := run(t, args...)
	if code != 0 || !strings.HasPrefix(lastLine(stderr), "lines read 63 ") {
		t.Fatalf("first stream: exit %d\n%s", code, stderr)
	}
	_, stderr, code = run(t, append(args, "--checkpoint", other)...)
	first := filepath.Join(lakeDir, "_checkpoints", "stream")
	if code == 0 || !strings.Contains(stderr, `a stream named "stream"`) || !strings.Contains(stderr, first) {
		t.Errorf("a second stream named stream: exit %d, want a refusal naming %s:\n%s", code, first, stderr)
	}
	out, stderr, code := run(t, "tables", "--lake", lakeDir)
	if code != 0 || !regexp.MustCompile(`(?m)^raw_events +\d+ +\d+ +60 `).MatchString(out) {
		t.Errorf("raw_events after the refused stream: want 60 rows (each line once):\n%s%s", out, stderr)
	}
	if _, stderr, code = run(t, args...); code != 0 || !strings.HasPrefix(lastLine(stderr), "lines read 0 ") {
		t.Errorf("a restart: exit %d\n%s", code, stderr)
	}

	moved := filepath.Join(t.TempDir(), "moved")
	if err := exec.Command("cp", "-a", first, moved).Run(); err != nil {
		t.Fatal(err)
	}
	_, stderr, code = run(t, append(args, "--checkpoint", moved)...)
	if code == 0 || !strings.Contains(stderr, "a copy of that checkpoint") || !strings.Contains(stderr, "--take-name") {
		t.Errorf("a copied checkpoint: exit %d, want a refusal pointing at --take-name:\n%s", code, stderr)
	}
	if err := os.RemoveAll(first); err != nil {
		t.Fatal(err)
	}
	_, stderr, code = run(t, append(args, "--checkpoint", moved, "--take-name")...)
	if code != 0 || !strings.HasPrefix(lastLine(stderr), "lines read 0 ") {
		t.Errorf("the moved checkpoint with --take-name: exit %d, want 0 lines read again:\n%s", code, stderr)
	}
	if _, stderr, code = run(t, append(args, "--checkpoint", moved)...); code != 0 {
		t.Errorf("a restart at the new place: exit %d\n%s", code, stderr)
	}
}

// TestStatusPageByDefault: a following stream serves its status page on a
// loopback port without --metrics-addr and logs where; a second one beside
// it, finding that port taken, takes a free one; --metrics-addr off serves
// none, and neither does a --once run.
func TestStatusPageByDefault(t *testing.T) {
	if testing.Short() {
		t.Skip("full tier: runs the binary")
	}
	urlOf := func(stderr string) string {
		m := regexp.MustCompile(`status page at (http://127\.0\.0\.1:\d+/)`).FindStringSubmatch(stderr)
		if m == nil {
			return ""
		}
		return m[1]
	}
	args := func(lake string) []string {
		return []string{"stream", "--source", "testdata/example", "--window", "10m", "--lake", lake}
	}
	first, firstErr := startFollowing(t, nil, args(t.TempDir())...)
	second, secondErr := startFollowing(t, nil, args(t.TempDir())...)
	u1, u2 := urlOf(firstErr.String()), urlOf(secondErr.String())
	if u1 == "" || u2 == "" || u1 == u2 {
		t.Fatalf("two following streams: status pages %q and %q, want two loopback URLs:\n%s\n%s", u1, u2, firstErr, secondErr)
	}
	for _, u := range []string{u1, u2} {
		resp, err := http.Get(u + "api/progress")
		if err != nil || resp.StatusCode != 200 {
			t.Errorf("GET %sapi/progress: %v %v", u, resp, err)
			continue
		}
		resp.Body.Close()
	}
	for _, c := range []*exec.Cmd{first, second} {
		c.Process.Signal(syscall.SIGTERM)
		c.Wait()
	}
	off, offErr := startFollowing(t, nil, append(args(t.TempDir()), "--metrics-addr", "off")...)
	if u := urlOf(offErr.String()); u != "" {
		t.Errorf("--metrics-addr off serves %s", u)
	}
	off.Process.Signal(syscall.SIGTERM)
	off.Wait()
	if _, stderr, code := run(t, append(args(t.TempDir()), "--once")...); code != 0 || urlOf(stderr) != "" {
		t.Errorf("--once: exit %d, serves %q", code, urlOf(stderr))
	}
}
