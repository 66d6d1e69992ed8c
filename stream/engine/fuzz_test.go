package engine

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"math/rand/v2"
	"testing"
	"time"

	"tidemark"
)

// FuzzStateUnmarshal feeds arbitrary bytes to State.UnmarshalBinary: it
// must never panic, and what it accepts must survive a round trip and
// either resume an engine or be rejected by New with an error. The fuzzer
// mutates the body; the test frames it with the magic and a valid checksum,
// so that mutations reach the decoder instead of stopping at the CRC.
func FuzzStateUnmarshal(f *testing.F) {
	body := func(b []byte) []byte { return b[len(stateMagic) : len(b)-4] }
	e, _ := New(Config{Window: tidemark.WindowSpec{Size: 10, Slide: 5}}, nil)
	empty, _ := e.State().MarshalBinary()
	f.Add(body(empty))
	e.Process([]tidemark.Record{
		{Source: "a", EventTime: 3, Key: tidemark.MakeKey(tidemark.KeyPart{Value: "x"}), Value: 1.5, HasValue: true},
		{Source: "b", EventTime: 27},
		{Source: "b", Reason: tidemark.ReasonMalformed},
	}, time.Unix(100, 0))
	full, _ := e.State().MarshalBinary()
	f.Add(body(full))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		data := append([]byte(stateMagic), b...)
		data = binary.LittleEndian.AppendUint32(data, crc32.Checksum(data, castagnoli))
		var st State
		if err := st.UnmarshalBinary(data); err != nil {
			return
		}
		again, err := st.MarshalBinary()
		if err != nil {
			t.Fatalf("marshal decoded state: %v", err)
		}
		var back State
		if err := back.UnmarshalBinary(again); err != nil {
			t.Fatalf("unmarshal re-encoded state: %v", err)
		}
		// Compared as bytes: a state may hold NaN, which DeepEqual rejects.
		if third, _ := back.MarshalBinary(); !bytes.Equal(third, again) {
			t.Fatalf("round trip changed the state: %+v", back)
		}
		cfg := Config{Window: st.Window}
		if st.Window.Slide > 0 && st.Window.Size/st.Window.Slide > 1000 {
			return // valid, but each event would fall in over 1000 windows
		}
		if e, err := New(cfg, &st); err == nil {
			e.Process([]tidemark.Record{{Source: "a", EventTime: 1}}, time.Unix(0, 0))
			e.Drain()
		}
	})
}

// FuzzParseFlags checks the flag parsers accept exactly their spellings and
// round-trip through String.
func FuzzParseFlags(f *testing.F) {
	for _, s := range []string{"window", "event", "append", "update", "min", "max", "", "WINDOW", "mi"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if r, err := ParseLateRule(s); (err == nil) != (s == "window" || s == "event") || (err == nil && r.String() != s) {
			t.Errorf("ParseLateRule(%q) = %v, %v", s, r, err)
		}
		if m, err := ParseOutputMode(s); (err == nil) != (s == "append" || s == "update") || (err == nil && m.String() != s) {
			t.Errorf("ParseOutputMode(%q) = %v, %v", s, m, err)
		}
		if p, err := ParsePolicy(s); (err == nil) != (s == "min" || s == "max") || (err == nil && p.String() != s) {
			t.Errorf("ParsePolicy(%q) = %v, %v", s, p, err)
		}
	})
}

// FuzzEngine drives the engine with a run drawn from the fuzzer's seed and
// compares it with the naive reference, as TestEngineMatchesReference does.
func FuzzEngine(f *testing.F) {
	for _, s := range []uint64{0, 1, 2, 99} {
		f.Add(s, uint64(0))
	}
	f.Fuzz(func(t *testing.T, a, b uint64) {
		rng := rand.New(rand.NewPCG(a, b))
		cfg, batches := genRun(rng)
		restartAt := rng.IntN(len(batches)+1) - 1
		if err := checkRun(cfg, batches, restartAt, rng.IntN(2) == 0); err != nil {
			t.Fatalf("cfg %+v: %v", cfg, err)
		}
	})
}
