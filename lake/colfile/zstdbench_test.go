package colfile

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/parquet-go/parquet-go/encoding/plain"
	"github.com/parquet-go/parquet-go/encoding/rle"
)

// benchPage is one page body as a zstd column's page is compressed:
// words are its int64 values when it is a REQUIRED PLAIN int64 page (the
// pages appendZstdWords may frame), nil otherwise.
type benchPage struct {
	body  []byte
	words []int64
}

// benchPages are pages like those of a raw_events row group of the
// 1M-event bench input (scripts/gen: 1,000 events per second of event
// time, arrival order, lognormal lag, 3% of events 1-6 h late; lines of
// ~150-300 bytes), PageBytes of values each: the int64 columns, a page of
// dictionary indexes (a key of 1,000 values) and a PLAIN page of key
// strings.
func benchPages() map[string]benchPage {
	r := rand.New(rand.NewPCG(34, 1))
	const n = PageBytes / 8
	const t0 = int64(1_767_225_600_000_000)
	gen := func(f func(i int) int64) benchPage {
		w := make([]int64, n)
		for i := range w {
			w[i] = f(i)
		}
		return benchPage{body: appendWords(nil, w), words: w}
	}
	var offset int64
	pages := map[string]benchPage{
		// Arrival order: each event's time is its arrival less a lognormal
		// lag (median ~1 s), 3% of them hours late.
		"event_time": gen(func(i int) int64 {
			arrival := t0 + int64(i)*1000
			lag := int64(math.Exp(r.NormFloat64()) * 1e6)
			if r.IntN(100) < 3 {
				lag = 3_600_000_000 + r.Int64N(5*3_600_000_000)
			}
			return arrival - lag
		}),
		// Arrival times in milliseconds, as the generator writes them,
		// ~1 ms apart.
		"arrival_time": gen(func(i int) int64 { return t0 + int64(i)*1000 + r.Int64N(3)*1000 }),
		// Byte offsets of lines of 150-300 bytes.
		"offset": gen(func(int) int64 { offset += 150 + r.Int64N(150); return offset }),
		// disorder_us: 0 for in-order events, else the lag.
		"disorder_us": gen(func(int) int64 {
			if r.IntN(10) > 0 {
				return 0
			}
			return r.Int64N(5_000_000)
		}),
	}
	// A dictionary-encoded key of 1,000 values (10 bits an index), RLE /
	// bit-packed as the data page holds it.
	codes := make([]int32, n)
	for i := range codes {
		codes[i] = int32(r.IntN(1000))
	}
	idx, err := (&rle.Encoding{BitWidth: 10}).EncodeInt32(nil, codes)
	if err != nil {
		panic(err)
	}
	pages["dict_indexes"] = benchPage{body: append([]byte{10}, idx...)}
	// A PLAIN page of per-user key strings (a column the dictionary
	// probation leaves PLAIN).
	var text []byte
	for len(text) < PageBytes {
		text = plain.AppendByteArray(text, fmt.Appendf(nil, "user-%d-%08x", r.IntN(300_000), r.Uint32()))
	}
	pages["user_text"] = benchPage{body: text}
	return pages
}

// BenchmarkInt64Pages compares the two ways a zstd column's page can be
// compressed: "colfile" as writePage does it (appendZstdWords for a
// REQUIRED PLAIN int64 page when zstdWordsFit, klauspost otherwise) and
// "klauspost", klauspost/compress's encoder at the fastest level used
// directly (EncodeAll with a reused encoder, the codec of every other
// page). It reports MB/s of uncompressed page and the compressed size
// (out_bytes, and ratio: uncompressed / compressed). The pages where the
// framing does not apply (dict_indexes, user_text, disorder_us) are the
// same both ways: the control. Figures: see the package doc.
func BenchmarkInt64Pages(b *testing.B) {
	pages := benchPages()
	for _, name := range []string{"event_time", "arrival_time", "offset", "disorder_us", "dict_indexes", "user_text"} {
		p := pages[name]
		for _, way := range []string{"colfile", "klauspost"} {
			b.Run(name+"/"+way, func(b *testing.B) {
				dst := make([]byte, 0, 2*len(p.body))
				var sc zwScratch
				b.SetBytes(int64(len(p.body)))
				var out []byte
				for b.Loop() {
					if way == "colfile" && p.words != nil && zstdWordsFit(p.words) {
						out = appendZstdWords(dst[:0], p.words, &sc)
						continue
					}
					var err error
					if out, err = zstdFastest.Encode(dst[:0], p.body); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(len(out)), "out_bytes")
				b.ReportMetric(float64(len(p.body))/float64(len(out)), "ratio")
			})
		}
	}
}
