package ingest

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

func TestBackoff(t *testing.T) {
	want := []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 16 * time.Second, 32 * time.Second, time.Minute, time.Minute}
	for i, w := range want {
		if got := backoff(i + 1); got != w {
			t.Errorf("backoff(%d) = %v, want %v", i+1, got, w)
		}
	}
}

// warnings counts a logger's records by level and message.
type warnings struct {
	mu   sync.Mutex
	msgs []string
}

func (w *warnings) Enabled(context.Context, slog.Level) bool { return true }
func (w *warnings) Handle(_ context.Context, r slog.Record) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.msgs = append(w.msgs, r.Level.String()+" "+r.Message)
	return nil
}
func (w *warnings) WithAttrs([]slog.Attr) slog.Handler { return w }
func (w *warnings) WithGroup(string) slog.Handler      { return w }

func (w *warnings) count(level string) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	for _, m := range w.msgs {
		if strings.HasPrefix(m, level+" ") {
			n++
		}
	}
	return n
}

// asNobody runs the calling test again as user nobody when the tests run
// as root (root reads a chmod 000 file): it reports whether it did, and
// the caller then returns.
func asNobody(t *testing.T) bool {
	t.Helper()
	if os.Geteuid() != 0 {
		return false
	}
	if testing.Short() {
		t.Skip("full tier: as root, reruns itself as nobody")
	}
	self, err := os.Executable()
	if err != nil {
		t.Skip(err)
	}
	dir, err := os.MkdirTemp("", "tidemark-nobody-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	os.Chmod(dir, 0o755)
	bin := filepath.Join(dir, "ingest.test")
	src, err := os.Open(self)
	if err != nil {
		t.Fatal(err)
	}
	dst, err := os.OpenFile(bin, os.O_CREATE|os.O_WRONLY, 0o755)
	if err == nil {
		_, err = io.Copy(dst, src)
		err = errorsJoin(err, dst.Close())
	}
	src.Close()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-test.run", "^"+t.Name()+"$", "-test.count=1", "-test.v")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "TMPDIR=/tmp")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS: "+t.Name()) {
		t.Fatalf("as nobody: %v\n%s", err, out)
	}
	return true
}

