package engine

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"tidemark"
)

// minutesOf returns 2026-01-01 10:mm in µs.
func minutesOf(mm int) int64 {
	return time.Date(2026, 1, 1, 10, mm, 0, 0, time.UTC).UnixMicro()
}

// TestSessionWalkthrough is the README's walk-through: gap 5m, lateness 0,
// one row per batch, a key with events at 10:00, 10:03, 10:11, then 10:07,
// which would bridge [10:00,10:08) and [10:11,10:16). The first session is
// closed by then (W = 10:11), so under both rules 10:07 is late: under the
// event rule because 10:07 < W, under the window rule because it touches
// a closed session (its own [10:07,10:12) ends after W). Accepting it would
// emit a second session overlapping the first.
func TestSessionWalkthrough(t *testing.T) {
	key := tidemark.MakeKey(tidemark.KeyPart{Value: "u1"})
	for _, rule := range []LateRule{LateWindow, LateEvent} {
		for _, drain := range []bool{false, true} {
			t.Run(fmt.Sprintf("%v/drain=%v", rule, drain), func(t *testing.T) {
				e, err := NewSessionEngine(5*time.Minute, Config{LateRule: rule}, nil)
				if err != nil {
					t.Fatal(err)
				}
				var emitted []tidemark.Result
				var statuses []tidemark.Status
				for _, mm := range []int{0, 3, 11, 7} {
					recs := []tidemark.Record{{Source: "s", EventTime: minutesOf(mm), Key: key, Value: float64(mm), HasValue: true}}
					emitted = append(emitted, e.Process(recs, time.Unix(0, 0)).Emitted...)
					statuses = append(statuses, recs[0].Status)
				}
				if drain {
					emitted = append(emitted, e.Drain().Emitted...)
				}
				wantStatus := []tidemark.Status{tidemark.StatusOK, tidemark.StatusOK, tidemark.StatusOK, tidemark.StatusLate}
				if !slices.Equal(statuses, wantStatus) {
					t.Fatalf("got statuses %v, want %v", statuses, wantStatus)
				}
				want := []string{"[2026-01-01T10:00:00Z, 2026-01-01T10:08:00Z) count 2 sum 3"}
				if drain {
					want = append(want, "[2026-01-01T10:11:00Z, 2026-01-01T10:16:00Z) count 1 sum 11")
				}
				var got []string
				for _, r := range emitted {
					got = append(got, fmt.Sprintf("%v count %d sum %g", r.Window, r.Agg.Count, r.Agg.Total()))
				}
				if !slices.Equal(got, want) {
					t.Fatalf("got %q, want %q", got, want)
				}
				if !drain && e.State().Open[0].Window.Start != minutesOf(11) {
					t.Fatalf("open state %v, want the 10:11 session", e.State().Open)
				}
			})
		}
	}
}

// TestSessionBridge: a row that arrives while both sessions are open
// merges them into one.
func TestSessionBridge(t *testing.T) {
	e, err := NewSessionEngine(5*time.Minute, Config{Lateness: time.Hour}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, mm := range []int{0, 3, 11, 7, 30} {
		e.Process([]tidemark.Record{{Source: "s", EventTime: minutesOf(mm)}}, time.Unix(0, 0))
	}
	if n := len(e.State().Open); n != 2 {
		t.Fatalf("got %d open sessions, want 2 (10:00-10:16 merged, 10:30)", n)
	}
	got := e.Drain().Emitted
	if len(got) != 2 || got[0].Window != (tidemark.Window{Start: minutesOf(0), End: minutesOf(16)}) || got[0].Agg.Count != 4 {
		t.Fatalf("got %v, want [10:00,10:16) with 4 rows first", got)
	}
	if e.open != 0 || len(e.keys) != 0 || len(e.due.entries) != 0 {
		t.Fatalf("state left after drain: %d sessions, %d keys, %d due", e.open, len(e.keys), len(e.due.entries))
	}
}

func TestSessionConfigErrors(t *testing.T) {
	for _, c := range []struct {
		gap  time.Duration
		cfg  Config
		want string
	}{
		{0, Config{}, "session gap must be positive"},
		{time.Nanosecond, Config{}, "whole microseconds"},
		{time.Minute, Config{OutputMode: Update}, "only append output"},
		{time.Minute, Config{Lateness: -1}, "lateness must not be negative"},
	} {
		if _, err := NewSessionEngine(c.gap, c.cfg, nil); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("gap %v cfg %+v: got %v, want %q", c.gap, c.cfg, err, c.want)
		}
	}
}

