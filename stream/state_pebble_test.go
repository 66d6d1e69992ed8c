package stream

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"

	"tidemark"
	"tidemark/stream/engine"
)

// newDiskEngine is a Pebble engine on a fresh database in dir.
func newDiskEngine(t testing.TB, cfg engine.Config, dir string) *engine.Engine {
	e, _ := newDiskEngineStore(t, cfg, dir)
	return e
}

// newDiskEngineStore is newDiskEngine returning its store too.
func newDiskEngineStore(t testing.TB, cfg engine.Config, dir string) (*engine.Engine, *pebbleStore) {
	t.Helper()
	st, err := openPebbleStore(StateOptions{Store: StatePebble, Dir: dir}, "stream-a")
	if err != nil {
		t.Fatalf("open the Pebble store: %v", err)
	}
	e, err := engine.OpenStore(cfg, st, engine.Resume{})
	if err != nil {
		t.Fatalf("open the Pebble engine: %v", err)
	}
	t.Cleanup(func() { e.Close() })
	return e, st
}

// encodeResults is a byte-exact rendering of results (NaN and the
// compensation included), for comparing two engines' output.
func encodeResults(rs []tidemark.Result) []byte {
	var b []byte
	for _, r := range rs {
		b = binary.AppendVarint(b, r.Window.Start)
		b = binary.AppendVarint(b, r.Window.End)
		b = binary.AppendUvarint(b, uint64(len(r.Key)))
		b = append(b, r.Key...)
		b = engine.AppendAgg(b, r.Agg)
		if r.Final {
			b = append(b, 1)
		} else {
			b = append(b, 0)
		}
	}
	return b
}

// TestPebbleKeyOrder: the database key of (start, key) sorts as
// CompareResults sorts, and decodes back, for keys with nulls, empty
// values, zero bytes and several parts.
func TestPebbleKeyOrder(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	alphabet := []string{"", "\x00", "\x00\x00", "\x01", "a", "a\x00", "ab", "b", "\xff", "a\x00b"}
	var rs []tidemark.Result
	for range 700 {
		var parts []tidemark.KeyPart
		for range rng.IntN(4) {
			if rng.IntN(5) == 0 {
				parts = append(parts, tidemark.KeyPart{Null: true})
			} else {
				parts = append(parts, tidemark.KeyPart{Value: alphabet[rng.IntN(len(alphabet))] + alphabet[rng.IntN(len(alphabet))]})
			}
		}
		start := rng.Int64N(5) - 2
		if rng.IntN(10) == 0 {
			start = []int64{tidemark.MinTime, tidemark.MaxTime - 10}[rng.IntN(2)]
		}
		rs = append(rs, tidemark.Result{Window: tidemark.Window{Start: start, End: start + 1}, Key: tidemark.MakeKey(parts...)})
	}
	for i := range rs {
		for j := range rs {
			a, b := rs[i], rs[j]
			want := tidemark.CompareResults(a, b)
			got := bytes.Compare(pairKey(nil, a.Window.Start, a.Key), pairKey(nil, b.Window.Start, b.Key))
			if want != got {
				t.Fatalf("%d %q vs %d %q: CompareResults %d, key bytes %d", a.Window.Start, a.Key, b.Window.Start, b.Key, want, got)
			}
		}
		start, key, err := decodePairKey(pairKey(nil, rs[i].Window.Start, rs[i].Key))
		if err != nil || start != rs[i].Window.Start || key != rs[i].Key {
			t.Fatalf("%q decodes to %d %q (%v)", rs[i].Key, start, key, err)
		}
	}
	for _, raw := range []tidemark.Key{"k", "\x01\x85", "\x01\x80\x00", "\x00junk"} { // never made by MakeKey
		if _, key, err := decodePairKey(pairKey(nil, 3, raw)); err != nil || key != raw {
			t.Fatalf("malformed key %q decodes to %q (%v)", raw, key, err)
		}
	}
}

