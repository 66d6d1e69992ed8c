package lake

import (
	"fmt"
	"log/slog"
	"sync"

	"github.com/klauspost/compress/s2"
	kzstd "github.com/klauspost/compress/zstd"
	"github.com/parquet-go/parquet-go/compress"
	"github.com/parquet-go/parquet-go/compress/lz4"
	"github.com/parquet-go/parquet-go/compress/snappy"
	"github.com/parquet-go/parquet-go/compress/zstd"
)

// PayloadCodec is the Parquet compression of the payload column of
// raw_events and quarantine (the raw lines, most of a lake's bytes); the
// other columns are always zstd. Every Parquet column chunk names its own
// codec, so files written with different payload codecs can share a table.
type PayloadCodec string

// The payload codecs. Snappy is the default: on generated NDJSON it
// compresses at about twice zstd's fastest level (~500 vs ~260 MB/s per
// core, 64 KiB to 1 MiB pages) for files ~35% larger (ratio 5.9 vs 8.0),
// and every Parquet reader reads it. LZ4_RAW is about as fast as snappy
// here but needs Spark >= 3.4 / parquet-java >= 1.13 to read.
const (
	PayloadZstd   PayloadCodec = "zstd"
	PayloadSnappy PayloadCodec = "snappy"
	PayloadLZ4Raw PayloadCodec = "lz4_raw"

	DefaultPayloadCodec = PayloadSnappy
)

// ParsePayloadCodec reads a codec name as --payload-codec takes it.
func ParsePayloadCodec(s string) (PayloadCodec, error) {
	switch c := PayloadCodec(s); c {
	case PayloadZstd, PayloadSnappy, PayloadLZ4Raw:
		return c, nil
	}
	return "", fmt.Errorf("payload codec %q: want zstd, snappy or lz4_raw", s)
}

// The codecs' encoders. LZ4_RAW uses lz4's fast block compressor:
// parquet-go's default for it is the high-compression one, ~10x slower.
var lz4Fastest = lz4.Codec{Level: lz4.Fastest}

// snappyFast is SNAPPY written with s2's fast snappy-compatible encoder:
// parquet-go's snappy codec uses the "better" one, which costs ~1.7x the
// time for ~6% smaller pages. The output is plain snappy blocks either way.
type snappyFast struct{ snappy.Codec }

func (snappyFast) Encode(dst, src []byte) ([]byte, error) {
	return s2.EncodeSnappy(dst[:cap(dst)], src), nil
}

var snappyCodec snappyFast

// zstdWindow is the match window of the zstd encoders: a page is at most
// about pageBytes (256 KiB), an int64 column chunk of a row group 256 KiB.
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

// zstdCodec is ZSTD at the fastest level, as parquet-go's codec writes it
// (no checksum, zero frames), with the smaller window above and a free
// list that a GC does not empty (parquet-go pools its encoders in a
// sync.Pool). Decoding is parquet-go's.
type zstdCodec struct {
	zstd.Codec
	mu   sync.Mutex
	free []*kzstd.Encoder
}

var zstdFastest = &zstdCodec{Codec: zstd.Codec{Level: zstd.SpeedFastest}}

func (c *zstdCodec) Encode(dst, src []byte) ([]byte, error) {
	c.mu.Lock()
	var e *kzstd.Encoder
	if n := len(c.free); n > 0 {
		e, c.free = c.free[n-1], c.free[:n-1]
	}
	c.mu.Unlock()
	if e == nil {
		var err error
		if e, err = newZstdEncoder(); err != nil {
			return nil, err
		}
	}
	out := e.EncodeAll(src, dst[:0])
	c.mu.Lock()
	// Every encoder is kept: there are only ever as many as compressed at
	// once (column workers preempted mid-page included). Dropping those
	// over GOMAXPROCS made new ones, tables and history, all the time.
	c.free = append(c.free, e)
	c.mu.Unlock()
	return out, nil
}

// zstdMaker makes the zstd encoders, on a goroutine of its own started
// with the package. An encoder makes its channels on first use, and a
// channel made inside a testing/synctest bubble panics when used from
// outside it: an encoder first used by a stream under synctest and then
// kept in the free list broke the next writer outside the bubble. So each
// encoder is made, and used once, here; its channels belong to no bubble.
var zstdMaker = struct {
	sync.Mutex
	ask  chan struct{}
	made chan zstdMade
}{ask: make(chan struct{}), made: make(chan zstdMade)}

type zstdMade struct {
	e   *kzstd.Encoder
	err error
}

func init() { go makeZstdEncoders() }

// makeZstdEncoders is zstdMaker's goroutine; it lives as long as the
// process (the tests' goroutine-leak checks ignore it).
func makeZstdEncoders() {
	for range zstdMaker.ask {
		e, err := kzstd.NewWriter(nil, kzstd.WithEncoderLevel(kzstd.SpeedFastest), kzstd.WithEncoderConcurrency(1),
			kzstd.WithWindowSize(zstdWindow), kzstd.WithLowerEncoderMem(true), kzstd.WithZeroFrames(true), kzstd.WithEncoderCRC(false))
		if err != nil {
			err = fmt.Errorf("zstd encoder: %w", err)
		} else {
			e.EncodeAll(nil, nil)
		}
		zstdMaker.made <- zstdMade{e, err}
	}
}

func newZstdEncoder() (*kzstd.Encoder, error) {
	zstdMaker.Lock()
	defer zstdMaker.Unlock()
	zstdMaker.ask <- struct{}{}
	m := <-zstdMaker.made
	return m.e, m.err
}

func (c PayloadCodec) codec() compress.Codec {
	switch c {
	case PayloadSnappy:
		return &snappyCodec
	case PayloadLZ4Raw:
		return &lz4Fastest
	}
	return nil // zstd: the table's codec
}

// payloadCodecFor resolves the payload codec of an opened lake. A new lake
// records the asked one (DefaultPayloadCodec when none) in its tables'
// configuration. On an existing lake "" takes the recorded one, and zstd
// on a lake from before the option (so its files stay one codec); another
// codec asked explicitly is used for the files this process writes and
// logged, the record is left as it is: a table may mix codecs, readers
// take each file's from its own metadata.
func payloadCodecFor(asked PayloadCodec, recorded map[string]string, exists bool, log *slog.Logger) (PayloadCodec, error) {
	if asked != "" {
		if _, err := ParsePayloadCodec(string(asked)); err != nil {
			return "", err
		}
	}
	if !exists {
		if asked == "" {
			return DefaultPayloadCodec, nil
		}
		return asked, nil
	}
	had := PayloadZstd
	if s := recorded[confCodec]; s != "" {
		c, err := ParsePayloadCodec(s)
		if err != nil {
			return "", fmt.Errorf("table configuration %s: %w", confCodec, err)
		}
		had = c
	}
	if asked == "" {
		return had, nil
	}
	if asked != had {
		log.Info("payload codec differs from the lake's; this run's files use it, the others stay readable as they are",
			"payload_codec", asked, "lake_payload_codec", had)
	}
	return asked, nil
}

// withPayload sets the table's payload codec.
func (t *table) withPayload(c PayloadCodec) *table {
	t.payload = c
	return t
}