// TestSessionStateRejects checks that a resumed state breaking an engine
// invariant is refused with an error.
func TestSessionStateRejects(t *testing.T) {
	win := func(a, b int64) tidemark.Window { return tidemark.Window{Start: a, End: b} }
	one := tidemark.Agg{Count: 1}
	for _, c := range []struct {
		name string
		st   SessionState
		want string
	}{
		{"gap", SessionState{Gap: 7}, "differs"},
		{"short", SessionState{Gap: 10, Open: []tidemark.Result{{Window: win(0, 5), Agg: one}}}, "shorter than the gap"},
		{"empty", SessionState{Gap: 10, Open: []tidemark.Result{{Window: win(0, 10)}}}, "counts"},
		{"closed", SessionState{Gap: 10, HasWatermark: true, Watermark: 20, Open: []tidemark.Result{{Window: win(0, 10), Agg: one}}}, "already closed"},
		{"overlap", SessionState{Gap: 10, Open: []tidemark.Result{{Window: win(0, 10), Agg: one}, {Window: win(5, 15), Agg: one}}}, "overlap"},
		{"horizon", SessionState{Gap: 10, HasWatermark: true, Watermark: 40, Closed: []ClosedSession{{End: 20}}}, "horizon"},
		{"touch", SessionState{Gap: 10, HasWatermark: true, Watermark: 25, Closed: []ClosedSession{{End: 20}},
			Open: []tidemark.Result{{Window: win(15, 30), Agg: one}}}, "overlaps its closed session"},
	} {
		_, err := NewSessionEngine(10*time.Microsecond, Config{}, &c.st)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want %q", c.name, err, c.want)
		}
	}
}

// FuzzSessionStateUnmarshal feeds arbitrary bodies, framed with the magic
// and a valid checksum, to SessionState.UnmarshalBinary: it must never
// panic, what it accepts must round-trip byte for byte, and an engine
// resumed from it (if NewSessionEngine accepts it) must run and drain.
func FuzzSessionStateUnmarshal(f *testing.F) {
	body := func(b []byte) []byte { return b[len(sessionStateMagic) : len(b)-4] }
	e, _ := NewSessionEngine(10*time.Microsecond, Config{}, nil)
	empty, _ := e.State().MarshalBinary()
	f.Add(body(empty))
	k := tidemark.MakeKey(tidemark.KeyPart{Value: "x"})
	e.Process([]tidemark.Record{{Source: "a", EventTime: 3, Key: k, Value: 1.5, HasValue: true}, {Source: "a", EventTime: 30}}, time.Unix(1, 0))
	e.Process([]tidemark.Record{{Source: "a", EventTime: 40, Key: k}, {Source: "b", Reason: tidemark.ReasonMalformed}}, time.Unix(2, 0))
	full, _ := e.State().MarshalBinary()
	if len(e.State().Closed) == 0 || len(e.State().Open) == 0 {
		f.Fatalf("seed state %+v lacks closed or open sessions", e.State())
	}
	f.Add(body(full))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		data := append([]byte(sessionStateMagic), b...)
		data = binary.LittleEndian.AppendUint32(data, crc32.Checksum(data, castagnoli))
		var st SessionState
		if err := st.UnmarshalBinary(data); err != nil {
			return
		}
		again, err := st.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		var back SessionState
		if err := back.UnmarshalBinary(again); err != nil {
			t.Fatalf("unmarshal re-encoded state: %v", err)
		}
		if third, _ := back.MarshalBinary(); !bytes.Equal(third, again) {
			t.Fatalf("round trip changed the state: %+v", back)
		}
		gap := time.Duration(st.Gap) * time.Microsecond
		if st.Gap <= 0 || gap/time.Microsecond != time.Duration(st.Gap) {
			return
		}
		if e, err := NewSessionEngine(gap, Config{}, &st); err == nil {
			e.Process([]tidemark.Record{{Source: "a", EventTime: 1}}, time.Unix(0, 0))
			e.Drain()
			if e.open != 0 || len(e.keys) != 0 {
				t.Fatalf("drain left %d sessions, %d keys", e.open, len(e.keys))
			}
		}
	})
}