// TestPebbleMatchesMemory: over random runs the Pebble engine emits the
// same windows, counts the same open pairs, writes the same changelogs and
// byte-identical snapshots (the memory engine's and its own scan) as the
// memory engine, batch by batch, flushed like the runner does or left
// unflushed across batches, and drains to the same output.
func TestPebbleMatchesMemory(t *testing.T) {
	runs := 60
	if testing.Short() {
		runs = 20
	}
	for seed := range runs {
		rng := rand.New(rand.NewPCG(uint64(seed), 5))
		cfg, batches := genRun(rng)
		if seed%2 == 1 {
			cfg, batches = ckRun(rng)
		}
		mem := mustNew(t, cfg, nil)
		disk := newDiskEngine(t, cfg, t.TempDir())
		for i, b := range batches {
			mres := mem.Process(slices.Clone(b.recs), b.now)
			dres := disk.Process(slices.Clone(b.recs), b.now)
			if err := disk.Err(); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(encodeResults(mres.Emitted), encodeResults(dres.Emitted)) {
				t.Fatalf("seed %d batch %d: emitted %v, memory emitted %v", seed, i, dres.Emitted, mres.Emitted)
			}
			if mres.OpenWindows != dres.OpenWindows || mres.Watermark != dres.Watermark {
				t.Fatalf("seed %d batch %d: %d open pairs (W %d), memory %d (W %d)", seed, i, dres.OpenWindows, dres.Watermark, mres.OpenWindows, mres.Watermark)
			}
			mc, _ := mem.Changes().MarshalBinary()
			dc, _ := disk.Changes().MarshalBinary()
			if !bytes.Equal(mc, dc) {
				t.Fatalf("seed %d batch %d: the changelogs differ", seed, i)
			}
			want := mem.MarshalSnapshot()
			if got := disk.MarshalSnapshot(); !bytes.Equal(got, want) {
				t.Fatalf("seed %d batch %d: the Pebble engine's snapshot differs from the memory engine's", seed, i)
			}
			if rng.IntN(3) == 0 {
				continue // leave the slab unflushed into the next batch
			}
			if err := disk.Flush(engine.FlushTag{StreamID: "stream-a", BatchID: int64(i)}); err != nil {
				t.Fatal(err)
			}
			var buf bytes.Buffer
			snap, err := disk.Snapshot()
			if err != nil {
				t.Fatalf("seed %d batch %d: %v", seed, i, err)
			}
			n, sum, err := snap.WriteTo(&buf)
			snap.Release()
			if err != nil {
				t.Fatalf("seed %d batch %d: %v", seed, i, err)
			}
			if !bytes.Equal(buf.Bytes(), want) || n != int64(len(want)) || sum != crc32.Checksum(want[:len(want)-4], castagnoli) || snap.Size != n || snap.Sum != sum {
				t.Fatalf("seed %d batch %d: the streamed snapshot (%d bytes) differs from the memory engine's (%d)", seed, i, n, len(want))
			}
		}
		mres, dres := mem.Drain(), disk.Drain()
		if !bytes.Equal(encodeResults(mres.Emitted), encodeResults(dres.Emitted)) || dres.OpenWindows != 0 {
			t.Fatalf("seed %d: the drains differ (%d and %d windows, %d left open)", seed, len(dres.Emitted), len(mres.Emitted), dres.OpenWindows)
		}
	}
}

