package main

import (
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// runUmask runs the built binary under a shell's umask and fails on a
// non-zero exit.
func runUmask(t *testing.T, umask fs.FileMode, args ...string) string {
	t.Helper()
	needBinary(t)
	cmd := exec.Command("sh", append([]string{"-c", fmt.Sprintf(`umask %03o && exec "$0" "$@"`, umask), binary}, args...)...)
	cmd.Dir = repoRoot(t)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("umask %03o tidemark %s: %v\n%s", umask, strings.Join(args, " "), err, errb.String())
	}
	return out.String()
}

// TestLakeModesFollowUmask: a shared lake is readable by the team under
// their umask. Everything the real binary creates — data files, Delta
// commits, a Delta checkpoint and _last_checkpoint, the stream's checkpoint
// and lock, reconcile's and compact's output — gets 0666/0777 minus the
// umask, like files cp, Spark or DuckDB write (the issue measured 0600 for
// every data file, whatever the umask).
func TestLakeModesFollowUmask(t *testing.T) {
	needBinary(t)
	t.Parallel() // waits mostly on fsync, beside the other slow binary tests
	if _, err := exec.LookPath("sh"); err != nil {
		t.Skip("no sh to set a umask")
	}
	src := t.TempDir()
	var in strings.Builder
	for i := range 105 { // > 100 commits of raw_events: a Delta checkpoint
		fmt.Fprintf(&in, `{"event_time":"2026-01-01T10:%02d:%02dZ","page":"/p%d","value":%d}`+"\n", i/60, i%60, i%3, i)
	}
	in.WriteString("not json\n")
	if err := os.WriteFile(filepath.Join(src, "a.ndjson"), []byte(in.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, umask := range []fs.FileMode{0o022, 0o077, 0o002} { // 002: a group-shared lake
		t.Run(fmt.Sprintf("umask %03o", umask), func(t *testing.T) {
			lake := filepath.Join(t.TempDir(), "lake")
			runUmask(t, umask, "stream", "--source", src, "--key", "page", "--value", "value", "--window", "1m",
				"--max-batch-rows", "1", "--once", "--lake", lake, "--progress", filepath.Join(lake, "..", "progress"))
			// Late rows for reconcile, then the maintenance commands.
			late := filepath.Join(src, "b.ndjson")
			if err := os.WriteFile(late, []byte(`{"event_time":"2026-01-01T10:00:30Z","page":"/p0","value":1}`+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			defer os.Remove(late)
			runUmask(t, umask, "stream", "--source", src, "--key", "page", "--value", "value", "--window", "1m",
				"--once", "--drain", "--lake", lake, "--progress", "/dev/null")
			runUmask(t, umask, "reconcile", "--lake", lake)
			runUmask(t, umask, "compact", "--lake", lake)
			for _, want := range []string{
				"raw_events/_delta_log/_last_checkpoint",
				"raw_events/_delta_log/00000000000000000100.checkpoint.parquet",
				"_checkpoints/stream/lock",
				"reconcile_log/_delta_log/00000000000000000000.json",
			} {
				if _, err := os.Stat(filepath.Join(lake, want)); err != nil {
					t.Errorf("expected the run to create %s: %v", want, err)
				}
			}
			n := 0
			err := filepath.WalkDir(lake, func(p string, e fs.DirEntry, err error) error {
				if err != nil {
					return err
				}
				fi, err := e.Info()
				if err != nil {
					return err
				}
				want := fs.FileMode(0o666) &^ umask
				if fi.IsDir() {
					want = 0o777 &^ umask
				}
				if got := fi.Mode().Perm(); got != want {
					rel, _ := filepath.Rel(lake, p)
					t.Errorf("%s: got mode %03o, want %03o", rel, got, want)
				}
				n++
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if n < 50 {
				t.Errorf("looked at %d entries, want a lake with at least 50", n)
			}
		})
	}
}
