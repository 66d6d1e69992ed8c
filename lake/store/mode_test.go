package store

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// modeChildEnv makes the test binary, re-executed by TestDirModesUmask, write
// a store at this path and exit.
const modeChildEnv = "TIDEMARK_TEST_MODE_CHILD"

// TestDirModesUmask runs a child process under a shell's umask 022 and 077
// (the umask is per process: a test cannot set it for itself without racing
// every other goroutine creating files) and checks that every file and
// directory the store created has 0666 resp. 0777 minus the umask: objects
// put by rename and by link(2), nested directories, the temp directory.
func TestDirModesUmask(t *testing.T) {
	if dir := os.Getenv(modeChildEnv); dir != "" {
		modeChild(t, dir)
		return
	}
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh to set a umask")
	}
	for _, umask := range []fs.FileMode{0o022, 0o077, 0o027} {
		t.Run(fmt.Sprintf("umask %03o", umask), func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "lake")
			cmd := exec.Command(sh, "-c", fmt.Sprintf(`umask %03o && exec "$0" -test.run='^TestDirModesUmask$' -test.count=1`, umask), os.Args[0])
			cmd.Env = append(os.Environ(), modeChildEnv+"="+dir)
			if out, err := cmd.CombinedOutput(); err != nil || !strings.Contains(string(out), "PASS") {
				t.Fatalf("child under umask %03o: %v\n%s", umask, err, out)
			}
			n := checkModes(t, dir, umask)
			if n < 8 {
				t.Errorf("checked %d entries, want at least 8", n)
			}
		})
	}
}

// checkModes asserts the permission bits of everything under root and
// returns how many entries it looked at.
func checkModes(t *testing.T, root string, umask fs.FileMode) int {
	t.Helper()
	n := 0
	err := filepath.WalkDir(root, func(p string, e fs.DirEntry, err error) error {
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
			t.Errorf("%s: got mode %03o, want %03o (umask %03o)", p, got, want, umask)
		}
		n++
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func modeChild(t *testing.T, dir string) {
	ctx := context.Background()
	d, err := OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Put(ctx, "raw_events/event_date=2026-01-01/event_hour=10/part-1.zstd.parquet", strings.NewReader("data"), 4); err != nil {
		t.Fatal(err)
	}
	if err := d.PutIfAbsent(ctx, "raw_events/_delta_log/00000000000000000000.json", []byte("{}\n")); err != nil {
		t.Fatal(err)
	}
	l, err := OpenDirLinkOnly(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.PutIfAbsent(ctx, "quarantine/_delta_log/00000000000000000000.json", []byte("{}\n")); err != nil {
		t.Fatal(err)
	}
	if err := d.Put(ctx, "raw_events/_delta_log/_last_checkpoint", strings.NewReader("{}"), 2); err != nil {
		t.Fatal(err)
	}
}
