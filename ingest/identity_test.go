package ingest

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
)

// idLines returns n NDJSON lines with unique ids, from id first on.
func idLines(first, n int) string {
	var b strings.Builder
	for i := first; i < first+n; i++ {
		fmt.Fprintf(&b, `{"event_time":"2026-01-01T09:00:00Z","id":%d,"pad":"some text to make lines longer"}`+"\n", i)
	}
	return b.String()
}

// gzipFile compresses name into name+".gz" and removes name, as gzip(1)
// (and logrotate's compress) does.
func gzipFile(t *testing.T, name string) {
	t.Helper()
	data, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	zw.Write(data)
	zw.Close()
	writeFile(t, name+".gz", b.String())
	if err := os.Remove(name); err != nil {
		t.Fatal(err)
	}
}

func zstdBytes(t *testing.T, data string) string {
	t.Helper()
	var b bytes.Buffer
	zw, err := zstd.NewWriter(&b)
	if err != nil {
		t.Fatal(err)
	}
	zw.Write([]byte(data))
	zw.Close()
	return b.String()
}

func rename(t *testing.T, from, to string) {
	t.Helper()
	if err := os.Rename(from, to); err != nil {
		t.Fatal(err)
	}
}

// TestIdentityCompressedRotation is logrotate's compress + delaycompress:
// app.log -> app.log.1, then app.log.1 -> app.log.2 -> app.log.2.gz. The
// compressed file holds lines already read: it adds nothing (issue 31:
// 20,755 rows for 12,000 lines).
func TestIdentityCompressedRotation(t *testing.T) {
	dir := t.TempDir()
	name := filepath.Join(dir, "app.log")
	writeFile(t, name, idLines(0, 40))
	d := tailer(t, dir, SourceConfig{})
	if got := len(readAll(t, d, 1000)); got != 40 {
		t.Fatalf("first read: got %d records, want 40", got)
	}
	rename(t, name, name+".1")
	writeFile(t, name, idLines(40, 5))
	if got := rescanRead(t, d); strings.Count(got, "\n") != 5 {
		t.Fatalf("after rotation 1: got\n%s\nwant the 5 new lines", got)
	}
	// Rotation 2, as logrotate does it: shift, rename, then compress.
	rename(t, name+".1", name+".2")
	rename(t, name, name+".1")
	writeFile(t, name, idLines(45, 3))
	gzipFile(t, name+".2")
	got := rescanRead(t, d)
	if n := strings.Count(got, "\n"); n != 3 {
		t.Fatalf("after rotation 2 with compression: got %d records, want the 3 new lines:\n%s", n, got)
	}
	// A third: app.log.1 -> app.log.2.gz while app.log.2.gz -> app.log.3.gz.
	rename(t, name+".2.gz", name+".3.gz")
	rename(t, name+".1", name+".2")
	rename(t, name, name+".1")
	writeFile(t, name, idLines(48, 2))
	gzipFile(t, name+".2")
	if got := rescanRead(t, d); strings.Count(got, "\n") != 2 {
		t.Fatalf("after rotation 3: got\n%s\nwant the 2 new lines", got)
	}
}
