package ingest

import (
	"bytes"
	"context"
	"path/filepath"
	"testing"

	"github.com/klauspost/compress/gzip"
)

// TestSizes: a --once directory reports each file's size at Open (what it
// reads, even if the file grows), in path order, compressed ones marked.
func TestSizes(t *testing.T) {
	dir := t.TempDir()
	a := ev("00") + "\n" + ev("01") + "\n"
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
	appendFile(t, filepath.Join(dir, "b.ndjson"), ev("04")+"\n") // after Open: not read with Once
	got := src.(Sizer).Sizes()
	want := []FileSize{{Path: "a.ndjson", Size: int64(len(a))}, {Path: "b.ndjson", Size: int64(len(b))}, {Path: "c.ndjson.gz", Size: int64(gz.Len()), Compressed: true}}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("got %v, want %v", got[i], want[i])
		}
	}
}

// TestS3Sizes: an S3 source reports each listed object's size, in key order.
func TestS3Sizes(t *testing.T) {
	f := newS3Fix(t)
	a, _ := s3Lines("a.ndjson", "a", 3)
	z := s3Gzip(t, a)
	f.put(t, "b.ndjson.gz", z)
	info := f.put(t, "a.ndjson", a)
	f.clock.set(info.LastModified)
	s := f.open(t, "", SourceConfig{Once: true}, s3Options{}, Position{})
	got := s.Sizes()
	want := []FileSize{{Path: "a.ndjson", Size: int64(len(a))}, {Path: "b.ndjson.gz", Size: int64(len(z)), Compressed: true}}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Errorf("got %v, want %v", got, want)
	}
}
