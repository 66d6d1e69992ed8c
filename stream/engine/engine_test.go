package engine

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"tidemark"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func ev(src string, t int64) tidemark.Record {
	return tidemark.Record{Source: src, EventTime: t}
}

func TestQuarantinedFutureDoesNotMoveWatermark(t *testing.T) {
	e := mustNew(t, Config{Window: tidemark.WindowSpec{Size: 10}, Lateness: 5 * time.Microsecond, LateRule: LateEvent}, nil)
	y2099 := time.Date(2099, 1, 1, 0, 0, 0, 0, time.UTC).UnixMicro()

	res := e.Process([]tidemark.Record{{Source: "s", EventTime: y2099, Reason: tidemark.ReasonFutureTime}}, t0)
	if res.HasWatermark || res.Quarantined != 1 || res.Rows != 0 {
		t.Fatalf("only quarantined: got W %v (has %v), quarantined %d, rows %d; want no watermark, 1, 0",
			res.Watermark, res.HasWatermark, res.Quarantined, res.Rows)
	}
	batch := []tidemark.Record{ev("s", 100), {Source: "s", EventTime: y2099, Reason: tidemark.ReasonFutureTime}, ev("s", 105)}
	res = e.Process(batch, t0)
	if res.Watermark != 100 || res.Rows != 2 || res.Quarantined != 1 {
		t.Errorf("got W %d, rows %d, quarantined %d; want 100, 2, 1", res.Watermark, res.Rows, res.Quarantined)
	}
	if batch[1].Status != tidemark.StatusOK || batch[1].Disorder != 0 {
		t.Errorf("quarantined record got status %v disorder %d, want untouched", batch[1].Status, batch[1].Disorder)
	}
	if got := e.State().Sources[0].MaxEventTime; got != 105 {
		t.Errorf("got source max %d, want 105", got)
	}
	// 2099 has not closed anything, and a row at W is still on time.
	res = e.Process([]tidemark.Record{ev("s", 100)}, t0)
	if res.Dropped != 0 || len(res.Emitted) != 0 {
		t.Errorf("got dropped %d, emitted %v; want 0, none", res.Dropped, res.Emitted)
	}
}

func TestEventRuleLatenessZeroKeepsEqualTimestamps(t *testing.T) {
	e := mustNew(t, Config{Window: tidemark.WindowSpec{Size: 1000}, LateRule: LateEvent}, nil)
	e.Process([]tidemark.Record{ev("s", 100)}, t0)
	batch := []tidemark.Record{ev("s", 100), ev("s", 99), ev("s", 100)}
	res := e.Process(batch, t0)
	want := []tidemark.Status{tidemark.StatusOK, tidemark.StatusLate, tidemark.StatusOK}
	for i, r := range batch {
		if r.Status != want[i] {
			t.Errorf("record %d (t=%d): got %v, want %v", i, r.EventTime, r.Status, want[i])
		}
	}
	if res.Dropped != 1 {
		t.Errorf("got dropped %d, want 1", res.Dropped)
	}
}

