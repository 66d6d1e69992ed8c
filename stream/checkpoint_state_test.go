package stream

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"tidemark"
	"tidemark/lake/store"
	"tidemark/stream/engine"
)

// ckRun is a random run for the checkpoint tests: many keys, so states are
// large next to what a batch changes.
func ckRun(rng *rand.Rand) (engine.Config, []batchIn) {
	size := 1 + rng.Int64N(30)
	slide := size
	if rng.IntN(3) == 0 {
		slide = 1 + rng.Int64N(size)
	}
	cfg := engine.Config{Window: tidemark.WindowSpec{Size: size, Slide: slide}, Lateness: time.Duration(rng.Int64N(60)) * time.Microsecond, LateRule: engine.LateRule(rng.IntN(2)), OutputMode: engine.OutputMode(rng.IntN(2))}
	nkeys := 1 + rng.IntN(300)
	var batches []batchIn
	clock := rng.Int64N(1000)
	now := time.Unix(1_700_000_000, 0)
	for range 10 + rng.IntN(60) {
		var recs []tidemark.Record
		for range rng.IntN(40) {
			clock += rng.Int64N(3)
			recs = append(recs, tidemark.Record{
				Source:    fmt.Sprintf("s%d", rng.IntN(2)),
				EventTime: clock - rng.Int64N(80),
				Key:       tidemark.MakeKey(tidemark.KeyPart{Value: fmt.Sprintf("u%d", rng.IntN(nkeys))}),
				Value:     float64(rng.IntN(100)), HasValue: rng.IntN(4) > 0,
			})
		}
		now = now.Add(time.Second)
		batches = append(batches, batchIn{recs: recs, now: now})
	}
	return cfg, batches
}

// ckHarness drives the runner's checkpoint protocol on a real directory
// store, batch by batch, with crashes at chosen points.
type ckHarness struct {
	t   *testing.T
	st  store.Store
	cfg engine.Config
	ck  *checkpoint
	eng *engine.Engine
	max int // maxChangelogs of every checkpoint opened

	local StateOptions // the engine's state store (zero: memory)
	id    string       // the stream id a Pebble state's marker records
}

// restart opens the checkpoint afresh, as a new process does: recover,
// sweep, rebuild the engine, and replay a pending batch.
func (h *ckHarness) restart(ctx context.Context, batches []batchIn) (next int) {
	if err := h.eng.Close(); err != nil { // the process is gone: so is its hold on the local state
		h.t.Fatal(err)
	}
	h.ck = &checkpoint{st: h.st, maxChangelogs: h.max, id: h.id}
	rec, err := h.ck.recover(ctx)
	if err != nil {
		h.t.Fatalf("recover: %v", err)
	}
	next = 0
	if rec.commit != nil {
		next = int(rec.commit.BatchID) + 1
		if err := h.ck.sweep(ctx, rec.commit.BatchID); err != nil {
			h.t.Fatalf("sweep: %v", err)
		}
	}
	if h.eng, err = rec.openEngine(h.cfg, h.local, h.id); err != nil {
		h.t.Fatalf("rebuild the engine: %v", err)
	}
	if rec.pending != nil {
		id := rec.pending.BatchID
		h.batch(ctx, int(id), batches[id], "")
		next = int(id) + 1
	}
	return next
}

// batch runs batch id through the protocol; crash names the point where the
// process dies: "" (none), "before-commit" (state file written, no commit
// entry) or "before-cleanup" (committed, nothing deleted).
func (h *ckHarness) batch(ctx context.Context, id int, b batchIn, crash string) {
	if err := h.ck.write(ctx, batchKey("offsets", int64(id)), offsetsEntry{BatchID: int64(id)}); err != nil {
		h.t.Fatal(err)
	}
	h.eng.Process(slices.Clone(b.recs), b.now)
	if crash == "before-commit" {
		if _, err := h.ck.writeState(ctx, int64(id), h.eng, nil); err != nil {
			h.t.Fatal(err)
		}
		return
	}
	if err := h.ck.commit(ctx, int64(id), nil, h.eng, nil); err != nil {
		h.t.Fatal(err)
	}
	if crash == "before-cleanup" {
		return
	}
	if err := h.ck.cleanup(ctx, int64(id)); err != nil {
		h.t.Fatal(err)
	}
}