// TestPebbleRestartProperty is the restart property on the Pebble store:
// random crashes before a commit entry and before cleanup, and before each
// restart the local database left as the crash left it (reused when it
// matches the last commit), replaced by a stale copy from an earlier
// restart, given a foreign stream's marker and pairs, given a damaged
// marker, overwritten with garbage, or removed. Every rebuilt state equals
// the uninterrupted run's; a clean database is reused, a foreign or
// damaged one never.
func TestPebbleRestartProperty(t *testing.T) {
	runs := 10
	if testing.Short() {
		runs = 5
	}
	reused := 0
	for seed := range runs {
		var stale string // a copy of the database taken at an earlier restart
		last := ""
		checkRestarts(t, uint64(seed), func(rng *rand.Rand, h *ckHarness) {
			if h.eng != nil {
				if h.eng.Reused() {
					reused++
					if last == "foreign" || last == "damaged marker" || last == "garbage" || last == "removed" {
						t.Fatalf("seed %d: a %s local state was reused", seed, last)
					}
				}
			}
			if err := h.eng.Close(); err != nil {
				t.Fatal(err)
			}
			dir := h.local.Dir
			last = []string{"as left", "as left", "stale", "foreign", "damaged marker", "garbage", "removed"}[rng.IntN(7)]
			switch last {
			case "stale":
				if stale == "" {
					stale = t.TempDir()
					copyDir(t, dir, stale)
					last = "as left"
					return
				}
				if err := os.RemoveAll(dir); err != nil {
					t.Fatal(err)
				}
				copyDir(t, stale, dir)
			case "foreign", "damaged marker":
				if _, err := os.Stat(filepath.Join(dir, ownerFile)); err != nil {
					last = "removed" // no database yet
					return
				}
				db, err := pebble.Open(filepath.Join(dir, "db"), &pebble.Options{Logger: quietLogger{}, FS: vfs.Default})
				if err != nil {
					t.Fatal(err)
				}
				var m engine.Marker
				raw, ok := (&pebbleStore{db: db}).Marker()
				ok = ok && m.UnmarshalBinary(raw) == nil
				marker := []byte("TMPB\x01 not a marker")
				if last == "foreign" {
					m.StreamID = "stream-b"
					if !ok {
						m.BatchID = 0
					}
					marker = m.MarshalBinary()
					junk := tidemark.MakeKey(tidemark.KeyPart{Value: "junk"})
					if err := db.Set(pairKey(nil, m.Watermark+1, junk), engine.AppendAgg(nil, tidemark.Agg{Count: 99}), nil); err != nil {
						t.Fatal(err)
					}
				}
				if err := db.Set([]byte(markerName), marker, pebble.Sync); err != nil {
					t.Fatal(err)
				}
				if err := db.Close(); err != nil {
					t.Fatal(err)
				}
			case "garbage":
				ents, _ := os.ReadDir(filepath.Join(dir, "db"))
				for _, en := range ents {
					if err := os.WriteFile(filepath.Join(dir, "db", en.Name()), []byte(fmt.Sprint("garbage ", rng.Int())), 0o644); err != nil {
						t.Fatal(err)
					}
				}
			case "removed":
				if err := os.RemoveAll(dir); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
	if reused == 0 {
		t.Fatal("no restart reused its local state")
	}
	t.Logf("%d restarts reused their local state", reused)
}

// TestPebbleStateDirRefused: a non-empty directory tidemark did not make is
// never used (nor deleted) as the local state.
func TestPebbleStateDirRefused(t *testing.T) {
	dir := t.TempDir()
	keep := filepath.Join(dir, "notes.txt")
	if err := os.WriteFile(keep, []byte("mine"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := openPebbleStore(StateOptions{Store: StatePebble, Dir: dir}, "s")
	if err == nil {
		t.Fatal("a foreign non-empty directory was accepted")
	}
	if _, statErr := os.Stat(keep); statErr != nil {
		t.Fatalf("the directory's file is gone: %v", statErr)
	}
	if err := (StateOptions{Store: "disk"}).validate(); err == nil {
		t.Fatal("an unknown --state-store was accepted")
	}
	if err := (StateOptions{Dir: dir}).validate(); err == nil {
		t.Fatal("--state-dir without --state-store pebble was accepted")
	}
}

func copyDir(t *testing.T, from, to string) {
	t.Helper()
	err := filepath.WalkDir(from, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(from, p)
		dst := filepath.Join(to, rel)
		if d.IsDir() {
			return os.MkdirAll(dst, 0o755)
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(dst, data, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// FuzzPebbleDecoders: the local database's marker, pair keys and
// aggregates decode damaged bytes to an error, never a panic, and what
// decodes survives re-encoding (varints may have been non-minimal).
func FuzzPebbleDecoders(f *testing.F) {
	m := engine.Marker{StreamID: "s", BatchID: 7, Token: 9, Window: tidemark.WindowSpec{Size: 10, Slide: 10}, Watermark: 5, HasWatermark: true,
		Sources: []engine.SourceState{{Name: "a", MaxEventTime: 3, HasEventTime: true}}, Open: 2}
	f.Add(m.MarshalBinary())
	f.Add(pairKey(nil, -5, tidemark.MakeKey(tidemark.KeyPart{Value: "a\x00b"}, tidemark.KeyPart{Null: true})))
	f.Add(engine.AppendAgg(nil, tidemark.Agg{Count: 3, Values: 2, Sum: 1.5, Min: -1, Max: 2}))
	f.Fuzz(func(t *testing.T, data []byte) {
		var m engine.Marker
		if m.UnmarshalBinary(data) == nil {
			var again engine.Marker
			if err := again.UnmarshalBinary(m.MarshalBinary()); err != nil || fmt.Sprint(again) != fmt.Sprint(m) {
				t.Fatalf("marker %x does not survive re-encoding (%v)", data, err)
			}
		}
		if start, key, err := decodePairKey(data); err == nil {
			start2, key2, err := decodePairKey(pairKey(nil, start, key))
			if err != nil || start2 != start || key2 != key {
				t.Fatalf("pair key %x decodes to %d %q, which does not survive re-encoding", data, start, key)
			}
		}
		if a, st, err := decodePair(data); err == nil {
			enc, err := engine.AppendPair(nil, a, st)
			if err != nil {
				t.Fatal(err)
			}
			b, st2, err := decodePair(enc)
			again, err2 := engine.AppendPair(nil, b, st2)
			if err != nil || err2 != nil || !bytes.Equal(again, enc) {
				t.Fatalf("aggregate %x does not survive re-encoding", data)
			}
		}
	})
}

// TestSnapshotSize: the memory engine's snapshot size, added up without
// encoding, is the encoding's length, over random states.
func TestSnapshotSize(t *testing.T) {
	for seed := range 30 {
		rng := rand.New(rand.NewPCG(uint64(seed), 8))
		cfg, batches := ckRun(rng)
		e := mustNew(t, cfg, nil)
		for i, b := range batches {
			e.Process(slices.Clone(b.recs), b.now)
			snap, err := e.Snapshot()
			if err != nil {
				t.Fatal(err)
			}
			if got, want := snap.Size, int64(len(e.MarshalSnapshot())); got != want {
				t.Fatalf("seed %d batch %d: snapshot size %d, encoding %d bytes", seed, i, got, want)
			}
		}
	}
}
