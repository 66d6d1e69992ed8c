package colfile

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	kzstd "github.com/klauspost/compress/zstd"
	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/encoding/thrift"
	"github.com/parquet-go/parquet-go/format"
)

// zstdWordCases are pages of int64 values of every shape the encoder
// tells apart: empty, one value, values sharing 0 to 8 high bytes with
// their predecessor, mixed runs, blocks past zstd's 128 KiB, and the
// page sizes the writer cuts.
func zstdWordCases(r *rand.Rand) map[string][]int64 {
	cases := map[string][]int64{"empty": nil, "one": {42}, "two": {1 << 40, 1<<40 + 5}}
	gen := func(n int, next func(prev int64, i int) int64) []int64 {
		w := make([]int64, n)
		for i := range w {
			var p int64
			if i > 0 {
				p = w[i-1]
			}
			w[i] = next(p, i)
		}
		return w
	}
	ts := int64(1_767_225_600_000_000)
	cases["timestamps"] = gen(32768, func(p int64, i int) int64 { return ts + int64(i)*997 + r.Int64N(5_000_000) })
	cases["sorted"] = gen(40000, func(p int64, i int) int64 { return max(p, ts) + r.Int64N(3)*1000 })
	cases["random"] = gen(5000, func(int64, int) int64 { return int64(r.Uint64()) })
	cases["small"] = gen(20000, func(int64, int) int64 { return r.Int64N(10_000_000) })
	cases["negative"] = gen(3000, func(int64, int) int64 { return -r.Int64N(1000) })
	cases["constant"] = gen(70000, func(int64, int) int64 { return 7 })
	cases["mixed"] = gen(50000, func(p int64, i int) int64 {
		switch (i / 300) % 4 {
		case 0:
			return int64(r.Uint64())
		case 1:
			return p ^ r.Int64N(1<<(8*r.IntN(8)+1))
		case 2:
			return p
		}
		return ts + r.Int64N(1<<20)
	})
	for k := range 9 {
		cases["shared"+string(rune('0'+k))] = gen(1000, func(p int64, i int) int64 {
			if i == 0 {
				return int64(r.Uint64())
			}
			if k == 8 {
				return p
			}
			bitsN := 64 - 8*k
			return int64(uint64(p)>>bitsN<<bitsN | (uint64(p)^(1<<(bitsN-1))|r.Uint64())&(1<<bitsN-1))
		})
	}
	return cases
}