// TestCheckpointRestartProperty: over random runs with crashes before a
// commit entry and between a commit (often a snapshot's) and its cleanup,
// the state rebuilt from snapshot + changelogs after every restart equals
// the full state of an uninterrupted engine, and the checkpoint holds no
// more state files than the last commit's chain.
func TestCheckpointRestartProperty(t *testing.T) {
	runs := 12
	if testing.Short() {
		runs = 6
	}
	for seed := range runs {
		checkRestarts(t, uint64(seed), nil)
	}
}

// checkRestarts runs the restart property for one seed. With local set, the
// engine keeps its state in Pebble, and local is called before each restart
// to do what it will to the database (which h.local names).
func checkRestarts(t *testing.T, seed uint64, local func(rng *rand.Rand, h *ckHarness)) {
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(seed, 11))
	cfg, batches := ckRun(rng)
	ref := mustNew(t, cfg, nil)
	var want [][]byte // want[i]: the full state after batch i
	for _, b := range batches {
		ref.Process(slices.Clone(b.recs), b.now)
		s, _ := ref.State().MarshalBinary()
		want = append(want, s)
	}
	dir, err := store.OpenDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	h := &ckHarness{t: t, st: dir, cfg: cfg, max: []int{0, 1, 3}[rng.IntN(3)], id: "stream-a"}
	if local != nil {
		h.local = StateOptions{Store: StatePebble, Dir: t.TempDir()}
	}
	restart := func() int {
		if local != nil {
			local(rng, h)
		}
		return h.restart(ctx, batches)
	}
	next := restart()
	crashes := 0
	for next < len(batches) {
		crash := ""
		if rng.IntN(4) == 0 {
			crash = []string{"before-commit", "before-cleanup"}[rng.IntN(2)]
		}
		h.batch(ctx, next, batches[next], crash)
		if crash == "" && rng.IntN(6) != 0 {
			next++
			continue
		}
		crashes++
		next = restart()
		got, _ := h.eng.State().MarshalBinary()
		if !bytes.Equal(got, want[next-1]) {
			t.Fatalf("seed %d: after a crash %q at batch %d, the rebuilt state differs from the full state", seed, crash, next-1)
		}
		files, _ := dir.List(ctx, "state/")
		if chainLen := 1 + h.ck.chain.Changelogs; len(files) != chainLen {
			t.Fatalf("seed %d: %d state files after the sweep, the chain has %d", seed, len(files), chainLen)
		}
	}
	restart()
	got, _ := h.eng.State().MarshalBinary()
	if !bytes.Equal(got, want[len(want)-1]) {
		t.Fatalf("seed %d (%d crashes): the final rebuilt state differs from the full state", seed, crashes)
	}
	if err := h.eng.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestCheckpointChangelogRule: with a large state and small batches, most
// batches write changelogs far smaller than the state, and snapshots come
// as the rule says.
func TestCheckpointChangelogRule(t *testing.T) {
	ctx := context.Background()
	dir, _ := store.OpenDir(t.TempDir())
	ck := &checkpoint{st: dir}
	e := mustNew(t, engine.Config{Window: tidemark.WindowSpec{Size: 1000}, Lateness: (1 << 30) * time.Microsecond}, nil)
	var recs []tidemark.Record
	for i := range 5000 {
		recs = append(recs, tidemark.Record{Source: "s", EventTime: 1, Key: tidemark.MakeKey(tidemark.KeyPart{Value: fmt.Sprintf("user-%d", i)})})
	}
	e.Process(recs, t0)
	if err := ck.commit(ctx, 0, nil, e, nil); err != nil {
		t.Fatal(err)
	}
	first := ck.takeWritten()
	snapshots := 0
	for id := int64(1); id <= 200; id++ {
		e.Process(recs[id:id+10], t0)
		if err := ck.commit(ctx, id, nil, e, nil); err != nil {
			t.Fatal(err)
		}
		if err := ck.cleanup(ctx, id); err != nil {
			t.Fatal(err)
		}
		n := ck.takeWritten()
		if ck.chain.Snapshot == id {
			snapshots++
			continue
		}
		if n > first/20 {
			t.Fatalf("batch %d touching 10 of 5000 pairs wrote %d checkpoint bytes (the snapshot was %d)", id, n, first)
		}
	}
	if snapshots != 200/(maxChangelogs+1) {
		t.Errorf("%d snapshots in 200 small batches, want one per %d changelogs", snapshots, maxChangelogs)
	}
}

