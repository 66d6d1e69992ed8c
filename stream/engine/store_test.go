package engine

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestStoreMatchesMemory: over random runs an engine on a Store (MemStore,
// no I/O) emits the same windows, counts the same open pairs, writes the
// same changelogs and byte-identical snapshots (its own streamed from a
// view of the store too) as the memory engine, batch by batch, flushed or
// left unflushed across batches, drains to the same output, and a restart
// on the store it left (OpenStore with the flush's tag) reuses it and holds
// the memory engine's state. (stream's TestPebbleMatchesMemory checks the
// same against Pebble.)
func TestStoreMatchesMemory(t *testing.T) {
	runs := 60
	if testing.Short() {
		runs = 20
	}
	for seed := range runs {
		rng := rand.New(rand.NewPCG(uint64(seed), 6))
		cfg, batches := genRun(rng)
		mem := mustNew(t, cfg, nil)
		st := new(MemStore)
		disk, err := OpenStore(cfg, st, Resume{})
		if err != nil {
			t.Fatal(err)
		}
		for i, b := range batches {
			mres := mem.Process(slices.Clone(b.recs), b.now)
			dres := disk.Process(slices.Clone(b.recs), b.now)
			if err := disk.Err(); err != nil {
				t.Fatal(err)
			}
			if fmt.Sprint(mres.Emitted) != fmt.Sprint(dres.Emitted) || mres.OpenWindows != dres.OpenWindows || mres.Watermark != dres.Watermark {
				t.Fatalf("seed %d batch %d: emitted %v (%d open, W %d), memory %v (%d open, W %d)", seed, i, dres.Emitted, dres.OpenWindows, dres.Watermark, mres.Emitted, mres.OpenWindows, mres.Watermark)
			}
			mc, _ := mem.Changelog()
			dc, _ := disk.Changelog()
			if !bytes.Equal(mc, dc) {
				t.Fatalf("seed %d batch %d: the changelogs differ", seed, i)
			}
			want := mem.MarshalSnapshot()
			if got := disk.MarshalSnapshot(); !bytes.Equal(got, want) {
				t.Fatalf("seed %d batch %d: the store engine's snapshot differs from the memory engine's", seed, i)
			}
			if rng.IntN(3) == 0 {
				continue // leave the slab unflushed into the next batch
			}
			tag := FlushTag{StreamID: "s", BatchID: int64(i), Token: uint32(seed)}
			if err := disk.Flush(tag); err != nil {
				t.Fatal(err)
			}
			snap, err := disk.Snapshot()
			if err != nil {
				t.Fatal(err)
			}
			var buf bytes.Buffer
			n, sum, err := snap.WriteTo(&buf)
			snap.Release()
			if err != nil || !bytes.Equal(buf.Bytes(), want) || n != snap.Size || sum != snap.Sum {
				t.Fatalf("seed %d batch %d: the streamed snapshot (%d bytes, %v) differs from the memory engine's (%d)", seed, i, n, err, len(want))
			}
			if rng.IntN(4) == 0 { // restart on the store as the flush left it
				again, err := OpenStore(cfg, st, Resume{Tag: tag, Committed: true})
				if err != nil {
					t.Fatal(err)
				}
				if !again.Reused() {
					t.Fatalf("seed %d batch %d: the store was not reused", seed, i)
				}
				if got := again.MarshalSnapshot(); !bytes.Equal(got, want) {
					t.Fatalf("seed %d batch %d: the reopened store holds another state", seed, i)
				}
				disk = again
			}
		}
		mres, dres := mem.Drain(), disk.Drain()
		if fmt.Sprint(mres.Emitted) != fmt.Sprint(dres.Emitted) || dres.OpenWindows != 0 {
			t.Fatalf("seed %d: the drains differ (%d and %d windows, %d left open)", seed, len(dres.Emitted), len(mres.Emitted), dres.OpenWindows)
		}
	}
}

// TestStoreRebuiltFromCheckpoint: a store whose marker names another
// state is cleared and rebuilt from the committed snapshot and changelogs.
func TestStoreRebuiltFromCheckpoint(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 3))
	cfg, batches := genRun(rng)
	mem := mustNew(t, cfg, nil)
	mid := len(batches) / 2
	var snap *Encoded
	var changes []*Changes
	for i, b := range batches {
		mem.Process(slices.Clone(b.recs), b.now)
		if i == mid {
			var err error
			if snap, err = DecodeState(mem.MarshalSnapshot()); err != nil {
				t.Fatal(err)
			}
		} else if i > mid {
			changes = append(changes, mem.Changes())
		}
	}
	st := new(MemStore)
	stale, err := OpenStore(cfg, st, Resume{})
	if err != nil {
		t.Fatal(err)
	}
	if err := stale.Flush(FlushTag{StreamID: "other", BatchID: 1}); err != nil {
		t.Fatal(err)
	}
	e, err := OpenStore(cfg, st, Resume{Tag: FlushTag{StreamID: "s", BatchID: 9}, Committed: true, Snapshot: snap, Changelogs: changes})
	if err != nil {
		t.Fatal(err)
	}
	if e.Reused() {
		t.Fatal("another stream's store was reused")
	}
	if !bytes.Equal(e.MarshalSnapshot(), mem.MarshalSnapshot()) {
		t.Fatal("the rebuilt store holds another state than the run's")
	}
}
