package ingest

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func symlink(t *testing.T, target, name string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, name); err != nil {
		t.Fatal(err)
	}
}

// files lists the distinct files records came from, in order.
func files(s string) string {
	var out []string
	for line := range strings.Lines(s) {
		f, _, _ := strings.Cut(line, "@")
		if len(out) == 0 || out[len(out)-1] != f {
			out = append(out, f)
		}
	}
	return strings.Join(out, " ")
}

// TestSymlinkOutsideRootNotFollowed is the case: a link in a log
// directory to /etc/passwd (and to a file of another directory) must not
// copy that file into the lake; the link is logged once, not per rescan.
func TestSymlinkOutsideRootNotFollowed(t *testing.T) {
	dir, outside := t.TempDir(), t.TempDir()
	writeFile(t, filepath.Join(dir, "good.ndjson"), ev("00:00")+"\n")
	writeFile(t, filepath.Join(outside, "secret.ndjson"), "secret\n")
	symlink(t, filepath.Join(outside, "secret.ndjson"), filepath.Join(dir, "relative.ndjson"))
	symlink(t, "../"+filepath.Base(outside)+"/secret.ndjson", filepath.Join(dir, "dotdot.ndjson"))
	symlink(t, outside, filepath.Join(dir, "sub")) // a directory out of the root
	if _, err := os.Stat("/etc/passwd"); err == nil {
		symlink(t, "/etc/passwd", filepath.Join(dir, "evil.ndjson"))
	}
	var logs bytes.Buffer
	cfg := SourceConfig{Logger: slog.New(slog.NewTextHandler(&logs, nil))}
	for _, once := range []bool{true, false} {
		cfg.Once = once
		var got string
		if once {
			got = summary(readAll(t, openTest(t, dir, cfg, Position{}), 100))
		} else {
			d := tailer(t, dir, cfg)
			got = rescanRead(t, d) + rescanRead(t, d)
		}
		if files(got) != "good.ndjson" {
			t.Errorf("once=%v: got records from %q, want only good.ndjson:\n%s", once, files(got), got)
		}
		if strings.Contains(got, "secret") || strings.Contains(got, "root:") {
			t.Errorf("once=%v: an outside file reached the records:\n%s", once, got)
		}
	}
	warned := logs.String()
	for _, name := range []string{"relative.ndjson", "dotdot.ndjson"} {
		if n := strings.Count(warned, "file="+name); n != 2 {
			t.Errorf("link %s logged %d times by two sources, want once each:\n%s", name, n, warned)
		}
	}
}

// TestSymlinkInsideRoot follows links that stay in the root (Kubernetes'
// containers/*.log -> ../pods/... with the source at log/), reads a file reached under two names
// once, and walks a root that is itself a link.
func TestSymlinkInsideRoot(t *testing.T) {
	top := t.TempDir()
	dir := filepath.Join(top, "log")
	writeFile(t, filepath.Join(dir, "pods", "web", "0.log"), "web\n")
	symlink(t, "../pods/web/0.log", filepath.Join(dir, "containers", "web.log"))
	writeFile(t, filepath.Join(dir, "app.log"), "app\n")
	symlink(t, "app.log", filepath.Join(dir, "current.log")) // same file, second name
	writeFile(t, filepath.Join(dir, ".hidden", "h.log"), "hidden\n")
	symlink(t, ".hidden/h.log", filepath.Join(dir, "visible.log"))
	symlink(t, "pods", filepath.Join(dir, "pods-again")) // a directory inside: walked under its own name
	symlink(t, "log", filepath.Join(top, "link-to-log"))

	cfg := SourceConfig{Once: true}
	got := summary(readAll(t, openTest(t, dir, cfg, Position{}), 100))
	if want := "app.log containers/web.log visible.log"; files(got) != want {
		t.Errorf("got records from %q, want %q:\n%s", files(got), want, got)
	}
	// With a glob the root is the part before it: here containers/, and
	// ../pods is outside it (Kubernetes needs FollowSymlinks, as Filebeat's
	// symlinks: true).
	got = summary(readAll(t, openTest(t, filepath.Join(dir, "containers", "*.log"), cfg, Position{}), 100))
	if got != "" {
		t.Errorf("glob: got %q, want nothing from outside containers/", got)
	}
	cfg.FollowSymlinks = true
	got = summary(readAll(t, openTest(t, filepath.Join(dir, "containers", "*.log"), cfg, Position{}), 100))
	if want := "web.log@0:web[malformed]\n"; got != want {
		t.Errorf("glob, FollowSymlinks: got %q, want %q", got, want)
	}
	cfg.FollowSymlinks = false
	got = summary(readAll(t, openTest(t, filepath.Join(top, "link-to-log"), cfg, Position{}), 100))
	if want := "app.log containers/web.log visible.log"; files(got) != want {
		t.Errorf("root through a link: got records from %q, want %q", files(got), want)
	}
}

