package engine

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
	"time"

	"tidemark"
)

// TestChangesReplay is the property behind changelog checkpoints: over
// random runs, a snapshot after batch s plus the changelogs of batches
// s+1..n (each through its encoding) rebuild exactly the state after batch
// n, and an engine resumed from it produces what the uninterrupted one does.
func TestChangesReplay(t *testing.T) {
	for seed := range 300 {
		rng := rand.New(rand.NewPCG(uint64(seed), 16))
		cfg, batches := genRun(rng)
		e := mustNew(t, cfg, nil)
		var snaps [][]byte // snaps[i]: State after batch i-1 (snaps[0]: fresh)
		var logs [][]byte  // logs[i]: Changes of batch i
		var outs []BatchResult
		snap0, _ := e.State().MarshalBinary()
		snaps = append(snaps, snap0)
		for _, b := range batches {
			outs = append(outs, e.Process(slices.Clone(b.recs), b.now))
			c, err := e.Changes().MarshalBinary()
			if err != nil {
				t.Fatal(err)
			}
			if direct, _ := e.Changelog(); !bytes.Equal(direct, c) {
				t.Fatalf("seed %d: the checkpoint's changelog differs from Changes' encoding", seed)
			}
			logs = append(logs, c)
			s, _ := e.State().MarshalBinary()
			snaps = append(snaps, s)
		}
		n := len(batches)
		from := rng.IntN(n + 1) // the snapshot
		to := from + rng.IntN(n-from+1)
		var st State
		if err := st.UnmarshalBinary(snaps[from]); err != nil {
			t.Fatal(err)
		}
		r := mustNew(t, cfg, &st)
		for i := from; i < to; i++ {
			var c Changes
			if err := c.UnmarshalBinary(logs[i]); err != nil {
				t.Fatalf("seed %d: changelog %d: %v", seed, i, err)
			}
			if err := r.Apply(&c); err != nil {
				t.Fatalf("seed %d: apply changelog %d: %v", seed, i, err)
			}
		}
		got, _ := r.State().MarshalBinary()
		if !bytes.Equal(got, snaps[to]) {
			t.Fatalf("seed %d, cfg %+v: snapshot %d + changelogs to %d differ from the full state", seed, cfg, from, to)
		}
		// Applying the last changelog again changes nothing (a replayed batch).
		if to > from {
			var c Changes
			_ = c.UnmarshalBinary(logs[to-1])
			if err := r.Apply(&c); err != nil {
				t.Fatalf("seed %d: re-apply: %v", seed, err)
			}
			if again, _ := r.State().MarshalBinary(); !bytes.Equal(again, snaps[to]) {
				t.Fatalf("seed %d: re-applying the last changelog changed the state", seed)
			}
		}
		for i := to; i < n; i++ {
			if res := r.Process(slices.Clone(batches[i].recs), batches[i].now); !reflect.DeepEqual(res, outs[i]) {
				t.Fatalf("seed %d: batch %d after the rebuild: got %+v, want %+v", seed, i, res, outs[i])
			}
		}
	}
}

// TestChangesListOnlyTouched checks a changelog holds the pairs its batch
// touched, not the open state.
func TestChangesListOnlyTouched(t *testing.T) {
	e := mustNew(t, Config{Window: tidemark.WindowSpec{Size: 10}, Lateness: 1000 * time.Microsecond}, nil)
	var recs []tidemark.Record
	for i := range 1000 {
		recs = append(recs, tidemark.Record{Source: "s", EventTime: 5, Key: tidemark.MakeKey(tidemark.KeyPart{Value: string(rune('a'+i%26)) + string(rune(i))})})
	}
	e.Process(recs, t0)
	if n := len(e.Changes().Upserts); n != 1000 {
		t.Fatalf("first batch: %d upserts, want 1000", n)
	}
	res := e.Process(recs[:3], t0)
	if n := len(e.Changes().Upserts); n != 3 || res.OpenWindows != 1000 {
		t.Fatalf("second batch: %d upserts over %d open, want 3 over 1000", n, res.OpenWindows)
	}
	e.Process([]tidemark.Record{{Source: "s", EventTime: 2000}}, t0) // closes [0,10)
	c := e.Changes()
	if len(c.Upserts) != 1 || c.Upserts[0].Window.Start != 2000 {
		t.Fatalf("closing batch: upserts %v, want only the new window", c.Upserts)
	}
}

func TestChangesRejectDamage(t *testing.T) {
	e := mustNew(t, Config{Window: tidemark.WindowSpec{Size: 10}}, nil)
	e.Process([]tidemark.Record{ev("s", 5), ev("s", 25)}, t0)
	data, _ := e.Changes().MarshalBinary()
	for i := range data {
		bad := slices.Clone(data)
		bad[i] ^= 0x40
		var c Changes
		if err := c.UnmarshalBinary(bad); err == nil {
			t.Errorf("flipped byte %d: got no error", i)
		}
	}
	for n := range len(data) {
		var c Changes
		if err := c.UnmarshalBinary(data[:n]); err == nil {
			t.Errorf("truncated to %d bytes: got no error", n)
		}
	}
	// A changelog applied out of order: its watermark is behind the state's.
	e.Process([]tidemark.Record{ev("s", 500)}, t0)
	var c Changes
	_ = c.UnmarshalBinary(data)
	if err := e.Apply(&c); err == nil {
		t.Error("applying an older changelog: got no error")
	}
}

