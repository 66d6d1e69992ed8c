package colfile

import (
	"bytes"
	"slices"
	"sync"
	"unsafe"

	"github.com/parquet-go/parquet-go/compress"
	"github.com/parquet-go/parquet-go/encoding/thrift"
	"github.com/parquet-go/parquet-go/format"
)

// Page and dictionary bounds. How a chunk chooses between a dictionary
// and PLAIN is in the package doc.
const (
	// PageBytes is about how many bytes of a column's values a page holds
	// (uncompressed): 256 KiB instead of 1 MiB took ~19 MB off the
	// 1M-event stream's peak RSS (median of 4 pairs, 258 -> 239 MiB) for
	// 0.6% larger files; snappy and zstd run as fast on 256 KiB as on 1 MiB.
	PageBytes = 256 << 10

	dictMaxBytes  = 1 << 20 // a dictionary page's most bytes (uncompressed)
	dictProbe     = 2048
	dictWordRatio = 16
	dictByteRatio = 2
	dictWordMax   = 4096
	dictCheck     = 1024 // values between checks of a dictionary's size
	// growMax bounds the room a chunk reserves for its pages at once
	// (tidemark's row groups end at 64 MiB).
	growMax = 64 << 20
)

// Chunk encodings.
const (
	encDict  = iota // RLE_DICTIONARY pages
	encPlain        // PLAIN pages
)

// Chunk encodes one column chunk (one column of one row group): its
// pages, compressed, in memory until Writer.WriteRowGroup writes them to
// the file, with the chunk's statistics and the column and offset index
// entries of its pages. Values are given a run at a time (Add); Finish
// cuts the last page. A Chunk is used by one goroutine at a time.
type Chunk struct {
	col   Column
	codec compress.Codec
	opt   bool

	enc      int
	dictable bool

	// The page being filled. words and plainBytes hold its non-null values
	// PLAIN while the chunk is PLAIN or its dictionary on probation:
	// numbers as the integer of their 8 PLAIN bytes, so one dictionary and
	// one PLAIN encoder serve INT64 and DOUBLE; byte values PLAIN-encoded.
	// codes holds their dictionary indexes while there is a dictionary.
	n          int // values, nulls included
	nulls      int
	defs       []byte
	words      []int64
	bools      []bool
	plainBytes []byte
	codes      []int32
	pb         pageBounds
	pageGen    uint32
	seen       []uint32 // by dictionary index: pageGen of the page last seen in
	probing    bool     // the dictionary is on probation (first page)
	capRows    int      // the values a page's buffers are sized for
	expect     int      // rows the chunk is expected to hold (0: unknown)
	rows       int64    // rows in the pages cut

	// The dictionary: words or byte values (PLAIN-encoded in dictPlain).
	wordDict  map[int64]int32
	wordList  []int64
	byteDict  map[string]int32
	dictPlain []byte
	dictLen   int
	ptrs      []ptrSlot // byte values looked up in this Add, by address
	prevCode  int32     // the number last looked up, and its index
	prevWord  int64
	hasPrev   bool

	// Output.
	pages     bytes.Buffer // data pages: headers and compressed bodies
	dictPage  []byte       // the dictionary page, header and body, at finish
	locs      []format.PageLocation
	index     format.ColumnIndex
	noIndex   bool       // a page held a NaN: no bounds a reader could trust
	cb        pageBounds // the chunk's
	numValues int64
	nullCount int64
	uncomp    int64 // bytes of headers and uncompressed pages
	nDict     int32 // data pages by encoding
	nPlain    int32

	lv     []byte // encoded levels or indexes of a page
	hdr    thrift.Encoder
	hdrBuf bytes.Buffer
}

// ptrSlot remembers the dictionary index of the byte value at p (n bytes)
// for the rest of an Add call, while the values' bytes cannot change:
// callers share the bytes of repeated strings (tidemark's decoder interns
// key values: source, file, status), so most values are found by address,
// without hashing their bytes. code is the index plus one; zero is an
// empty slot.
type ptrSlot struct {
	p    *byte
	n    int
	code int32
}

const ptrSlots = 1024 // a power of two

func ptrHash(p *byte) uint64 {
	return uint64(uintptr(unsafe.Pointer(p))) * 0x9e3779b97f4a7c15 >> (64 - 10)
}

// Chunk encoders are pooled by type, so a file's encoders reuse the
// buffers of the files written before it: tidemark's
// BenchmarkLongRunMemory allocated 20-30% less than without the pool
// (0.96-1.00 vs 1.17-1.32 GB a run) for 3-5 MB more live heap between
// batches. A sync.Pool: a GC empties it, so an idle stream keeps nothing.
// An encoder's compressed pages buffer is kept up to pooledPages bytes:
// the payload's (~1 MB a 32k-row group of ~180-byte lines) was dropped at
// 512 KiB and grown anew for every row group, 0.09-0.12 CPU-s per 1M
// events of growSlice (its zeroing and page faults); kept, the 1M-event
// run took 1.97 against 2.01 CPU-s (median of 10 alternating runs),
// BenchmarkLongRunMemory's heap unchanged.
var chunkPools [ByteArray + 1]sync.Pool

const pooledPages = 8 << 20

