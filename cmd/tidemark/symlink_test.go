package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The case on the real binary: a log directory holding
// evil.ndjson -> /etc/passwd no longer copies /etc/passwd into the lake;
// TIDEMARK_FOLLOW_SYMLINKS (the --follow-symlinks flag) turns following on.
func TestStreamSymlinkOutOfSource(t *testing.T) {
	passwd, err := os.ReadFile("/etc/passwd")
	if err != nil {
		t.Skip("no /etc/passwd")
	}
	n := len(lines(string(passwd))) // every line a record (--once): malformed
	src := t.TempDir()
	if err := os.WriteFile(filepath.Join(src, "good.ndjson"), []byte(`{"event_time":"2026-01-01T10:00:00Z"}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/etc/passwd", filepath.Join(src, "evil.ndjson")); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		env  []string
		want string
	}{
		{nil, "lines read 1 = ok 1 + late 0 + quarantined 0"},
		{[]string{"TIDEMARK_FOLLOW_SYMLINKS=true"}, fmt.Sprintf("lines read %d = ok 1 + late 0 + quarantined %d", n+1, n)},
	} {
		// /etc/passwd's lines are all malformed: the first-batch check
		// would stop the stream (it is the mistake it catches), so it is off.
		_, stderr, code := runEnv(t, c.env, "stream", "--source", src, "--window", "1m", "--once", "--no-first-batch-check",
			"--lake", filepath.Join(t.TempDir(), "lake"), "--progress", "/dev/null")
		if code != 0 {
			t.Fatalf("env %v: exit %d\n%s", c.env, code, stderr)
		}
		if !strings.Contains(stderr, c.want) {
			t.Errorf("env %v: want %q in\n%s", c.env, c.want, stderr)
		}
		if c.env == nil && !strings.Contains(stderr, "symbolic link leads outside the source") {
			t.Errorf("no warning about the skipped link:\n%s", stderr)
		}
	}
}