func TestIdleSource(t *testing.T) {
	const idle = 10 * time.Second
	steps := []struct {
		name   string
		at     time.Duration
		recs   []tidemark.Record
		wantW  int64
		late   []bool
		noIdle int64 // W with IdleTimeout 0
	}{
		{"both report", 0, []tidemark.Record{ev("a", 100), ev("b", 1000)}, 100, []bool{false, false}, 100},
		{"a quiet 5s", 5 * time.Second, []tidemark.Record{ev("b", 2000)}, 100, []bool{false}, 100},
		{"a quiet 10s: idle", 10 * time.Second, []tidemark.Record{ev("b", 3000)}, 3000, []bool{false}, 100},
		{"a back, W stays", 11 * time.Second, []tidemark.Record{ev("a", 150)}, 3000, []bool{true}, 150},
		{"all idle, W stays", 60 * time.Second, nil, 3000, nil, 150},
		{"a quarantined line keeps a active", 65 * time.Second, []tidemark.Record{{Source: "a", Reason: tidemark.ReasonMalformed}}, 3000, []bool{false}, 150},
	}
	for _, timeout := range []time.Duration{idle, 0} {
		e := mustNew(t, Config{Window: tidemark.WindowSpec{Size: 10_000}, LateRule: LateEvent, IdleTimeout: timeout}, nil)
		for _, st := range steps {
			recs := slices.Clone(st.recs)
			res := e.Process(recs, t0.Add(st.at))
			want := st.wantW
			if timeout == 0 {
				want = st.noIdle
			}
			if res.Watermark != want {
				t.Errorf("timeout %v, %s: got W %d, want %d", timeout, st.name, res.Watermark, want)
			}
			if timeout == 0 {
				continue
			}
			for i, r := range recs {
				if r.Valid() && (r.Status == tidemark.StatusLate) != st.late[i] {
					t.Errorf("%s: record %d got %v, want late %v", st.name, i, r.Status, st.late[i])
				}
			}
		}
	}
	// Only a: a is idle, so no source takes part and W stays.
	e := mustNew(t, Config{Window: tidemark.WindowSpec{Size: 10}, IdleTimeout: idle}, nil)
	e.Process([]tidemark.Record{ev("a", 100)}, t0)
	if res := e.Process(nil, t0.Add(time.Hour)); res.Watermark != 100 {
		t.Errorf("every source idle: got W %d, want 100", res.Watermark)
	}
}

func TestWatermarkPolicies(t *testing.T) {
	batches := [][]tidemark.Record{
		{ev("a", 100)},
		{ev("b", 10)}, // a new, slower source: min would be 10
		{ev("b", 50), ev("a", 300)},
		{ev("b", 400)},
	}
	tests := []struct {
		policy Policy
		want   []int64
	}{
		{PolicyMin, []int64{100, 100, 100, 300}},
		{PolicyMax, []int64{100, 100, 300, 400}},
	}
	for _, tt := range tests {
		e := mustNew(t, Config{Window: tidemark.WindowSpec{Size: 10}, Policy: tt.policy}, nil)
		var got []int64
		for _, b := range batches {
			got = append(got, e.Process(slices.Clone(b), t0).Watermark)
		}
		if !slices.Equal(got, tt.want) {
			t.Errorf("policy %v: got W %v, want %v", tt.policy, got, tt.want)
		}
	}
}

func TestSlidingCountsEveryWindow(t *testing.T) {
	e := mustNew(t, Config{Window: tidemark.WindowSpec{Size: 10, Slide: 2}}, nil)
	e.Process([]tidemark.Record{ev("s", 20)}, t0) // W = 20; open starts 12..20
	batch := []tidemark.Record{ev("s", 12)}       // windows starting 4..12; only [12,22) is open
	res := e.Process(batch, t0)
	if batch[0].Status != tidemark.StatusLate || res.Dropped != 1 {
		t.Errorf("got %v, dropped %d; want late, 1", batch[0].Status, res.Dropped)
	}
	got := showResults(e.State().Open, 0, 1)
	want := []string{"12-22:2", "14-24:1", "16-26:1", "18-28:1", "20-30:1"}
	if !slices.Equal(got, want) {
		t.Errorf("got open %v, want %v", got, want)
	}
	res = e.Process([]tidemark.Record{ev("s", 5)}, t0) // windows -4..4: all closed
	if res.Dropped != 1 || res.OpenWindows != 5 {
		t.Errorf("got dropped %d, open %d; want 1, 5", res.Dropped, res.OpenWindows)
	}
	e = mustNew(t, Config{Window: tidemark.WindowSpec{Size: 10, Slide: 2}}, nil)
	e.Process([]tidemark.Record{ev("s", 5)}, t0)
	if got, want := showResults(e.Drain().Emitted, 0, 1), []string{"-4-6:1F", "-2-8:1F", "0-10:1F", "2-12:1F", "4-14:1F"}; !slices.Equal(got, want) {
		t.Errorf("got drained %v, want %v", got, want)
	}
}