func TestSessionStateCorrupt(t *testing.T) {
	e, _ := NewSessionEngine(time.Minute, Config{}, nil)
	e.Process([]tidemark.Record{{Source: "a", EventTime: 3}}, time.Unix(1, 0))
	data, _ := e.State().MarshalBinary()
	var st SessionState
	for name, b := range map[string][]byte{
		"magic":    append([]byte("TMST\x02"), data[5:]...),
		"checksum": append(slices.Clone(data[:len(data)-1]), data[len(data)-1]^1),
		"short":    data[:6],
	} {
		if err := st.UnmarshalBinary(b); err == nil {
			t.Errorf("%s: decoded a damaged state", name)
		}
	}
	// Trailing bytes inside a valid frame.
	body := append(slices.Clone(data[:len(data)-4]), 0)
	body = binary.LittleEndian.AppendUint32(body, crc32.Checksum(body, castagnoli))
	if err := st.UnmarshalBinary(body); err == nil || !strings.Contains(err.Error(), "trailing") {
		t.Errorf("trailing byte: got %v", err)
	}
}

// sessionBenchRecords is BenchmarkSessions' input: 1M events of 10k users
// (2 sources, up to 2 s out of order, 10k events per second of event time,
// so a user's events are ~1 s apart), with a 10 s pause of all users every
// 20 s of event time, which closes sessions.
func sessionBenchRecords() []tidemark.Record {
	recs := benchRecords(1_000_000, 10_000)
	for i := range recs {
		recs[i].EventTime += (recs[i].EventTime / 20_000_000) * 10_000_000
	}
	return recs
}

// BenchmarkSessions feeds sessionBenchRecords through a session engine
// with a 5 s gap and 5 s lateness, in batches of 10k, and reports events
// and emitted sessions per second. Process rewrites each record's status
// and disorder, so the records are reused as they are, not copied.
func BenchmarkSessions(b *testing.B) {
	const events, batch = 1_000_000, 10_000
	recs := sessionBenchRecords()
	var sessions int
	cpu0 := cpuTime()
	for b.Loop() {
		e, err := NewSessionEngine(5*time.Second, Config{Lateness: 5 * time.Second}, nil)
		if err != nil {
			b.Fatal(err)
		}
		for i := 0; i < len(recs); i += batch {
			sessions += len(e.Process(recs[i:i+batch], time.Unix(0, 0)).Emitted)
		}
		sessions += len(e.Drain().Emitted)
	}
	cpu := cpuTime() - cpu0
	total := float64(b.N) * events
	b.ReportMetric(total/b.Elapsed().Seconds(), "events/s")
	b.ReportMetric(float64(sessions)/b.Elapsed().Seconds(), "sessions/s")
	b.ReportMetric(float64(cpu)/total, "cpu-ns/event")
	b.ReportMetric(float64(sessions)/float64(b.N), "sessions/op")
}

