package colfile

import (
	"fmt"
	"sync"

	"github.com/klauspost/compress/s2"
	kzstd "github.com/klauspost/compress/zstd"
	"github.com/parquet-go/parquet-go/compress"
	"github.com/parquet-go/parquet-go/compress/lz4"
	"github.com/parquet-go/parquet-go/compress/snappy"
	"github.com/parquet-go/parquet-go/compress/zstd"
)

// impl is the codec's page compressor.
func (c Codec) impl() compress.Codec {
	switch c {
	case Snappy:
		return &snappyCodec
	case LZ4Raw:
		return &lz4Fastest
	}
	return zstdFastest
}

// lz4Fastest is LZ4_RAW with lz4's fast block compressor: parquet-go's
// default for it is the high-compression one, ~10x slower.
var lz4Fastest = lz4.Codec{Level: lz4.Fastest}

// snappyFast is SNAPPY written with s2's fast snappy-compatible encoder:
// parquet-go's snappy codec uses the "better" one, which costs ~1.7x the
// time for ~6% smaller pages. The output is plain snappy blocks either way.
// On generated NDJSON snappy compresses at about twice zstd's fastest
// level (~500 vs ~260 MB/s per core, 64 KiB to 1 MiB pages) for pages
// ~35% larger (ratio 5.9 vs 8.0).
type snappyFast struct{ snappy.Codec }

func (snappyFast) Encode(dst, src []byte) ([]byte, error) {
	return s2.EncodeSnappy(dst[:cap(dst)], src), nil
}

var snappyCodec snappyFast

// zstdWindow is the match window of the zstd encoders: a page is at most
// about PageBytes (256 KiB), an int64 column chunk of a row group 256 KiB.
// klauspost's default window is 8 MiB, and an encoder then keeps a 16 MiB
// history buffer for any input over one block (128 KiB): at batch 5 of a
// 1M-event stream the pooled encoders held 16 MB of the 117 MB live heap,
// allocated and zeroed again after every GC emptied the pool. Without
// WithLowerEncoderMem the history is at least 1 MiB plus the window
// whatever the window; with it, the window plus one block (384 KiB). The
// files are byte for byte the same on the bench's input (payload snappy),
// 0.002% larger with a zstd payload, and BenchmarkLongRunMemory's heap
// 3-4 MB smaller.
const zstdWindow = 256 << 10

// zstdCodec is ZSTD at the fastest level (the default level cost ~25%
// more time for ~5% smaller files), as parquet-go's codec writes it (no
// checksum, zero frames), with the smaller window above and a free list
// that a GC does not empty (parquet-go pools its encoders in a
// sync.Pool).
type zstdCodec struct {
	zstd.Codec
	mu   sync.Mutex
	free []*kzstd.Encoder
}

var zstdFastest = &zstdCodec{Codec: zstd.Codec{Level: zstd.SpeedFastest}}

func (c *zstdCodec) Encode(dst, src []byte) ([]byte, error) {
	e, err := c.get()
	if err != nil {
		return nil, err
	}
	out := e.EncodeAll(src, dst[:0])
	c.put(e)
	return out, nil
}

func (c *zstdCodec) get() (*kzstd.Encoder, error) {
	c.mu.Lock()
	var e *kzstd.Encoder
	if n := len(c.free); n > 0 {
		e, c.free = c.free[n-1], c.free[:n-1]
	}
	c.mu.Unlock()
	if e == nil {
		return newZstdEncoder()
	}
	return e, nil
}

// put keeps e for the next page. Every encoder is kept: there are only
// ever as many as compressed at once (column workers preempted mid-page
// included). Dropping those over GOMAXPROCS made new ones, tables and
// history, all the time.
func (c *zstdCodec) put(e *kzstd.Encoder) {
	c.mu.Lock()
	c.free = append(c.free, e)
	c.mu.Unlock()
}

// zstdMaker makes the zstd encoders, on a goroutine of the process's own
// (ZstdEncoderMaker). An encoder makes its channels on first use, and a
// channel made inside a testing/synctest bubble panics when used from
// outside it: an encoder first used by a writer under synctest and then
// kept in the free list broke the next writer outside the bubble. So each
// encoder is made, and used once, there; its channels belong to no bubble.
var zstdMaker = struct {
	sync.Mutex
	served bool
	ask    chan struct{}
	made   chan zstdMade
}{ask: make(chan struct{}), made: make(chan zstdMade)}

type zstdMade struct {
	e   *kzstd.Encoder
	err error
}

// ZstdEncoderMaker returns the loop that makes every zstd encoder of the
// process's writers from then on; it never returns. Run it once, on a
// goroutine started outside any testing/synctest bubble (package lake
// does, in its init). Without it, encoders are made on the goroutine
// that first needs one, which is fine outside synctest.
func ZstdEncoderMaker() func() {
	zstdMaker.Lock()
	defer zstdMaker.Unlock()
	if zstdMaker.served {
		return func() { select {} } // one maker is enough
	}
	zstdMaker.served = true
	return func() {
		for range zstdMaker.ask {
			e, err := makeZstdEncoder()
			zstdMaker.made <- zstdMade{e, err}
		}
	}
}

func makeZstdEncoder() (*kzstd.Encoder, error) {
	e, err := kzstd.NewWriter(nil, kzstd.WithEncoderLevel(kzstd.SpeedFastest), kzstd.WithEncoderConcurrency(1),
		kzstd.WithWindowSize(zstdWindow), kzstd.WithLowerEncoderMem(true), kzstd.WithZeroFrames(true), kzstd.WithEncoderCRC(false))
	if err != nil {
		return nil, fmt.Errorf("zstd encoder: %w", err)
	}
	e.EncodeAll(nil, nil)
	return e, nil
}

func newZstdEncoder() (*kzstd.Encoder, error) {
	zstdMaker.Lock()
	defer zstdMaker.Unlock()
	if !zstdMaker.served {
		return makeZstdEncoder()
	}
	zstdMaker.ask <- struct{}{}
	m := <-zstdMaker.made
	return m.e, m.err
}