func TestZstdWordsRoundTrip(t *testing.T) {
	dec, err := kzstd.NewReader(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer dec.Close()
	r := rand.New(rand.NewPCG(1, 2))
	var lits zwScratch
	for name, words := range zstdWordCases(r) {
		frame := appendZstdWords([]byte("prefix"), words, &lits)
		if !bytes.HasPrefix(frame, []byte("prefix")) {
			t.Fatalf("%s: the destination's bytes changed", name)
		}
		got, err := dec.DecodeAll(frame[len("prefix"):], nil)
		if err != nil {
			t.Fatalf("%s (%d values): decode: %v", name, len(words), err)
		}
		want := appendWords(nil, words)
		if !bytes.Equal(got, want) {
			t.Fatalf("%s (%d values): decoded %d bytes, not the %d written", name, len(words), len(got), len(want))
		}
		size := len(frame) - len("prefix")
		t.Logf("%-10s %6d values -> %7d bytes", name, len(words), size)
		// Values that share k high bytes with their predecessor keep about
		// 8-k bytes each (the timestamps share 4 or 5).
		if most := map[string]int{"timestamps": 4, "small": 5, "constant": 1, "shared3": 5, "shared5": 3, "shared7": 1}[name]; most > 0 && size > len(words)*most+len(words)/32+64 {
			t.Errorf("%s: %d values took %d bytes, want at most ~%d a value", name, len(words), size, most)
		}
		if size > 8*len(words)+len(words)/64+64 {
			t.Errorf("%s: %d values took %d bytes: more than stored", name, len(words), size)
		}
	}
}

// FuzzZstdWords holds appendZstdWords to the zstd decoder on any values:
// the bytes are taken 8 at a time as int64s.
func FuzzZstdWords(f *testing.F) {
	r := rand.New(rand.NewPCG(3, 4))
	for _, words := range zstdWordCases(r) {
		f.Add(appendWords(nil, words[:min(len(words), 600)]))
	}
	dec, err := kzstd.NewReader(nil)
	if err != nil {
		f.Fatal(err)
	}
	defer dec.Close()
	f.Fuzz(func(t *testing.T, b []byte) {
		words := make([]int64, len(b)/8)
		for i := range words {
			words[i] = int64(binary.LittleEndian.Uint64(b[8*i:]))
		}
		var lits zwScratch
		frame := appendZstdWords(nil, words, &lits)
		got, err := dec.DecodeAll(frame, nil)
		if err != nil {
			t.Fatalf("%d values: decode: %v", len(words), err)
		}
		if want := b[:8*len(words)]; !bytes.Equal(got, want) {
			t.Fatalf("%d values: decoded bytes differ", len(words))
		}
	})
}

// rawEventsLike are columns like tidemark's raw_events table's numbers
// and payload, and rows of them: event times within an hour, arrival
// times a millisecond apart, byte offsets, durations mostly zero, a
// per-batch constant, doubles.
func rawEventsLike(n int, seed uint64) ([]Column, [][]any) {
	cols := []Column{
		{Name: "arrival_time", Type: Timestamp, Dictionary: true},
		{Name: "batch_id", Type: Int64, Dictionary: true},
		{Name: "disorder_us", Type: Int64, Dictionary: true},
		{Name: "event_time", Type: Timestamp, Dictionary: true},
		{Name: "ingest_time", Type: Timestamp, Dictionary: true},
		{Name: "offset", Type: Int64, Dictionary: true},
		{Name: "payload", Type: ByteArray, Codec: Snappy},
		{Name: "value", Type: Double, Optional: true, Dictionary: true},
	}
	r := rand.New(rand.NewPCG(seed, 7))
	rows := make([][]any, n)
	for i := range rows {
		disorder := int64(0)
		if r.IntN(10) == 0 {
			disorder = int64(r.IntN(1_000_000))
		}
		var value any
		if i%17 != 0 {
			value = r.NormFloat64() * 1e6
		}
		rows[i] = []any{
			int64(1767261600000000 + int64(i)*1000), int64(42), disorder,
			int64(1767261600000000 + r.IntN(3_600_000_000)), int64(1767265200000000), int64(i) * 137,
			fmt.Appendf(nil, `{"event_time":"%d","page":"/p/%d"}`, i, i%40), value,
		}
	}
	return cols, rows
}

// TestInt64PagesUseWordFrames checks that the writer compresses the
// REQUIRED int64 pages of a zstd column with appendZstdWords when
// zstdWordsFit says so (the page body is the frame it makes of the page's
// values, which the readers' zstd decoder turns back into them), with
// zstd's own encoder otherwise, and no other page with it.
func TestInt64PagesUseWordFrames(t *testing.T) {
	cols, rows := rawEventsLike(32<<10+5000, 5)
	path := WriteRows(t, t.TempDir(), cols, rows, 32<<10, 16<<10)
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	pf, err := parquet.OpenFile(f, fi.Size())
	if err != nil {
		t.Fatal(err)
	}
	dec, err := kzstd.NewReader(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer dec.Close()
	var sc zwScratch
	framed, general := map[string]int{}, map[string]int{}
	for _, rg := range pf.Metadata().RowGroups {
		for _, cc := range rg.Columns {
			name := cc.MetaData.PathInSchema[0]
			b := make([]byte, cc.OffsetIndexLength)
			if _, err := f.ReadAt(b, cc.OffsetIndexOffset); err != nil {
				t.Fatal(err)
			}
			var oi format.OffsetIndex
			if err := thrift.Unmarshal(new(thrift.CompactProtocol), b, &oi); err != nil {
				t.Fatal(err)
			}
			for _, loc := range oi.PageLocations {
				span := make([]byte, loc.CompressedPageSize)
				if _, err := f.ReadAt(span, loc.Offset); err != nil {
					t.Fatal(err)
				}
				var h format.PageHeader
				r := bytes.NewReader(span)
				if err := thrift.NewDecoder(new(thrift.CompactProtocol).NewReader(r)).Decode(&h); err != nil {
					t.Fatal(err)
				}
				body := span[len(span)-r.Len():]
				if len(body) != int(h.CompressedPageSize) {
					t.Fatalf("%s page at %d: header says %d bytes of body, the offset index %d", name, loc.Offset, h.CompressedPageSize, len(body))
				}
				if cc.MetaData.Codec != format.Zstd || h.Type != format.DataPage || h.DataPageHeader.V.Encoding != format.Plain || cc.MetaData.Type != format.Int64 {
					continue
				}
				plain, err := dec.DecodeAll(body, nil)
				if err != nil {
					t.Fatalf("%s page at %d: %v", name, loc.Offset, err)
				}
				words := make([]int64, len(plain)/8)
				for i := range words {
					words[i] = int64(binary.LittleEndian.Uint64(plain[8*i:]))
				}
				is := bytes.Equal(appendZstdWords(nil, words, &sc), body)
				if want := zstdWordsFit(words); is != want {
					t.Errorf("%s page at %d: written as a word frame %v, want %v", name, loc.Offset, is, want)
				}
				if is {
					framed[name]++
				} else {
					general[name]++
				}
			}
		}
	}
	// event_time, arrival_time and offset are REQUIRED int64 columns whose
	// values rarely repeat their predecessor: word frames; disorder_us is
	// 90% zeros: zstd's own encoder. The dictionary ones (batch_id,
	// ingest_time) have no PLAIN pages.
	for _, name := range []string{"event_time", "arrival_time", "offset"} {
		if framed[name] < 2 || general[name] > 0 {
			t.Errorf("%s: %d pages written as word frames and %d by zstd, want all of 2+ as frames", name, framed[name], general[name])
		}
	}
	if framed["disorder_us"] > 0 || general["disorder_us"] < 2 {
		t.Errorf("disorder_us: %d pages written as word frames and %d by zstd, want all by zstd", framed["disorder_us"], general["disorder_us"])
	}
	if len(framed) != 3 {
		t.Errorf("word frames in %v, want only event_time, arrival_time and offset", framed)
	}
}

// TestZstdWordsReferenceDecoder decodes the frames appendZstdWords makes
// with the reference zstd CLI (the C library that parquet-java, arrow-rs
// and DuckDB read pages with), byte-exact against the PLAIN values: the
// shapes of zstdWordCases, pages like the writer's (event times, byte
// offsets, durations), and the edges of the frame and block headers.
// Without a zstd binary it is skipped, except with TIDEMARK_REQUIRE_ZSTD=1
// (scripts/test.sh installs zstd and sets it), where that is a failure.
func TestZstdWordsReferenceDecoder(t *testing.T) {
	bin, err := exec.LookPath("zstd")
	if err != nil {
		if os.Getenv("TIDEMARK_REQUIRE_ZSTD") == "1" {
			t.Fatalf("no zstd binary in PATH (TIDEMARK_REQUIRE_ZSTD=1): %v", err)
		}
		t.Skipf("no zstd binary in PATH, the reference decoder is not checked: %v", err)
	}
	r := rand.New(rand.NewPCG(5, 6))
	cases := zstdWordCases(r)
	for name, words := range zstdReferenceCases(r) {
		cases[name] = words
	}
	dir := t.TempDir()
	var sc zwScratch
	for name, words := range cases {
		path := filepath.Join(dir, name+".zst")
		if err := os.WriteFile(path, appendZstdWords(nil, words, &sc), 0o644); err != nil {
			t.Fatal(err)
		}
		var stdout, stderr bytes.Buffer
		cmd := exec.Command(bin, "-d", "-c", "-q", path)
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			t.Errorf("%s (%d values): zstd -d: %v: %s", name, len(words), err, stderr.Bytes())
			continue
		}
		got, want := stdout.Bytes(), appendWords(nil, words)
		if !bytes.Equal(got, want) {
			at := 0
			for at < min(len(got), len(want)) && got[at] == want[at] {
				at++
			}
			t.Errorf("%s (%d values): zstd decoded %d bytes, want %d, first difference at byte %d", name, len(words), len(got), len(want), at)
		}
	}
}

// zstdReferenceCases are pages like the writer's and the values at the
// limits of appendZstdWords's headers: the content size in 1, 2 or 4
// bytes, blocks of exactly zwMaxBlock and one value past it, as
// sequences and as whole values, and sequence counts of 1 and 2 bytes (3
// would need a block past zwMaxBlock).
func zstdReferenceCases(r *rand.Rand) map[string][]int64 {
	const page = PageBytes / 8 // values in a page the writer cuts
	ts := int64(1_767_261_600_000_000)
	gen := func(n int, next func(i int) int64) []int64 {
		w := make([]int64, n)
		for i := range w {
			w[i] = next(i)
		}
		return w
	}
	seq := func(i int) int64 { return ts + int64(i)*1000 + r.Int64N(1000) } // share 5-6 bytes
	whole := func(int) int64 { return int64(r.Uint64()) }                   // share none
	cases := map[string][]int64{
		"event_time":  gen(page, func(int) int64 { return ts + r.Int64N(3_600_000_000) }),
		"arrival":     gen(page, func(i int) int64 { return ts + int64(i)*1000 + r.Int64N(3) }),
		"offset":      gen(page, func(i int) int64 { return int64(i)*107 + r.Int64N(50) }),
		"offset_big":  gen(page, func(i int) int64 { return 1<<33 + int64(i)*107 }),
		"duration":    gen(page, func(int) int64 { return r.Int64N(600_000_000) }),
		"negative_ts": gen(page, func(i int) int64 { return -ts + int64(i)*1000 }),
		"extremes":    gen(3000, func(i int) int64 { return []int64{math.MinInt64, math.MaxInt64, 0, -1}[i%4] }),
		"share0":      gen(2000, func(i int) int64 { return int64(uint64(i%2)<<63 | r.Uint64()>>1) }),
		"share7":      gen(2000, func(i int) int64 { return ts&^0xff | int64(i%2) }),
	}
	for _, n := range []int{31, 32, 33, 8223, 8224, 8225} { // 248, 256, 264; 65784, 65792, 65800 bytes
		cases[fmt.Sprintf("size%d", n)] = gen(n, seq)
	}
	for _, n := range []int{zwMaxBlock / 8, zwMaxBlock/8 + 1, zwMaxBlock/8 + 2, 2 * zwMaxBlock / 8} {
		cases[fmt.Sprintf("seqblock%d", n)] = gen(n, seq)
		cases[fmt.Sprintf("wholeblock%d", n)] = gen(n, whole)
	}
	for _, n := range []int{127, 128, 129} { // one-, then two-byte sequence counts (with the frame's first)
		cases[fmt.Sprintf("seqs%d", n)] = gen(n, seq)
	}
	// Runs broken by whole values: blocks with trailing literals.
	cases["broken"] = gen(page, func(i int) int64 {
		if i%97 == 0 {
			return int64(r.Uint64())
		}
		return seq(i)
	})
	return cases
}
