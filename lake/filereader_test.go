package lake

import (
	"os"
	"path/filepath"
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
		if _, err := readTestFile(t, st, "t/x.parquet"); err != nil && !strings.Contains(err.Error(), "t/x.parquet") {
			t.Errorf("got error %v, want it to name t/x.parquet", err)
		}
	})
}