// FuzzChangesUnmarshal: arbitrary bytes never panic the decoder, what it
// accepts round-trips, and applying it to an engine errs or works.
func FuzzChangesUnmarshal(f *testing.F) {
	body := func(b []byte) []byte { return b[len(changesMagic) : len(b)-4] }
	e, _ := New(Config{Window: tidemark.WindowSpec{Size: 10, Slide: 5}}, nil)
	e.Process([]tidemark.Record{
		{Source: "a", EventTime: 3, Key: tidemark.MakeKey(tidemark.KeyPart{Value: "x"}), Value: 1.5, HasValue: true},
		{Source: "b", EventTime: 27},
	}, time.Unix(100, 0))
	full, _ := e.Changes().MarshalBinary()
	f.Add(body(full))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		data := append([]byte(changesMagic), b...)
		data = binary.LittleEndian.AppendUint32(data, crc32.Checksum(data, castagnoli))
		var c Changes
		if err := c.UnmarshalBinary(data); err != nil {
			return
		}
		again, _ := c.MarshalBinary()
		var back Changes
		if err := back.UnmarshalBinary(again); err != nil {
			t.Fatalf("unmarshal re-encoded changes: %v", err)
		}
		if third, _ := back.MarshalBinary(); !bytes.Equal(third, again) {
			t.Fatalf("round trip changed the changes: %+v", back)
		}
		e, _ := New(Config{Window: tidemark.WindowSpec{Size: 10, Slide: 5}}, nil)
		if e.Apply(&c) == nil {
			e.Process([]tidemark.Record{{Source: "a", EventTime: 1}}, time.Unix(0, 0))
			e.Drain()
		}
	})
}

// TestCompactHighCardinality runs high-cardinality batches, where closing
// frees thousands of pairs at once and the engine rebuilds its containers,
// against the naive reference, in both output modes; the changelogs of the
// run rebuild every state exactly, across compactions.
func TestCompactHighCardinality(t *testing.T) {
	for _, mode := range []OutputMode{Append, Update} {
		rng := rand.New(rand.NewPCG(5, uint64(mode)))
		cfg := Config{Window: tidemark.WindowSpec{Size: 1000}, Lateness: 30 * time.Microsecond, OutputMode: mode}
		var batches []batchIn
		clock := int64(0)
		for b := range 12 {
			var recs []tidemark.Record
			for range 3000 {
				clock++
				recs = append(recs, tidemark.Record{Source: "s", EventTime: clock/10 - rng.Int64N(20),
					Key: tidemark.MakeKey(tidemark.KeyPart{Value: fmt.Sprintf("u%d", rng.IntN(20000))}), Value: 1, HasValue: true})
			}
			batches = append(batches, batchIn{recs: recs, now: t0.Add(time.Duration(b) * time.Second)})
		}
		if err := checkRun(cfg, batches, 7, true); err != nil {
			t.Fatalf("%v: %v", mode, err)
		}
		e := mustNew(t, cfg, nil)
		replica := mustNew(t, cfg, nil)
		peak, compacted := 0, false
		for i, b := range batches {
			e.Process(slices.Clone(b.recs), b.now)
			peak = max(peak, e.slots.len())
			compacted = compacted || e.slots.len() < peak
			if err := replica.Apply(e.Changes()); err != nil {
				t.Fatal(err)
			}
			got, _ := replica.State().MarshalBinary()
			want, _ := e.State().MarshalBinary()
			if !bytes.Equal(got, want) {
				t.Fatalf("%v: batch %d: the state rebuilt from changelogs differs", mode, i)
			}
		}
		if !compacted {
			t.Fatalf("%v: the slab never shrank (peak %d)", mode, peak)
		}
	}
}

// TestMarshalSnapshot: the engine's direct snapshot decodes to its State
// (up to the order of keys within a window) and resumes an equal engine.
func TestMarshalSnapshot(t *testing.T) {
	for seed := range 100 {
		cfg, batches := genRun(rand.New(rand.NewPCG(uint64(seed), 99)))
		e := mustNew(t, cfg, nil)
		for _, b := range batches[:len(batches)/2] {
			e.Process(slices.Clone(b.recs), b.now)
		}
		var st State
		if err := st.UnmarshalBinary(e.MarshalSnapshot()); err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		r := mustNew(t, cfg, &st)
		got, _ := r.State().MarshalBinary()
		want, _ := e.State().MarshalBinary()
		if !bytes.Equal(got, want) {
			t.Fatalf("seed %d: the engine resumed from MarshalSnapshot holds a different state", seed)
		}
	}
}