// TestSymlinkNamedFile follows a link the user named as the --source
// itself, wherever it leads, and nothing else of its directory.
func TestSymlinkNamedFile(t *testing.T) {
	dir, outside := t.TempDir(), t.TempDir()
	writeFile(t, filepath.Join(outside, "real.log"), "named\n")
	symlink(t, filepath.Join(outside, "real.log"), filepath.Join(dir, "app.log"))
	symlink(t, filepath.Join(outside, "real.log"), filepath.Join(dir, "sub", "app.log"))
	got := summary(readAll(t, openTest(t, filepath.Join(dir, "app.log"), SourceConfig{Once: true}, Position{}), 100))
	if want := "app.log@0:named[malformed]\n"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

// TestFollowSymlinks: with FollowSymlinks, links to files and directories
// anywhere are followed, and loops end.
func TestFollowSymlinks(t *testing.T) {
	dir, outside := t.TempDir(), t.TempDir()
	writeFile(t, filepath.Join(dir, "a.log"), "a\n")
	writeFile(t, filepath.Join(outside, "o.log"), "o\n")
	writeFile(t, filepath.Join(outside, "deep", "d.log"), "d\n")
	symlink(t, filepath.Join(outside, "o.log"), filepath.Join(dir, "file.log"))
	symlink(t, outside, filepath.Join(dir, "ext"))
	symlink(t, dir, filepath.Join(outside, "deep", "back")) // a loop through two links
	symlink(t, ".", filepath.Join(dir, "self"))             // a loop of one
	cfg := SourceConfig{Once: true, FollowSymlinks: true}
	got := summary(readAll(t, openTest(t, dir, cfg, Position{}), 100))
	if want := "a.log ext/deep/d.log ext/o.log"; files(got) != want {
		t.Errorf("got records from %q, want %q:\n%s", files(got), want, got)
	}
}

// TestSymlinkSwapped: a link checked while it led inside the root and then
// pointed elsewhere is not read through: the open checks device+inode.
func TestSymlinkSwapped(t *testing.T) {
	dir, outside := t.TempDir(), t.TempDir()
	writeFile(t, filepath.Join(dir, ".inner.log"), "")
	writeFile(t, filepath.Join(outside, "secret.log"), "secret\n")
	link := filepath.Join(dir, "app.log")
	symlink(t, ".inner.log", link)
	d := tailer(t, dir, SourceConfig{})
	if got := rescanRead(t, d); got != "" {
		t.Fatalf("got %q from an empty file", got)
	}
	if err := os.Remove(link); err != nil {
		t.Fatal(err)
	}
	symlink(t, filepath.Join(outside, "secret.log"), link)
	d.files["app.log"].size = 7 // as if a write event had been seen
	got := summary(readAll(t, d, 100)) + rescanRead(t, d)
	if strings.Contains(got, "secret") {
		t.Errorf("read through a swapped link: %q", got)
	}
}

// TestSymlinkNotify runs the fsnotify path: a link out of the root created
// while the source tails is not read; with FollowSymlinks, a line appended
// in a directory reached through a link is found by its watch.
func TestSymlinkNotify(t *testing.T) {
	for _, follow := range []bool{false, true} {
		dir, outside := t.TempDir(), t.TempDir()
		writeFile(t, filepath.Join(outside, "secret.log"), "secret\n")
		writeFile(t, filepath.Join(outside, "sub", "x.log"), "")
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		cfg := SourceConfig{Clock: time.Now, Rescan: time.Hour, FollowSymlinks: follow}
		if follow {
			symlink(t, filepath.Join(outside, "sub"), filepath.Join(dir, "linked"))
		}
		s := openTest(t, dir, cfg, Position{}).(*DirSource)
		if got := summary(readAll(t, s, 10)); got != "" {
			t.Fatalf("follow=%v: got %q before any write", follow, got)
		}
		var want string
		if follow {
			appendFile(t, filepath.Join(outside, "sub", "x.log"), "through\n")
			want = "linked/x.log@0:through[malformed]\n"
		} else {
			symlink(t, filepath.Join(outside, "secret.log"), filepath.Join(dir, "evil.log"))
			writeFile(t, filepath.Join(dir, "good.log"), "good\n")
			want = "good.log@0:good[malformed]\n"
		}
		var got string
		for !strings.Contains(got, want) && ctx.Err() == nil {
			if err := s.Wait(ctx, time.Hour); err != nil {
				t.Fatal(err)
			}
			got += summary(readAll(t, s, 10))
		}
		cancel()
		if got != want {
			t.Errorf("follow=%v: got %q, want %q", follow, got, want)
		}
	}
}