// NewChunk returns an encoder of column c's chunks, a pooled one when
// there is one, its page buffers sized for rows values (at most a page's)
// when new.
func NewChunk(c Column, rows int) *Chunk {
	e, _ := chunkPools[c.Type].Get().(*Chunk)
	if e == nil {
		e = new(Chunk)
		e.hdr = *thrift.NewEncoder(new(thrift.CompactProtocol).NewWriter(&e.hdrBuf))
	}
	e.col, e.codec, e.opt = c, c.Codec.impl(), c.Optional
	e.dictable = c.dictable()
	rows = min(rows, PageBytes/8)
	e.capRows = rows
	if c.Optional && e.defs == nil {
		e.defs = make([]byte, 0, rows)
	}
	switch c.Type {
	case Timestamp, Int64, Double:
		if e.words == nil {
			e.words = make([]int64, 0, rows+1)
		}
	case Boolean:
		if e.bools == nil {
			e.bools = make([]bool, 0, rows)
		}
	case String:
		if e.dictable && e.plainBytes == nil {
			e.plainBytes = make([]byte, 0, min(rows, dictProbe)*16) // the probation's
		}
		fallthrough
	default:
		if e.plainBytes == nil {
			// A guess at the values' size: a raw line is most of a row.
			e.plainBytes = make([]byte, 0, min(PageBytes+PageBytes/4, rows*64))
		}
	}
	if c.Type == String && e.dictable && e.ptrs == nil {
		e.ptrs = make([]ptrSlot, ptrSlots)
	}
	if e.dictable && e.codes == nil {
		e.codes = make([]int32, 0, min(rows, dictProbe))
	}
	e.Reset()
	return e
}

// Column is the column the chunk encodes.
func (e *Chunk) Column() Column { return e.col }

// Expect tells the chunk how many rows it is to hold (0: unknown), so
// that it reserves room for its pages once instead of growing by doubling
// (70 MB per M events of allocation, 42 MB so).
func (e *Chunk) Expect(rows int) { e.expect = rows }

// Release returns the encoder to its pool; it must not be used after.
func (e *Chunk) Release() {
	e.Reset()
	if e.pages.Cap() > pooledPages {
		e.pages = bytes.Buffer{}
	}
	chunkPools[e.col.Type].Put(e)
}

// Reset readies the encoder for the next row group's chunk of its column,
// keeping its buffers.
func (e *Chunk) Reset() {
	e.enc = encPlain
	if e.dictable {
		e.enc = encDict
	}
	e.n, e.nulls, e.rows = 0, 0, 0
	e.defs, e.words, e.bools, e.plainBytes, e.codes = e.defs[:0], e.words[:0], e.bools[:0], e.plainBytes[:0], e.codes[:0]
	e.pb.clear()
	e.probing = e.dictable
	clear(e.wordDict)
	clear(e.byteDict)
	e.wordList, e.dictPlain, e.dictLen, e.hasPrev, e.seen = e.wordList[:0], e.dictPlain[:0], 0, false, e.seen[:0]
	clear(e.ptrs)
	e.pages.Reset()
	e.dictPage = e.dictPage[:0]
	e.locs = e.locs[:0]
	e.index = format.ColumnIndex{NullPages: e.index.NullPages[:0], MinValues: e.index.MinValues[:0], MaxValues: e.index.MaxValues[:0], NullCounts: e.index.NullCounts[:0]}
	e.noIndex = false
	e.cb.clear()
	e.numValues, e.nullCount, e.uncomp, e.nDict, e.nPlain = 0, 0, 0, 0, 0
}

// Add encodes a run of values. The bytes of byte values must not change
// while Add runs; they are copied.
func (e *Chunk) Add(v Values) error {
	n := v.len(e.col.Type)
	for lo := 0; lo < n; {
		lo = e.addRange(&v, lo, min(n, lo+e.room()))
		if e.full() {
			if err := e.cutPage(); err != nil {
				return err
			}
		}
	}
	clear(e.ptrs) // the values' bytes may change once Add returns
	return nil
}

// Finish cuts the last page and encodes the dictionary page, if any.
func (e *Chunk) Finish() error {
	if err := e.cutPage(); err != nil {
		return err
	}
	return e.finishDict()
}

// Stats returns the statistics of the pages cut since the last Reset: of
// every value added, after Finish. Its bytes are the chunk's until Reset.
func (e *Chunk) Stats() Stats {
	return Stats{Bounds: e.cb.Bounds, Nulls: e.nullCount, NaN: e.noIndex, MaxLen: e.cb.maxLen}
}

// room is how many more values the page takes before its size is checked
// again: a page is cut once it holds about PageBytes (byte values stop
// the page themselves), or at dictProbe values of a dictionary on
// probation.
func (e *Chunk) room() int {
	left := max(0, PageBytes-e.pageSize())
	r := 1 + left/8
	if e.col.Type == Boolean {
		r = 1 + 8*left
	}
	if e.probing && e.n < dictProbe {
		r = min(r, dictProbe-e.n)
	}
	if e.enc == encDict {
		r = min(r, dictCheck) // the dictionary's size too
	}
	return r
}

// pageSize estimates the bytes of the page's values as written.
func (e *Chunk) pageSize() int {
	switch {
	case e.enc == encDict:
		return len(e.codes) * 2
	case e.col.Type == Boolean:
		return len(e.bools) / 8
	case e.col.Type.isBytes():
		return len(e.plainBytes)
	}
	return 8 * len(e.words)
}

// full reports whether the page is to be cut; it decides a dictionary on
// probation first.
func (e *Chunk) full() bool {
	if e.probing && e.n == dictProbe {
		e.probing = false
		if !e.dictPays() {
			e.toPlain()
		} else {
			e.codes = slices.Grow(e.codes, e.capRows) // it stays: room for a page
		}
	}
	if e.enc == encDict && e.dictFull() {
		return true
	}
	return e.pageSize() >= PageBytes
}