func TestAggregates(t *testing.T) {
	a, b := tidemark.MakeKey(tidemark.KeyPart{Value: "a"}), tidemark.MakeKey(tidemark.KeyPart{Null: true})
	recs := []tidemark.Record{
		{Source: "s", EventTime: 1, Key: a, Value: 3, HasValue: true},
		{Source: "s", EventTime: 2, Key: a, Value: -1, HasValue: true},
		{Source: "s", EventTime: 3, Key: a},
		{Source: "s", EventTime: 4, Key: a, Value: 7, HasValue: true},
		{Source: "s", EventTime: 5, Key: b},
		{Source: "s", EventTime: 6, Key: b},
	}
	e := mustNew(t, Config{Window: tidemark.WindowSpec{Size: 10}}, nil)
	e.Process(recs, t0)
	got := e.Drain().Emitted
	want := []tidemark.Result{
		{Window: tidemark.Window{Start: 0, End: 10}, Key: b, Agg: tidemark.Agg{Count: 2}, Final: true},
		{Window: tidemark.Window{Start: 0, End: 10}, Key: a, Agg: tidemark.Agg{Count: 4, Values: 3, Sum: 9, Min: -1, Max: 7}, Final: true},
	}
	if !slices.Equal(got, want) {
		t.Errorf("got %+v, want %+v", got, want)
	}
}

func TestUpdateMode(t *testing.T) {
	a, b := tidemark.MakeKey(tidemark.KeyPart{Value: "a"}), tidemark.MakeKey(tidemark.KeyPart{Value: "b"})
	rec := func(t int64, k tidemark.Key) tidemark.Record {
		return tidemark.Record{Source: "s", EventTime: t, Key: k}
	}
	steps := []struct {
		recs []tidemark.Record
		want []string
	}{
		{[]tidemark.Record{rec(1, a), rec(2, b)}, []string{"0-10:1:a", "0-10:1:b"}},
		{[]tidemark.Record{rec(3, a)}, []string{"0-10:2:a"}},
		{nil, nil},
		{[]tidemark.Record{rec(15, a)}, []string{"0-10:2:aF", "0-10:1:bF", "10-20:1:a"}},
		// [10,20) b changes and closes in the same batch: once, final.
		{[]tidemark.Record{rec(12, b), rec(25, a)}, []string{"10-20:1:aF", "10-20:1:bF", "20-30:1:a"}},
	}
	e := mustNew(t, Config{Window: tidemark.WindowSpec{Size: 10}, OutputMode: Update}, nil)
	for i, st := range steps {
		if got := showResults(e.Process(st.recs, t0).Emitted, 0, 1); !slices.Equal(got, st.want) {
			t.Errorf("batch %d: got %v, want %v", i, got, st.want)
		}
	}
	if got, want := showResults(e.Drain().Emitted, 0, 1), []string{"20-30:1:aF"}; !slices.Equal(got, want) {
		t.Errorf("drain: got %v, want %v", got, want)
	}
}

func TestDisorderPerSource(t *testing.T) {
	e := mustNew(t, Config{Window: tidemark.WindowSpec{Size: 10}, Lateness: 100 * time.Microsecond}, nil)
	batch := []tidemark.Record{ev("a", 50), ev("b", 10), ev("a", 40), ev("a", 60), ev("b", 5), ev("a", 55)}
	e.Process(batch, t0)
	batch2 := []tidemark.Record{ev("b", 1)}
	e.Process(batch2, t0)
	var got []int64
	for _, r := range append(batch, batch2...) {
		got = append(got, r.Disorder)
	}
	if want := []int64{0, 0, 10, 0, 5, 5, 9}; !slices.Equal(got, want) {
		t.Errorf("got disorder %v, want %v", got, want)
	}
}

