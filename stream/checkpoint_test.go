package stream

import (
	"context"
	"testing"

	"tidemark/lake/store"
)

// The checkpoint keeps only its newest entries: each batch deletes the one
// it pushes out, and a restart sweeps what a crash left behind.
func TestCheckpointKeepsNewestEntries(t *testing.T) {
	ctx := context.Background()
	dir, err := store.OpenDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ck := &checkpoint{st: dir}
	for id := int64(0); id < 20; id++ {
		for _, d := range []string{"offsets", "commits"} {
			if err := ck.write(ctx, batchKey(d, id), map[string]int64{"batch_id": id}); err != nil {
				t.Fatal(err)
			}
		}
		if id == 12 {
			continue // a crash between the commit and its cleanup
		}
		if err := ck.cleanup(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	ids, err := ck.batchIDs(ctx, "commits")
	if err != nil {
		t.Fatal(err)
	}
	if len(ids) != keepEntries+1 || ids[0] != 12-keepEntries {
		t.Fatalf("after a missed cleanup: %v", ids)
	}
	if err := ck.sweep(ctx, 19); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{"offsets", "commits"} {
		ids, err := ck.batchIDs(ctx, d)
		if err != nil {
			t.Fatal(err)
		}
		if len(ids) != keepEntries || ids[0] != 20-keepEntries {
			t.Errorf("%s after the sweep: %v, want the newest %d", d, ids, keepEntries)
		}
	}
}