func errorsJoin(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

// A file it cannot open and a subdirectory it cannot list, made while the
// source runs, are skipped with one warning each however often it reads,
// listed by Unreadable with their retry time, hold nothing, do not make
// Wait return at once, and are read once they can be.
func TestDirUnreadablePaths(t *testing.T) {
	if asNobody(t) {
		return
	}
	dir := t.TempDir()
	now := fixedNow
	logs := &warnings{}
	cfg := SourceConfig{Clock: func() time.Time { return now }, PollOnly: true, Rescan: time.Second, Logger: slog.New(logs)}
	writeFile(t, filepath.Join(dir, "a.log"), ev("01:00")+"\n")
	d := openTest(t, dir, cfg, Position{}).(*DirSource)
	ctx := context.Background()
	if got := summary(readAll(t, d, 100)); got != "a.log@0:"+ev("01:00")+"\n" {
		t.Fatalf("got %s", got)
	}
	secret, sub := filepath.Join(dir, "secret.log"), filepath.Join(dir, "sub")
	writeFile(t, secret, ev("02:00")+"\n")
	writeFile(t, filepath.Join(sub, "c.log"), ev("03:00")+"\n")
	for _, p := range []string{secret, sub} {
		if err := os.Chmod(p, 0); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.Chmod(p, 0o755) })
	}
	// A minute of reads, one every 100 ms: no error, nothing read, two
	// warnings.
	for range 600 {
		now = now.Add(100 * time.Millisecond)
		recs, err := d.Read(ctx, nil, 100)
		if err != nil {
			t.Fatalf("read with unreadable paths: %v", err)
		}
		if len(recs) > 0 {
			t.Fatalf("read %s from unreadable paths", summary(recs))
		}
	}
	if n := logs.count("WARN"); n != 2 {
		t.Errorf("%d warnings in a minute of reads, want 2 (one per path):\n%s", n, strings.Join(logs.msgs, "\n"))
	}
	list := d.Unreadable()
	if len(list) != 2 || list[0].Path != "secret.log" || list[0].Dir || list[1].Path != "sub" || !list[1].Dir {
		t.Fatalf("Unreadable() = %+v, want secret.log and sub/", list)
	}
	for _, u := range list {
		// Tried at 0, 1, 3, 7, 15, 31 s: six failures in the minute, the
		// next retry 32 s after the last.
		if u.Tries < 5 || u.Tries > 7 || u.Retry <= now.UnixMicro() || u.Error == "" {
			t.Errorf("%s: %d tries, retry in %v, error %q; want about 6 tries with backoff", u.Path, u.Tries, time.UnixMicro(u.Retry).Sub(now), u.Error)
		}
	}
	if p := d.Position(); len(p.Unreadable) != 2 {
		t.Errorf("Position lists %d unreadable paths, want 2", len(p.Unreadable))
	}
	if d.hasData() {
		t.Error("hasData with only unreadable data: Wait would return at once (a busy loop)")
	}
	if _, held := d.Position().Frontier(); !held {
		t.Error("a.log, live, should hold; nothing else")
	}
	for _, p := range []string{secret, sub} {
		if err := os.Chmod(p, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	now = now.Add(RetryMax)
	got := summary(readAll(t, d, 100))
	if want := "secret.log@0:" + ev("02:00") + "\n" + "sub/c.log@0:" + ev("03:00") + "\n"; got != want {
		t.Errorf("once readable: got\n%s\nwant\n%s", got, want)
	}
	if list := d.Unreadable(); len(list) != 0 {
		t.Errorf("Unreadable() = %+v once readable, want none", list)
	}
	if n := logs.count("INFO"); n < 2 {
		t.Errorf("%d info lines, want one 'readable again' per path", n)
	}
}

// Under --once a file it cannot open is given up and listed, so the run
// can fail naming it; the rest is read.
func TestDirUnreadableOnce(t *testing.T) {
	if asNobody(t) {
		return
	}
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "a.log"), ev("01:00")+"\n")
	writeFile(t, filepath.Join(dir, "b.log"), ev("02:00")+"\n")
	if err := os.Chmod(filepath.Join(dir, "a.log"), 0); err != nil {
		t.Fatal(err)
	}
	s := openTest(t, dir, SourceConfig{Once: true}, Position{})
	if got := summary(readAll(t, s, 100)); got != "b.log@0:"+ev("02:00")+"\n" {
		t.Errorf("got %s, want b.log", got)
	}
	if list := s.(Skipper).Unreadable(); len(list) != 1 || list[0].Path != "a.log" {
		t.Errorf("Unreadable() = %+v, want a.log", list)
	}
}

// The source's root deleted while it runs: no error, one warning, the
// files kept; recreated, it is read again.
func TestDirVanishedRoot(t *testing.T) {
	parent := t.TempDir()
	dir := filepath.Join(parent, "logs")
	writeFile(t, filepath.Join(dir, "a.log"), ev("01:00")+"\n")
	now := fixedNow
	logs := &warnings{}
	for _, poll := range []bool{true, false} {
		logs.msgs = nil
		cfg := SourceConfig{Clock: func() time.Time { return now }, PollOnly: poll, Rescan: time.Second, Logger: slog.New(logs)}
		d := openTest(t, dir, cfg, Position{}).(*DirSource)
		ctx := context.Background()
		readAll(t, d, 100)
		if err := os.RemoveAll(dir); err != nil {
			t.Fatal(err)
		}
		for range 300 {
			now = now.Add(100 * time.Millisecond)
			if _, err := d.Read(ctx, nil, 100); err != nil {
				t.Fatalf("poll=%v: read with the root gone: %v", poll, err)
			}
		}
		if n := logs.count("WARN"); n != 1 {
			t.Errorf("poll=%v: %d warnings with the root gone for 30 s, want 1:\n%s", poll, n, strings.Join(logs.msgs, "\n"))
		}
		if list := d.Unreadable(); len(list) != 1 || list[0].Path != "." || !list[0].Dir {
			t.Errorf("poll=%v: Unreadable() = %+v, want the root", poll, list)
		}
		writeFile(t, filepath.Join(dir, "b.log"), ev("02:00")+"\n")
		now = now.Add(RetryMax)
		if got, want := summary(readAll(t, d, 100)), "b.log@0:"+ev("02:00")+"\n"; got != want {
			t.Errorf("poll=%v: root back: got\n%s\nwant\n%s", poll, got, want)
		}
		if list := d.Unreadable(); len(list) != 0 {
			t.Errorf("poll=%v: Unreadable() = %+v with the root back", poll, list)
		}
		os.RemoveAll(dir)
		writeFile(t, filepath.Join(dir, "a.log"), fmt.Sprintln(ev("01:00")))
	}
}
