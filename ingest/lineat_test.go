package ingest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestReadLineAt(t *testing.T) {
	dir := t.TempDir()
	long := strings.Repeat("a", 5000)
	data := "first\n" + long + "\nlast"
	if err := os.WriteFile(filepath.Join(dir, "x.ndjson"), []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, source, file string
		offset             int64
		prefix             string
		max                int
		want, err          string
	}{
		{"a long line whole", dir, "x.ndjson", 6, "aaaa", 10000, long, ""},
		{"the last line without a newline", dir, "x.ndjson", int64(len(data) - 4), "la", 100, "last", ""},
		{"a glob source", filepath.Join(dir, "*.ndjson"), "x.ndjson", 0, "fi", 100, "first", ""},
		{"still too long", dir, "x.ndjson", 6, "aaaa", 4999, "", "longer than 4999"},
		{"other bytes now", dir, "x.ndjson", 6, "bbbb", 10000, "", "other bytes"},
		{"gone", dir, "y.ndjson", 0, "", 100, "", "no such file"},
		{"compressed", dir, "x.ndjson.gz", 0, "", 100, "", "compressed"},
		{"s3", "s3://b/p", "x.ndjson", 0, "", 100, "", "S3"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ReadLineAt(tc.source, tc.file, tc.offset, []byte(tc.prefix), tc.max)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("got %q, %v; want an error with %q", got, err, tc.err)
				}
				return
			}
			if err != nil || string(got) != tc.want {
				t.Fatalf("got %d bytes, %v; want %d bytes", len(got), err, len(tc.want))
			}
		})
	}
}