func TestStateRoundTrip(t *testing.T) {
	cfg := Config{Window: tidemark.WindowSpec{Size: 20, Slide: 5}, Lateness: 7 * time.Microsecond, OutputMode: Update, IdleTimeout: time.Second}
	rng := rand.New(rand.NewPCG(1, 2))
	var batches [][]tidemark.Record
	for i := range 60 {
		var b []tidemark.Record
		for range rng.IntN(6) {
			b = append(b, tidemark.Record{
				Source: []string{"x", "y"}[rng.IntN(2)], EventTime: int64(i*4) - rng.Int64N(30),
				Key: tidemark.Key([]string{"k1", "k2", "k3"}[rng.IntN(3)]), Value: float64(rng.IntN(9)), HasValue: rng.IntN(2) == 0,
			})
		}
		batches = append(batches, b)
	}
	now := func(i int) time.Time { return t0.Add(time.Duration(i) * 700 * time.Millisecond) }
	run := func(e *Engine, from int) []BatchResult {
		var out []BatchResult
		for i := from; i < len(batches); i++ {
			out = append(out, e.Process(slices.Clone(batches[i]), now(i)))
		}
		return append(out, e.Drain())
	}
	whole := mustNew(t, cfg, nil)
	want := run(whole, 0)

	for _, cut := range []int{0, 1, 17, 30, 59} {
		e := mustNew(t, cfg, nil)
		for i := range cut {
			e.Process(slices.Clone(batches[i]), now(i))
		}
		st := e.State()
		data, err := st.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		var back State
		if err := back.UnmarshalBinary(data); err != nil {
			t.Fatalf("cut %d: unmarshal: %v", cut, err)
		}
		if !reflect.DeepEqual(&back, st) {
			t.Errorf("cut %d: got state %+v, want %+v", cut, back, *st)
		}
		again, _ := back.MarshalBinary()
		if !slices.Equal(again, data) {
			t.Errorf("cut %d: re-marshalled state differs", cut)
		}
		resumed := mustNew(t, cfg, &back)
		if got := run(resumed, cut); !reflect.DeepEqual(got, want[cut:]) {
			t.Errorf("cut %d: resumed output differs from the uninterrupted run", cut)
		}
	}
}

func TestStateRejectsDamage(t *testing.T) {
	e := mustNew(t, Config{Window: tidemark.WindowSpec{Size: 10}}, nil)
	e.Process([]tidemark.Record{ev("s", 5), ev("s", 25)}, t0)
	data, _ := e.State().MarshalBinary()
	for i := range data {
		bad := slices.Clone(data)
		bad[i] ^= 0x40
		var st State
		if err := st.UnmarshalBinary(bad); err == nil {
			t.Errorf("flipped byte %d: got no error", i)
		}
	}
	for n := range len(data) {
		var st State
		if err := st.UnmarshalBinary(data[:n]); err == nil {
			t.Errorf("truncated to %d bytes: got no error", n)
		}
	}
}

func TestNewRejects(t *testing.T) {
	ok := Config{Window: tidemark.WindowSpec{Size: 10}}
	tests := []struct {
		name string
		cfg  Config
		st   *State
	}{
		{"zero window", Config{}, nil},
		{"slide above size", Config{Window: tidemark.WindowSpec{Size: 10, Slide: 11}}, nil},
		{"negative lateness", Config{Window: ok.Window, Lateness: -time.Microsecond}, nil},
		{"negative idle", Config{Window: ok.Window, IdleTimeout: -1}, nil},
		{"bad rule", Config{Window: ok.Window, LateRule: 7}, nil},
		{"bad mode", Config{Window: ok.Window, OutputMode: 7}, nil},
		{"bad policy", Config{Window: ok.Window, Policy: 7}, nil},
		{"other window spec", ok, &State{Window: tidemark.WindowSpec{Size: 20}}},
		{"wrong window size", ok, &State{Window: ok.Window, Open: []tidemark.Result{{Window: tidemark.Window{Start: 0, End: 20}}}}},
		{"duplicate open", ok, &State{Window: ok.Window, Open: []tidemark.Result{{Window: tidemark.Window{Start: 0, End: 10}}, {Window: tidemark.Window{Start: 0, End: 10}}}}},
		{"closed window in state", ok, &State{Window: ok.Window, HasWatermark: true, Watermark: 10, Open: []tidemark.Result{{Window: tidemark.Window{Start: 0, End: 10}}}}},
		{"duplicate source", ok, &State{Window: ok.Window, Sources: []SourceState{{Name: "a"}, {Name: "a"}}}},
	}
	for _, tt := range tests {
		if _, err := New(tt.cfg, tt.st); err == nil {
			t.Errorf("%s: got no error", tt.name)
		}
	}
	if _, err := New(ok, &State{Window: tidemark.WindowSpec{Size: 10, Slide: 10}}); err != nil {
		t.Errorf("explicit slide equal to size: got %v, want nil", err)
	}
}