// TestCheckpointDamage: a damaged state file is an error naming it; a
// damaged last commit entry is recovered by replaying its batch when the
// previous commit's chain is intact.
func TestCheckpointDamage(t *testing.T) {
	ctx := context.Background()
	// A large first batch, then small ones: a snapshot, then changelogs.
	cfg := engine.Config{Window: tidemark.WindowSpec{Size: 100}, Lateness: 1000 * time.Microsecond}
	var batches []batchIn
	for b := range 8 {
		var recs []tidemark.Record
		for i := range 300 {
			if b == 0 || i%100 == b {
				recs = append(recs, tidemark.Record{Source: "s", EventTime: int64(b*10 + i%7), Key: tidemark.MakeKey(tidemark.KeyPart{Value: fmt.Sprintf("u%d", i)})})
			}
		}
		batches = append(batches, batchIn{recs: recs, now: t0.Add(time.Duration(b) * time.Second)})
	}
	setup := func(t *testing.T) (*ckHarness, string) {
		root := t.TempDir()
		dir, _ := store.OpenDir(root)
		h := &ckHarness{t: t, st: dir, cfg: cfg}
		h.restart(ctx, batches)
		for i := range 8 {
			h.batch(ctx, i, batches[i], "")
		}
		if h.ck.chain.Snapshot != 0 || h.ck.chain.Changelogs != 7 {
			t.Fatalf("want snapshot 0 and 7 changelogs, got %+v", h.ck.chain)
		}
		return h, root
	}
	damage := func(t *testing.T, path string) {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		data[len(data)/2] ^= 0x55
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	// replayed restarts h and checks that batch 7 was replayed from its
	// logged input, to the state want.
	replayed := func(t *testing.T, h *ckHarness, want []byte) {
		t.Helper()
		if next := h.restart(ctx, batches); next != 8 {
			t.Fatalf("restart continues at %d, want 8 (batch 7 replayed)", next)
		}
		if got, _ := h.eng.State().MarshalBinary(); !bytes.Equal(got, want) {
			t.Fatal("the state after replaying batch 7 differs")
		}
	}
	t.Run("middle changelog", func(t *testing.T) {
		h, root := setup(t)
		name := changelogKey(h.ck.chain.Snapshot + 1)
		damage(t, filepath.Join(root, name))
		_, err := (&checkpoint{st: h.st}).recover(ctx)
		var bad *corruptError
		if !errors.As(err, &bad) || !strings.Contains(err.Error(), name) {
			t.Fatalf("got %v, want an error naming %s", err, name)
		}
	})
	t.Run("truncated snapshot", func(t *testing.T) {
		h, root := setup(t)
		name := snapshotKey(h.ck.chain.Snapshot)
		if err := os.Truncate(filepath.Join(root, name), 7); err != nil {
			t.Fatal(err)
		}
		_, err := (&checkpoint{st: h.st}).recover(ctx)
		if err == nil || !strings.Contains(err.Error(), name) {
			t.Fatalf("got %v, want an error naming %s", err, name)
		}
	})
	t.Run("last commit entry", func(t *testing.T) {
		h, root := setup(t)
		want, _ := h.eng.State().MarshalBinary()
		damage(t, filepath.Join(root, batchKey("commits", 7)))
		replayed(t, h, want)
	})
	t.Run("pending write-ahead entry", func(t *testing.T) {
		h, root := setup(t)
		name := batchKey("offsets", 8)
		if err := os.WriteFile(filepath.Join(root, name), []byte(`{"batch_id":8,`), 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := (&checkpoint{st: h.st}).recover(ctx)
		if err == nil || !strings.Contains(err.Error(), name) {
			t.Fatalf("got %v, want an error naming %s", err, name)
		}
	})
	t.Run("last state file", func(t *testing.T) {
		h, root := setup(t)
		want, _ := h.eng.State().MarshalBinary()
		damage(t, filepath.Join(root, changelogKey(7)))
		h.restart(ctx, batches)
		if got, _ := h.eng.State().MarshalBinary(); !bytes.Equal(got, want) {
			t.Fatal("the state after replaying the batch with the damaged changelog differs")
		}
	})
	// A well-formed changelog of the same size but other content (a file
	// from another copy of the checkpoint, say) is not the one the commit
	// recorded: its frame CRC differs, so the batch is replayed rather
	// than the file's state taken.
	t.Run("last state file replaced", func(t *testing.T) {
		h, root := setup(t)
		want, _ := h.eng.State().MarshalBinary()
		path := filepath.Join(root, changelogKey(7))
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		var c engine.Changes
		if err := c.UnmarshalBinary(data); err != nil || len(c.Upserts) == 0 {
			t.Fatalf("changelog 7: %v, %d upserts", err, len(c.Upserts))
		}
		c.Upserts[0].Agg.Sum += 1000 // a float: the encoding keeps its size
		other, _ := c.MarshalBinary()
		if len(other) != len(data) {
			t.Fatalf("the altered changelog has %d bytes, want %d", len(other), len(data))
		}
		if err := os.WriteFile(path, other, 0o600); err != nil {
			t.Fatal(err)
		}
		replayed(t, h, want)
	})
	// Commit entries written before recorded the whole file's CRC-32C; they
	// still load.
	t.Run("whole-file CRC of an older entry", func(t *testing.T) {
		h, root := setup(t)
		want, _ := h.eng.State().MarshalBinary()
		data, err := os.ReadFile(filepath.Join(root, changelogKey(7)))
		if err != nil {
			t.Fatal(err)
		}
		var entry commitEntry
		if err := h.ck.read(ctx, batchKey("commits", 7), &entry); err != nil {
			t.Fatal(err)
		}
		entry.State.CRC = crc32.Checksum(data, castagnoli)
		if err := h.ck.write(ctx, batchKey("commits", 7), entry); err != nil {
			t.Fatal(err)
		}
		rec, err := (&checkpoint{st: h.st}).recover(ctx)
		if err != nil || rec.commit.BatchID != 7 || rec.pending != nil {
			t.Fatalf("recover: %v; want commit 7 and nothing pending", err)
		}
		e, err := rec.engine(h.cfg)
		if err != nil {
			t.Fatal(err)
		}
		if got, _ := e.State().MarshalBinary(); !bytes.Equal(got, want) {
			t.Fatal("the state from the older entry differs")
		}
	})
}

// TestLatestCommitted reads a checkpoint as inspection does: the folded
// state equals the engine's, and nothing is written or deleted.
func TestLatestCommitted(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	dir, _ := store.OpenDir(root)
	cfg, batches := ckRun(rand.New(rand.NewPCG(8, 8)))
	h := &ckHarness{t: t, st: dir, cfg: cfg, max: 3}
	h.restart(ctx, batches)
	for i := range 9 {
		h.batch(ctx, i, batches[i], "")
	}
	h.batch(ctx, 9, batches[9], "before-commit")
	before, _ := dir.List(ctx, "")
	got, err := latestCommitted(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	if got.BatchID != 8 || got.Pending == nil || got.Pending.BatchID != 9 {
		t.Fatalf("got batch %d, pending %+v; want 8 and 9", got.BatchID, got.Pending)
	}
	ref := mustNew(t, cfg, nil)
	for _, b := range batches[:9] {
		ref.Process(slices.Clone(b.recs), b.now)
	}
	want, _ := ref.State().MarshalBinary()
	if data, _ := got.State.MarshalBinary(); !bytes.Equal(data, want) {
		t.Fatal("the inspected state differs from the engine's")
	}
	if after, _ := dir.List(ctx, ""); len(after) != len(before) {
		t.Fatalf("inspection changed the checkpoint: %d files before, %d after", len(before), len(after))
	}
	empty, _ := store.OpenDir(t.TempDir())
	if got, err := latestCommitted(ctx, empty); err != nil || got.BatchID != -1 || got.State != nil {
		t.Fatalf("empty checkpoint: got %+v, %v", got, err)
	}
}

// TestCheckpointReadsInlineState: a checkpoint written before state/
// existed (the whole state inline in the commit entry) resumes, and the
// next batch writes a snapshot.
func TestCheckpointReadsInlineState(t *testing.T) {
	ctx := context.Background()
	dir, _ := store.OpenDir(t.TempDir())
	cfg, batches := ckRun(rand.New(rand.NewPCG(9, 9)))
	ref := mustNew(t, cfg, nil)
	ref.Process(slices.Clone(batches[0].recs), batches[0].now)
	blob, _ := ref.State().MarshalBinary()
	old := &checkpoint{st: dir}
	if err := old.write(ctx, batchKey("commits", 0), commitEntry{BatchID: 0, Engine: blob}); err != nil {
		t.Fatal(err)
	}
	h := &ckHarness{t: t, st: dir, cfg: cfg}
	if next := h.restart(ctx, batches); next != 1 {
		t.Fatalf("resumes at %d, want 1", next)
	}
	if got, _ := h.eng.State().MarshalBinary(); !bytes.Equal(got, blob) {
		t.Fatal("the inline state did not resume")
	}
	h.batch(ctx, 1, batches[1], "")
	if h.ck.chain.Snapshot != 1 {
		t.Fatalf("the first batch after an inline state wrote %s, want a snapshot", h.ck.chain.File)
	}
}

// FuzzCheckpointCommit feeds arbitrary bytes as the newest commit entry
// beside a valid state chain: recovery never panics, and what it accepts
// rebuilds an engine or is rejected with an error.
func FuzzCheckpointCommit(f *testing.F) {
	f.Add([]byte(`{"batch_id":1,"state":{"snapshot":0,"file":"state/00000000000000000001.changelog","bytes":10,"crc32c":1,"changelogs":1}}`))
	f.Add([]byte(`{"batch_id":1,"state":{"snapshot":1,"changelogs":0}}`))
	f.Add([]byte(`{"batch_id":1,"engine":"AAAA"}`))
	f.Add([]byte(`{}`))
	cfg := engine.Config{Window: tidemark.WindowSpec{Size: 10}}
	// The chain is written once; each input only replaces commit 1 (recovery
	// reads and never writes).
	ctx := context.Background()
	dir, _ := store.OpenDir(f.TempDir())
	e, _ := engine.New(cfg, nil)
	ck := &checkpoint{st: dir}
	e.Process([]tidemark.Record{{Source: "s", EventTime: 5, Key: "k"}}, t0)
	if err := ck.commit(ctx, 0, nil, e, nil); err != nil {
		f.Fatal(err)
	}
	e.Process([]tidemark.Record{{Source: "s", EventTime: 7, Key: "k"}}, t0)
	if _, err := ck.writeState(ctx, 1, e, nil); err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, commit []byte) {
		if err := dir.Put(ctx, batchKey("commits", 1), bytes.NewReader(commit), int64(len(commit))); err != nil {
			t.Fatal(err)
		}
		rec, err := (&checkpoint{st: dir}).recover(ctx)
		if err != nil {
			return
		}
		if eng, err := rec.engine(cfg); err == nil {
			eng.Process([]tidemark.Record{{Source: "s", EventTime: 100}}, t0)
		}
	})
}

// TestSnapshotDue is the snapshot rule's arithmetic: a snapshot when the
// chain would outgrow twice the snapshot the state would make now, the
// last one scaled by open rows; commit entries without snapshot_rows keep
// the rule before it.
func TestSnapshotDue(t *testing.T) {
	snap := func(bytes, rows, changelogBytes int64, changelogs int) *stateRef {
		return &stateRef{SnapshotBytes: bytes, SnapshotRows: rows, ChangelogBytes: changelogBytes, Changelogs: changelogs}
	}
	for _, c := range []struct {
		name    string
		prev    *stateRef
		changes int64
		open    int64
		want    bool
	}{
		{"no snapshot yet", nil, 10, 10, true},
		{"changelog limit", snap(1000, 100, 0, 100), 1, 100, true},
		{"steady state, chain under twice", snap(1000, 100, 900, 9), 99, 100, false},
		{"steady state, chain past twice", snap(1000, 100, 950, 9), 100, 100, true},
		{"growing state: the chain grows with it", snap(2000, 40_000, 7000, 3), 2400, 190_000, false},
		{"shrunk state: a small snapshot is due", snap(10_000, 1000, 100, 1), 100, 10, true},
		{"entry before snapshot_rows: changelogs under the snapshot", snap(1000, 0, 500, 1), 400, 1_000_000, false},
		{"entry before snapshot_rows: changelogs past the snapshot", snap(1000, 0, 500, 1), 600, 1_000_000, true},
	} {
		if got := snapshotDue(c.prev, c.changes, c.open, maxChangelogs); got != c.want {
			t.Errorf("%s: snapshotDue = %v, want %v", c.name, got, c.want)
		}
	}
}
