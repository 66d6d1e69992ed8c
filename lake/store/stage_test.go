package store_test

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"tidemark/lake/store"
)

// TestDirStage checks that a staged file sits in the hidden temp root (never
// listed) until published, that Publish puts it in place whole, that a
// failed Publish leaves no temp file behind, and that a file staged
// elsewhere is refused and left alone.
func TestDirStage(t *testing.T) {
	root := t.TempDir()
	d, err := store.OpenDir(root)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	f, err := d.Stage()
	if err != nil {
		t.Fatal(err)
	}
	if name := f.Name(); strings.HasSuffix(name, ".parquet") || filepath.Dir(filepath.Dir(name)) != root {
		t.Errorf("staged file %s: want a temp name in a hidden directory of the root", name)
	}
	if _, err := f.WriteString("hello"); err != nil {
		t.Fatal(err)
	}
	if infos, err := d.List(ctx, ""); err != nil || len(infos) != 0 {
		t.Errorf("List while staged: got %v, %v, want nothing", infos, err)
	}
	if err := d.Publish(ctx, "t/p=1/a.zstd.parquet", f); err != nil {
		t.Fatal(err)
	}
	got, err := store.ReadAll(ctx, d, "t/p=1/a.zstd.parquet")
	if err != nil || string(got) != "hello" {
		t.Errorf("published object: got %q, %v, want %q", got, err, "hello")
	}

	bad, err := d.Stage()
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Publish(ctx, "../up", bad); !errors.Is(err, fs.ErrInvalid) {
		t.Errorf("publish under an invalid key: got %v, want fs.ErrInvalid", err)
	}
	other, err := os.CreateTemp(t.TempDir(), "x")
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Publish(ctx, "t/b", other); err == nil {
		t.Error("publish of a file not staged here: got nil, want an error")
	}
	if _, err := os.Stat(other.Name()); err != nil {
		t.Errorf("a file not staged here was touched: %v", err)
	}

	if s := strings.Join(filesUnder(t, root), " "); s != "t/p=1/a.zstd.parquet" {
		t.Errorf("files on disk: got [%s], want [t/p=1/a.zstd.parquet]", s)
	}
}