func TestParse(t *testing.T) {
	for _, s := range []string{"window", "event"} {
		if r, err := ParseLateRule(s); err != nil || r.String() != s {
			t.Errorf("ParseLateRule(%q): got %v, %v", s, r, err)
		}
	}
	for _, s := range []string{"append", "update"} {
		if m, err := ParseOutputMode(s); err != nil || m.String() != s {
			t.Errorf("ParseOutputMode(%q): got %v, %v", s, m, err)
		}
	}
	for _, s := range []string{"min", "max"} {
		if p, err := ParsePolicy(s); err != nil || p.String() != s {
			t.Errorf("ParsePolicy(%q): got %v, %v", s, p, err)
		}
	}
	for _, s := range []string{"", "Window", "append ", "minimum"} {
		_, e1 := ParseLateRule(s)
		_, e2 := ParseOutputMode(s)
		_, e3 := ParsePolicy(s)
		if e1 == nil || e2 == nil || e3 == nil {
			t.Errorf("%q: got errors %v, %v, %v; want all non-nil", s, e1, e2, e3)
		}
	}
}

// TestStateBounded checks that closed windows are freed: a long run holds
// no more state than its busiest moment.
func TestStateBounded(t *testing.T) {
	e := mustNew(t, Config{Window: tidemark.WindowSpec{Size: 100, Slide: 50}, Lateness: 20 * time.Microsecond}, nil)
	keys := make([]tidemark.Key, 50)
	for i := range keys {
		keys[i] = tidemark.MakeKey(tidemark.KeyPart{Value: string(rune('A' + i))})
	}
	batch := make([]tidemark.Record, 500)
	peakSlots := 0
	for b := range 400 {
		for i := range batch {
			batch[i] = tidemark.Record{Source: "s", EventTime: int64(b*500+i) / 10, Key: keys[i%len(keys)]}
		}
		res := e.Process(batch, t0)
		if b == 10 {
			peakSlots = e.slots.len()
		}
		if b > 10 && (e.slots.len() > peakSlots || len(e.buckets) > 4 || res.OpenWindows > peakSlots) {
			t.Fatalf("batch %d: %d slots, %d buckets, %d open; peak after warm-up %d slots", b, e.slots.len(), len(e.buckets), res.OpenWindows, peakSlots)
		}
	}
}

// TestDeterministic runs the same input twice: Go randomizes map
// iteration, so any unsorted output would show.
func TestDeterministic(t *testing.T) {
	for seed := range 20 {
		cfg, batches := genRun(rand.New(rand.NewPCG(uint64(seed), 7)))
		var outs [2][]BatchResult
		var states [2][]byte
		for k := range 2 {
			e := mustNew(t, cfg, nil)
			for _, b := range batches {
				outs[k] = append(outs[k], e.Process(slices.Clone(b.recs), b.now))
			}
			states[k], _ = e.State().MarshalBinary()
			outs[k] = append(outs[k], e.Drain())
		}
		if !reflect.DeepEqual(outs[0], outs[1]) || !slices.Equal(states[0], states[1]) {
			t.Fatalf("seed %d: two runs differ", seed)
		}
	}
}

