package store_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"tidemark/lake/store"
	"tidemark/lake/store/storetest"
)

func TestDir(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store {
		d, err := store.OpenDir(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		return d
	})
}

// TestDirLinkOnly runs the suite with PutIfAbsent on link(2), the fallback
// for filesystems without renameat2(RENAME_NOREPLACE).
func TestDirLinkOnly(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store {
		d, err := store.OpenDirLinkOnly(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		return d
	})
}

// TestDirNoTempLeft checks that temp files live only in the hidden root and
// none is left after puts, lost put-if-absent races and failed puts.
func TestDirNoTempLeft(t *testing.T) {
	for _, linkOnly := range []bool{false, true} {
		root := t.TempDir()
		open := store.OpenDir
		if linkOnly {
			open = store.OpenDirLinkOnly
		}
		d, err := open(root)
		if err != nil {
			t.Fatal(err)
		}
		ctx := t.Context()
		if err := d.Put(ctx, "t/a.zstd.parquet", strings.NewReader("x"), 1); err != nil {
			t.Fatal(err)
		}
		if err := d.PutIfAbsent(ctx, "t/_delta_log/0.json", []byte("x")); err != nil {
			t.Fatal(err)
		}
		if err := d.PutIfAbsent(ctx, "t/_delta_log/0.json", []byte("y")); err == nil {
			t.Fatal("second put-if-absent: got nil, want ErrExists")
		}
		if err := d.Put(ctx, "t/short", strings.NewReader("x"), 5); err == nil {
			t.Fatal("short put: got nil, want an error")
		}
		got := filesUnder(t, root)
		want := "[t/_delta_log/0.json t/a.zstd.parquet]"
		if s := strings.Join(got, " "); "["+s+"]" != want {
			t.Errorf("linkOnly=%v: files on disk: got [%s], want %s", linkOnly, s, want)
		}
	}
}

// filesUnder lists the files under root, slash-separated relative paths in
// walk order.
func filesUnder(t *testing.T, root string) []string {
	t.Helper()
	var got []string
	err := filepath.WalkDir(root, func(p string, e os.DirEntry, err error) error {
		if err == nil && !e.IsDir() {
			rel, _ := filepath.Rel(root, p)
			got = append(got, filepath.ToSlash(rel))
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return got
}
