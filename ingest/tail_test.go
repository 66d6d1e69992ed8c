package ingest

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fsnotify/fsnotify"
	"github.com/klauspost/compress/gzip"
)

// tailer opens a poll-only tailing source whose rescans the test drives.
func tailer(t *testing.T, dir string, cfg SourceConfig) *DirSource {
	t.Helper()
	cfg.PollOnly = true
	return openTest(t, dir, cfg, Position{}).(*DirSource)
}

func rescanRead(t *testing.T, d *DirSource) string {
	t.Helper()
	if err := d.Rescan(context.Background()); err != nil {
		t.Fatal(err)
	}
	return summary(readAll(t, d, 1000))
}

func positions(d *DirSource) string {
	var s []string
	for _, f := range d.Position().Files {
		s = append(s, f.Path+"="+itoa(f.Offset))
	}
	return strings.Join(s, " ")
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

func TestTailPartialLine(t *testing.T) {
	dir := t.TempDir()
	name := filepath.Join(dir, "app.log")
	writeFile(t, name, "one\ntw")
	d := tailer(t, dir, SourceConfig{})
	if got, want := rescanRead(t, d), "app.log@0:one[malformed]\n"; got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
	if got, want := positions(d), "app.log=4"; got != want {
		t.Errorf("got position %s, want %s", got, want)
	}
	if got := rescanRead(t, d); got != "" {
		t.Errorf("partial line: got %q, want nothing", got)
	}
	appendFile(t, name, "o\nthr")
	if got, want := rescanRead(t, d), "app.log@4:two[malformed]\n"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	appendFile(t, name, "ee\n")
	if got, want := rescanRead(t, d), "app.log@8:three[malformed]\n"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

func TestTailRenameRotation(t *testing.T) {
	dir := t.TempDir()
	name := filepath.Join(dir, "app.log")
	writeFile(t, name, "a1\n")
	d := tailer(t, dir, SourceConfig{})
	rescanRead(t, d)
	appendFile(t, name, "a2\n")
	if err := os.Rename(name, filepath.Join(dir, "app.log.1")); err != nil {
		t.Fatal(err)
	}
	appendFile(t, filepath.Join(dir, "app.log.1"), "a3\n")
	writeFile(t, name, "b1\n")
	want := "app.log@0:b1[malformed]\napp.log.1@3:a2[malformed]\napp.log.1@6:a3[malformed]\n"
	if got := rescanRead(t, d); got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
	if got, want := positions(d), "app.log=3 app.log.1=9"; got != want {
		t.Errorf("got position %s, want %s", got, want)
	}
}

func TestTailCopyTruncate(t *testing.T) {
	dir := t.TempDir()
	name := filepath.Join(dir, "app.log")
	writeFile(t, name, "first line\nsecond line\n")
	d := tailer(t, dir, SourceConfig{})
	rescanRead(t, d)
	if err := os.Truncate(name, 0); err != nil {
		t.Fatal(err)
	}
	appendFile(t, name, "new\n")
	if got, want := rescanRead(t, d), "app.log@0:new[malformed]\n"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

func TestTailInodeReuse(t *testing.T) {
	dir := t.TempDir()
	name := filepath.Join(dir, "app.log")
	writeFile(t, name, "aaaa\n")
	d := tailer(t, dir, SourceConfig{})
	rescanRead(t, d)
	// Same inode, different first bytes, longer than before: a new file.
	f, err := os.OpenFile(name, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("bbbb\ncccc\n")
	f.Close()
	if got, want := rescanRead(t, d), "app.log@0:bbbb[malformed]\napp.log@5:cccc[malformed]\n"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

func TestTailDeleteAndNewSubdir(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "a.log"), "x\n")
	d := tailer(t, dir, SourceConfig{})
	rescanRead(t, d)
	os.Remove(filepath.Join(dir, "a.log"))
	writeFile(t, filepath.Join(dir, "new", "deeper", "b.log"), "y\n")
	if got, want := rescanRead(t, d), "new/deeper/b.log@0:y[malformed]\n"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	if got, want := positions(d), "new/deeper/b.log=2"; got != want {
		t.Errorf("got position %s, want %s", got, want)
	}
}

func TestTailResumeAfterRestart(t *testing.T) {
	dir := t.TempDir()
	name := filepath.Join(dir, "app.log")
	writeFile(t, name, "a\nb\npart")
	d := tailer(t, dir, SourceConfig{})
	rescanRead(t, d)
	pos := d.Position()
	d.Close()
	if err := os.Rename(name, filepath.Join(dir, "app.log.1")); err != nil { // rotated while down
		t.Fatal(err)
	}
	appendFile(t, filepath.Join(dir, "app.log.1"), "ial\n")
	r := openTest(t, dir, SourceConfig{PollOnly: true}, pos).(*DirSource)
	if got, want := summary(readAll(t, r, 10)), "app.log.1@4:partial[malformed]\n"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

// TestTailNotify checks fsnotify wakes Wait for a file in a directory
// created after Open. It waits on events, not on time: the deadline only
// bounds a failure.
func TestTailNotify(t *testing.T) {
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	s := openTest(t, dir, SourceConfig{Clock: time.Now, Rescan: time.Hour}, Position{}).(*DirSource)
	if got := summary(readAll(t, s, 10)); got != "" {
		t.Fatalf("got %q from an empty directory", got)
	}
	writeFile(t, filepath.Join(dir, "sub", "a.log"), "")
	var got string
	for i := 0; got == "" && ctx.Err() == nil; i++ {
		if i == 1 {
			appendFile(t, filepath.Join(dir, "sub", "a.log"), "hello\n")
		}
		if err := s.Wait(ctx, time.Hour); err != nil {
			t.Fatal(err)
		}
		got = summary(readAll(t, s, 10))
	}
	if got != "sub/a.log@0:hello[malformed]\n" {
		t.Errorf("got %q, want the new line", got)
	}
}

func TestTailCompressedStillWritten(t *testing.T) {
	dir := t.TempDir()
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write([]byte("one\ntwo\n"))
	zw.Close()
	name := filepath.Join(dir, "a.log.gz")
	half := gz.Len() / 2
	writeFile(t, name, gz.String()[:half])
	d := tailer(t, dir, SourceConfig{})
	if got := rescanRead(t, d); got != "" {
		t.Errorf("half-written gzip: got %q, want nothing", got)
	}
	if d.hasData() {
		t.Errorf("got hasData true for an unchanged half-written gzip, want false")
	}
	appendFile(t, name, gz.String()[half:])
	if got, want := rescanRead(t, d), "a.log.gz@0:one[malformed]\na.log.gz@4:two[malformed]\n"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	if p := d.Position(); len(p.Files) != 1 || !p.Files[0].Done {
		t.Errorf("got position %+v, want the gzip done", p)
	}
}

func TestTailHandleEvent(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "a.ndjson"), "x\n")
	d := openTest(t, filepath.Join(dir, "*.ndjson"), SourceConfig{PollOnly: true}, Position{}).(*DirSource)
	tests := []struct {
		name    string
		op      fsnotify.Op
		woken   bool
		rescans bool
	}{
		{"a.ndjson", fsnotify.Write, true, false},
		{"b.log", fsnotify.Write, false, false},
		{"b.ndjson", fsnotify.Write, true, true},
		{".a.ndjson.swp", fsnotify.Create, false, false},
		{"a.ndjson", fsnotify.Chmod, false, false},
		{"sub", fsnotify.Create, true, true},
		{"a.ndjson", fsnotify.Rename, true, true},
	}
	for _, tt := range tests {
		d.needRescan = false
		woken := d.handleEvent(fsnotify.Event{Name: filepath.Join(dir, tt.name), Op: tt.op})
		if woken != tt.woken || d.needRescan != tt.rescans {
			t.Errorf("%s %s: got woken %v rescan %v, want %v %v", tt.op, tt.name, woken, d.needRescan, tt.woken, tt.rescans)
		}
	}
}
