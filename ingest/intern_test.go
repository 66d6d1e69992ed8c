package ingest

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
	"unsafe"

	"tidemark"
)

func TestKeyTableInterns(t *testing.T) {
	kt := newKeyTable()
	a := kt.intern([]byte("\x01\x02/a"))
	b := kt.intern([]byte("\x01\x02/a"))
	if a != "\x01\x02/a" || b != a {
		t.Fatalf("got %q and %q", a, b)
	}
	buf := []byte("\x01\x02/b")
	c := kt.intern(buf)
	buf[3] = 'x' // the caller's buffer is reused: the key must not change
	if c != "\x01\x02/b" {
		t.Fatalf("the interned key shares the caller's buffer: %q", c)
	}
	long := make([]byte, internMaxKey+1)
	for i := range long {
		long[i] = 'k'
	}
	if k := kt.intern(long); string(k) != string(long) {
		t.Fatalf("a key over internMaxKey came back as %q", k)
	}
	if n := testing.AllocsPerRun(100, func() { kt.intern([]byte("\x01\x02/a")) }); n != 0 {
		t.Fatalf("a known key allocated %.0f times", n)
	}
	// Below its bound the table drops no key (it grows, 1,024 slots at
	// first): each comes back as the very string interned first. The bound
	// is in slots, and a group of 8 that fills up grows the table, so with
	// an unlucky hash seed (~0.1% of tables) 1,024 keys reach the bound,
	// where a full group replaces an entry, as it should; such a table is
	// made again (a new seed) rather than checked.
	var first []tidemark.Key
	for try := 0; ; try++ {
		kt = newKeyTable()
		first = first[:0]
		for i := range internMaxSlots / 8 {
			first = append(first, kt.intern(fmt.Appendf(nil, "\x01\x05p%05d", i)))
		}
		if len(kt.slots) < internMaxSlots {
			break
		}
		if try == 9 {
			t.Fatalf("%d keys reached the bound of %d slots in 10 tables", len(first), internMaxSlots)
		}
	}
	if len(kt.slots) == internFirstSlots {
		t.Fatalf("%d keys in %d slots: the table did not grow", len(first), len(kt.slots))
	}
	for i, k := range first {
		got := kt.intern(fmt.Appendf(nil, "\x01\x05p%05d", i))
		if unsafe.StringData(string(got)) != unsafe.StringData(string(k)) {
			t.Fatalf("key %q was dropped before the table reached its bound", k)
		}
	}
}

// TestKeyTableBounded feeds far more distinct keys than the table holds:
// it stops at its bound, every answer has the right bytes, and a key that
// keeps coming back is found again (not allocated) almost every time.
func TestKeyTableBounded(t *testing.T) {
	kt := newKeyTable()
	rng := rand.New(rand.NewPCG(1, 2))
	hot := []byte("\x01\x03hot")
	hits, tries := 0, 0
	for i := range 400_000 {
		cold := fmt.Appendf(nil, "\x01\x07u%06d", rng.IntN(300_000))
		if k := kt.intern(cold); string(k) != string(cold) {
			t.Fatalf("got %q for %q", k, cold)
		}
		if i%10 == 0 {
			first := kt.intern(hot)
			tries++
			if testing.AllocsPerRun(1, func() {
				if kt.intern(hot) != first {
					t.Fatal("the hot key changed")
				}
			}) == 0 {
				hits++
			}
		}
	}
	if len(kt.slots) != internMaxSlots {
		t.Fatalf("table has %d slots, want its bound %d", len(kt.slots), internMaxSlots)
	}
	if hits < tries*9/10 {
		t.Fatalf("the hot key was found again only %d of %d times", hits, tries)
	}
}

// genLines are lines like scripts/gen's, with users drawn from `users`.
func genLines(n, users int) [][]byte {
	rng := rand.New(rand.NewPCG(7, 8))
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	lines := make([][]byte, n)
	for i := range lines {
		et := base.Add(time.Duration(i) * 500 * time.Microsecond)
		at := et.Add(time.Duration(rng.IntN(300)) * time.Millisecond)
		lines[i] = fmt.Appendf(nil, `{"event_time":"%s","arrival_time":"%s","page":"/p/%d","country":"NG","client":"web","user_id":"u%d","action":"view","value":%d.%02d}`,
			et.Format("2006-01-02T15:04:05.000Z07:00"), at.Format("2006-01-02T15:04:05.000Z07:00"), rng.IntN(1000), rng.IntN(users), rng.IntN(100), rng.IntN(100))
	}
	return lines
}

// BenchmarkDecodeGenerated decodes scripts/gen-like lines as the stream
// of the README's benchmarks does: keyed by page (1,000 keys) and by user
// (300,000 keys, issue 16's per-user dashboard).
func BenchmarkDecodeGenerated(b *testing.B) {
	for _, key := range []string{"page", "user_id"} {
		b.Run("key="+key, func(b *testing.B) {
			d, err := NewNDJSONDecoder(DecoderConfig{Keys: []string{key}, ValueField: "value", ArrivalField: "arrival_time", MaxFuture: -1})
			if err != nil {
				b.Fatal(err)
			}
			benchDecode(b, d, genLines(1<<18, 300_000))
		})
	}
}

// FuzzKeyTable interns a sequence of keys cut from the input (a small
// alphabet, so keys repeat and groups fill) and checks every answer has
// the bytes asked for, however the table grew or replaced entries.
func FuzzKeyTable(f *testing.F) {
	f.Add([]byte("a,b,a,ccc,b,,a"), uint8(3))
	f.Add([]byte("x,y,z,x,y,z,xyz"), uint8(1))
	f.Fuzz(func(t *testing.T, in []byte, spread uint8) {
		kt := newKeyTable()
		var key []byte
		for round := range int(spread%8) + 1 {
			for _, c := range in {
				if c != ',' {
					key = append(key, c)
					continue
				}
				key = fmt.Appendf(key, "#%d", round) // more distinct keys each round
				if got := kt.intern(key); string(got) != string(key) {
					t.Fatalf("got %q for %q", got, key)
				}
				key = key[:0]
			}
		}
		if len(kt.slots) > internMaxSlots || len(kt.tags)*8 != len(kt.slots) {
			t.Fatalf("table of %d slots, %d tag words", len(kt.slots), len(kt.tags))
		}
	})
}