// TestSnapshotSortsAddedSlots: a window's slot list is sorted in parts
// (the slots added since the last snapshot, merged with the rest), and
// the drain emits each window in key order; both must equal a full sort,
// with keys that share long prefixes (the tie-break past the 8-byte
// prefix) and keys arriving in random order between snapshots.
func TestSnapshotSortsAddedSlots(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 16))
	cfg := Config{Window: tidemark.WindowSpec{Size: 10}, Lateness: 1000 * time.Microsecond}
	e := mustNew(t, cfg, nil)
	key := func() tidemark.Key {
		return tidemark.MakeKey(tidemark.KeyPart{Value: fmt.Sprintf("user-%04d", rng.IntN(3000))}, tidemark.KeyPart{Value: fmt.Sprint(rng.IntN(3))})
	}
	for batch := range 12 {
		recs := make([]tidemark.Record, 0, 400)
		for range 400 {
			recs = append(recs, tidemark.Record{Source: "s", EventTime: rng.Int64N(int64(10 * (batch + 1))), Key: key()})
		}
		e.Process(recs, t0)
		want, _ := e.State().MarshalBinary()
		if got := e.MarshalSnapshot(); !bytes.Equal(got, want) {
			t.Fatalf("batch %d: the snapshot differs from the state sorted whole", batch)
		}
	}
	open := e.index.Len()
	out := e.closeUpTo(tidemark.MaxTime, nil) // the drain's close, before finish's check
	if len(out) != open || !slices.IsSortedFunc(out, tidemark.CompareResults) {
		t.Fatalf("the drain emitted %d of %d windows, or out of key order", len(out), open)
	}
	if e.index.Len() != 0 || e.StateBytes() != 0 {
		t.Fatalf("after the drain %d open pairs, %d state bytes", e.index.Len(), e.StateBytes())
	}
}

// TestEmitOrderByConstruction: Process and Drain hand out the windows
// they close without sorting them (finish trusts the slab's order), so
// that order must be CompareResults' for keys of every shape: nulls, empty
// and long values (past the one-byte length), zero bytes, one or two parts,
// values sharing their first eight bytes.
func TestEmitOrderByConstruction(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 30))
	part := func() tidemark.KeyPart {
		switch rng.IntN(6) {
		case 0:
			return tidemark.KeyPart{Null: true}
		case 1:
			return tidemark.KeyPart{Value: ""}
		case 2:
			return tidemark.KeyPart{Value: strings.Repeat("x", 120+rng.IntN(20)) + fmt.Sprint(rng.IntN(5))}
		case 3:
			return tidemark.KeyPart{Value: fmt.Sprintf("a\x00%d", rng.IntN(9))}
		case 4:
			return tidemark.KeyPart{Value: fmt.Sprintf("prefix-shared-%d", rng.IntN(50))}
		}
		return tidemark.KeyPart{Value: fmt.Sprint(rng.IntN(200))}
	}
	for _, parts := range []int{1, 2} {
		cfg := Config{Window: tidemark.WindowSpec{Size: 10}, Lateness: 30 * time.Microsecond}
		e := mustNew(t, cfg, nil)
		emitted := 0
		check := func(what string, res BatchResult) {
			if !slices.IsSortedFunc(res.Emitted, tidemark.CompareResults) {
				t.Fatalf("%d-part keys, %s: emitted out of order", parts, what)
			}
			emitted += len(res.Emitted)
		}
		for batch := range 20 {
			recs := make([]tidemark.Record, 0, 300)
			for range 300 {
				ps := []tidemark.KeyPart{part()}
				if parts == 2 {
					ps = append(ps, part())
				}
				recs = append(recs, tidemark.Record{Source: "s", EventTime: int64(batch*10) + rng.Int64N(25), Key: tidemark.MakeKey(ps...)})
			}
			check(fmt.Sprintf("batch %d", batch), e.Process(recs, t0))
		}
		check("drain", e.Drain())
		if emitted == 0 {
			t.Fatal("nothing emitted")
		}
	}
}