// BenchmarkSessionsTumblingBaseline is the tumbling engine (5 s windows,
// 5 s lateness) on BenchmarkSessions' input: the cost of windowing these
// 10k keys at all, to compare the session engine with (BenchmarkProcess
// has 1k keys, whose state stays in cache).
func BenchmarkSessionsTumblingBaseline(b *testing.B) {
	const events, batch = 1_000_000, 10_000
	recs := sessionBenchRecords()
	cpu0 := cpuTime()
	for b.Loop() {
		e, err := New(Config{Window: tidemark.WindowSpec{Size: (5 * time.Second).Microseconds()}, Lateness: 5 * time.Second}, nil)
		if err != nil {
			b.Fatal(err)
		}
		for i := 0; i < len(recs); i += batch {
			e.Process(recs[i:i+batch], time.Unix(0, 0))
		}
		e.Drain()
	}
	b.ReportMetric(float64(cpuTime()-cpu0)/(float64(b.N)*events), "cpu-ns/event")
}

// BenchmarkSessionStateBytes measures the heap held per open session: 100k
// users (12-byte keys), one open session each, nothing closed.
func BenchmarkSessionStateBytes(b *testing.B) {
	const nkeys = 100_000
	recs := make([]tidemark.Record, nkeys)
	var perSession, estimate float64
	for b.Loop() {
		e, err := NewSessionEngine(time.Minute, Config{Lateness: (1 << 40) * time.Microsecond}, nil)
		if err != nil {
			b.Fatal(err)
		}
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		for i := range recs {
			recs[i] = tidemark.Record{Source: "s", EventTime: int64(i), Value: 1, HasValue: true,
				Key: tidemark.MakeKey(tidemark.KeyPart{Value: fmt.Sprintf("user%06d", i)})}
		}
		e.Process(recs, time.Time{})
		clear(recs)
		runtime.GC()
		runtime.ReadMemStats(&after)
		if e.open != nkeys {
			b.Fatalf("got %d open sessions, want %d", e.open, nkeys)
		}
		perSession = float64(after.HeapAlloc-before.HeapAlloc) / nkeys
		estimate = float64(e.StateBytes()) / nkeys
		runtime.KeepAlive(e)
	}
	b.ReportMetric(perSession, "bytes/session")
	b.ReportMetric(estimate, "estimated-bytes/session")
}

// FuzzSessionChangesUnmarshal: arbitrary framed bodies never panic the
// changelog decoder; what it accepts round-trips, and applying it to a
// fresh engine either works or is refused with an error.
func FuzzSessionChangesUnmarshal(f *testing.F) {
	body := func(b []byte) []byte { return b[len(sessionChangesMagic) : len(b)-4] }
	e, _ := NewSessionEngine(10*time.Microsecond, Config{}, nil)
	k := tidemark.MakeKey(tidemark.KeyPart{Value: "x"})
	e.Process([]tidemark.Record{{Source: "a", EventTime: 3, Key: k, Value: 1.5, HasValue: true}, {Source: "a", EventTime: 30}}, time.Unix(1, 0))
	first, _ := e.Changes().MarshalBinary()
	f.Add(body(first))
	e.Process([]tidemark.Record{{Source: "a", EventTime: 40, Key: k}}, time.Unix(2, 0))
	second, _ := e.Changes().MarshalBinary()
	f.Add(body(second))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		data := append([]byte(sessionChangesMagic), b...)
		data = binary.LittleEndian.AppendUint32(data, crc32.Checksum(data, castagnoli))
		var c SessionChanges
		if err := c.UnmarshalBinary(data); err != nil {
			return
		}
		again, _ := c.MarshalBinary()
		var back SessionChanges
		if err := back.UnmarshalBinary(again); err != nil {
			t.Fatalf("unmarshal re-encoded changes: %v", err)
		}
		if third, _ := back.MarshalBinary(); !bytes.Equal(third, again) {
			t.Fatalf("round trip changed the changes: %+v", back)
		}
		e, _ := NewSessionEngine(10*time.Microsecond, Config{}, nil)
		if err := e.Apply(&c); err == nil {
			e.Process([]tidemark.Record{{Source: "a", EventTime: 1}}, time.Unix(0, 0))
			e.Drain()
			if e.open != 0 || len(e.keys) != 0 {
				t.Fatalf("drain left %d sessions, %d keys", e.open, len(e.keys))
			}
		}
	})
}
