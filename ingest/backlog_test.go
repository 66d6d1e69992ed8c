package ingest

import (
	"bytes"
	"context"
	"path/filepath"
	"testing"

	"github.com/klauspost/compress/gzip"
)

// TestSizesUnread follows the backlog of a --once directory as it is read:
// plain files count down by bytes, a compressed file counts whole until done.
func TestSizesUnread(t *testing.T) {
	dir := t.TempDir()
	a := ev("00") + "\n" + ev("01") + "\n" // 2 lines
	b := ev("02") + "\n"
	writeFile(t, filepath.Join(dir, "a.ndjson"), a)
	writeFile(t, filepath.Join(dir, "b.ndjson"), b)
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write([]byte(ev("03") + "\n"))
	zw.Close()
	writeFile(t, filepath.Join(dir, "c.ndjson.gz"), gz.String())

	src, err := Open(context.Background(), dir, SourceConfig{Clock: fixedClock, Once: true}, Position{})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	sizes := src.(Sizer).Sizes()
	want := []FileSize{{Path: "a.ndjson", Size: int64(len(a))}, {Path: "b.ndjson", Size: int64(len(b))}, {Path: "c.ndjson.gz", Size: int64(gz.Len()), Compressed: true}}
	if len(sizes) != len(want) {
		t.Fatalf("got %v, want %v", sizes, want)
	}
	for i := range want {
		if sizes[i] != want[i] {
			t.Fatalf("got %v, want %v", sizes, want)
		}
	}
	total := int64(len(a) + len(b) + gz.Len())
	steps := []struct {
		read  int
		bytes int64
		files int
	}{
		{0, total, 3},
		{1, total - int64(len(ev("00"))+1), 3},
		{1, int64(len(b) + gz.Len()), 2}, // a read to its end
		{1, int64(gz.Len()), 1},
		{1, int64(gz.Len()), 1}, // its one line read, not yet its end
		{1, 0, 0},               // the end found: done
	}
	for i, s := range steps {
		if s.read > 0 {
			if _, err := src.Read(context.Background(), nil, s.read); err != nil {
				t.Fatal(err)
			}
		}
		gotBytes, gotFiles := Unread(sizes, src.Position())
		if gotBytes != s.bytes || gotFiles != s.files {
			t.Errorf("step %d: got %d bytes in %d files unread, want %d in %d", i, gotBytes, gotFiles, s.bytes, s.files)
		}
	}
}

// TestUnreadVanished: a file no longer in the position counts as read.
func TestUnreadVanished(t *testing.T) {
	sizes := []FileSize{{Path: "a", Size: 10}, {Path: "b", Size: 5}}
	got, n := Unread(sizes, Position{Files: []FilePosition{{Path: "b", Offset: 2}}})
	if got != 3 || n != 1 {
		t.Errorf("got %d bytes in %d files, want 3 in 1", got, n)
	}
}
