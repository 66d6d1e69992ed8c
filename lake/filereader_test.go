package lake

import (
	"os"
	"path/filepath"
	rtmetrics "runtime/metrics"
	"strings"
	"testing"

	"tidemark/lake/store"
)

// FuzzReadFile feeds arbitrary bytes to the data file reader: it must
// return rows or an error naming the file, never panic.
func FuzzReadFile(f *testing.F) {
	dir := f.TempDir()
	st, err := store.OpenDir(dir)
	if err != nil {
		f.Fatal(err)
	}
	df := writeTestFile(f, st, 20)
	valid, err := os.ReadFile(filepath.Join(dir, "t", df.Path))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(valid)
	f.Add(valid[:len(valid)-3])
	f.Add([]byte("PAR1PAR1"))
	f.Fuzz(func(t *testing.T, data []byte) {
		dir := t.TempDir()
		st, err := store.OpenDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Join(dir, "t"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "t", "x.parquet"), data, 0o644); err != nil {
			t.Fatal(err)
		}
		before := allocatedBytes()
		if _, err := readTestFile(t, st, "t/x.parquet"); err != nil && !strings.Contains(err.Error(), "t/x.parquet") {
			t.Errorf("got error %v, want it to name t/x.parquet", err)
		}
		// A small corrupt file must not make the reader allocate as if it
		// were huge (sizes in its metadata are not to be trusted).
		if n := allocatedBytes() - before; n > 64<<20 {
			t.Errorf("reading %d bytes allocated %d MiB", len(data), n>>20)
		}
	})
}

// allocatedBytes is the process's cumulative heap allocation.
func allocatedBytes() uint64 {
	s := []rtmetrics.Sample{{Name: "/gc/heap/allocs:bytes"}}
	rtmetrics.Read(s)
	return s[0].Value.Uint64()
}
