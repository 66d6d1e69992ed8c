package ingest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"tidemark"
)

// A file read to its end gives back its descriptor and read buffer, so a
// source that has seen many files (rotation over months) holds memory only
// for the files still being read.
func TestDirReleasesFinishedFiles(t *testing.T) {
	dir := t.TempDir()
	for f := 0; f < 5; f++ {
		var lines []byte
		for i := 0; i < 10; i++ {
			lines = fmt.Appendf(lines, `{"event_time":"2026-01-01T00:00:%02dZ"}`+"\n", i)
		}
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("f%d.ndjson", f)), lines, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, once := range []bool{true, false} {
		src, err := Open(context.Background(), dir, SourceConfig{Once: once, PollOnly: true}, Position{})
		if err != nil {
			t.Fatal(err)
		}
		d := src.(*DirSource)
		var recs []tidemark.Record
		for range 20 { // batches of exactly one file's lines: the end is hit on a boundary
			if recs, err = d.Read(context.Background(), recs[:0], 10); err != nil {
				t.Fatal(err)
			}
		}
		for path, st := range d.files {
			if st.r != nil || len(st.closers) > 0 {
				t.Errorf("once=%v: %s still holds a reader after being read to its end", once, path)
			}
		}
		if err := src.Close(); err != nil {
			t.Fatal(err)
		}
	}
}
