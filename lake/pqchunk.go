package lake

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"math/bits"
	"slices"
	"sync"
	"unsafe"

	"github.com/klauspost/compress/s2"
	"github.com/parquet-go/parquet-go/compress"
	"github.com/parquet-go/parquet-go/encoding/plain"
	"github.com/parquet-go/parquet-go/encoding/rle"
	"github.com/parquet-go/parquet-go/encoding/thrift"
	"github.com/parquet-go/parquet-go/format"
)

// The Parquet column writer. A table's schema is flat and typed (every
// column a REQUIRED or OPTIONAL leaf of a known kind), so a column chunk's
// pages are encoded straight from the typed chunk buffers: Parquet V1 data
// pages, definition levels RLE/bit-packed, values PLAIN or RLE_DICTIONARY
// with a PLAIN dictionary page, which every Parquet reader (Spark 3.0+
// included) reads. parquet-go's generic writer turned every value into a
// parquet.Value first, inserted it into its dictionary, and computed page
// bounds again: ~0.35 CPU-s per million raw events, more than the zstd of
// the columns. Its lower-level packages still do the Thrift, PLAIN and RLE
// encoding here.
//
// Dictionary or PLAIN is decided per column chunk, as parquet-mr does but
// stricter: every chunk of a dictionary-capable column starts with a
// dictionary on probation; at dictProbe values of its first page (or when
// that page is cut, if sooner) the dictionary and the indexes must be at
// most half the PLAIN bytes they replace (numbers: at most one entry in
// dictWordRatio values), or the chunk is written PLAIN from its first page
// on; a probation that gathers more distinct values than that allows ends
// at once, so a column of distinct values costs a few hundred map inserts
// a chunk. zstd finds moderate repeats in PLAIN pages by itself; a dictionary
// pays for columns of few values (keys like page, status, source, file)
// and for those constant within a batch (batch_id, ingest_time: one entry
// and bit width 0, where PLAIN had zstd read 8 bytes a row). A per-user
// key is PLAIN: on issue 16's 600k events its dictionary (parquet-go kept
// one to 1 MiB per chunk) cost ~0.2 CPU-s of map inserts and lookups for
// a column 12% larger than PLAIN and zstd (2.00 vs 1.78 MB). A dictionary
// that grows past dictMaxBytes (or dictWordMax numbers) later ends its
// page and the rest of the chunk is PLAIN; readers resolve the encoding
// per page.
const (
	dictProbe     = 2048
	dictWordRatio = 16
	dictByteRatio = 2
	dictWordMax   = 4096
	dictCheck     = 1024 // values between checks of a dictionary's size
	// indexPrefix is how many bytes of a byte-array page bound the column
	// index keeps (parquet-go's default, which wrote these files before).
	indexPrefix = 16
)

// Chunk encodings.
const (
	encDict  = iota // RLE_DICTIONARY pages
	encPlain        // PLAIN pages
)

// colChunk encodes one column chunk (one column of one row group): its
// pages, compressed, in memory until the row group is committed to the
// file, with the chunk's statistics and the column and offset index
// entries of its pages. Values are given a chunk buffer at a time (add);
// finish cuts the last page.
type colChunk struct {
	col   column
	codec compress.Codec
	opt   bool
	st    *colStats // the Delta stats of the chunk, merged page by page

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
	ptrs      []ptrSlot // byte values looked up in this add, by address
	prevCode  int32     // the number last looked up, and its index
	prevWord  int64
	hasPrev   bool

	// Output.
	pages     bytes.Buffer // data pages: headers and compressed bodies
	dictPage  []byte       // the dictionary page, header and body, at finish
	locs      []format.PageLocation
	index     format.ColumnIndex
	noIndex   bool // a page held a NaN: no bounds a reader could trust
	cb        pageBounds
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
// for the rest of an add call, while the values' bytes cannot change: the
// decoder interns key values and shares the bytes of repeated strings
// (source, file, status), so most values are found by address, without
// hashing their bytes. code is the index plus one; zero is an empty slot.
type ptrSlot struct {
	p    *byte
	n    int
	code int32
}

const ptrSlots = 1024 // a power of two

func ptrHash(p *byte) uint64 {
	return uint64(uintptr(unsafe.Pointer(p))) * 0x9e3779b97f4a7c15 >> (64 - 10)
}

// pageBounds are the bounds of a page's or a chunk's non-null values:
// booleans' too, and what the Delta stats need to know besides.
type pageBounds struct {
	bounds
	nan        bool // a NaN was seen (never a bound)
	long       bool // a string longer than statsPrefix was seen (Delta stats)
	minT, maxT bool
}

// Column encoders are pooled by kind, so a file's encoders reuse the
// buffers of the files written before it: BenchmarkLongRunMemory allocated
// 20-30% less than without the pool (0.96-1.00 vs 1.17-1.32 GB a run) for
// 3-5 MB more live heap between batches. A sync.Pool: a GC empties it, so an
// idle stream keeps nothing. An encoder's compressed pages buffer is
// kept up to pooledPages bytes: the payload's (~1 MB a 32k-row group of
// ~180-byte lines) was dropped at 512 KiB and grown anew for every row
// group, 0.09-0.12 CPU-s per 1M events of growSlice (its zeroing and page
// faults); kept, the 1M-event run took 1.97 against 2.01 CPU-s (median of
// 10 alternating runs), BenchmarkLongRunMemory's heap unchanged.
var colChunkPools [kindBinary + 1]sync.Pool

const pooledPages = 8 << 20

func poolOf(k kind) *sync.Pool { return &colChunkPools[k] }

// newColChunk returns an encoder of column c's chunks, a pooled one when
// there is one, its page buffers sized for rows values (at most a page's)
// when new; st is set per row group.
func newColChunk(c column, codec compress.Codec, rows int) *colChunk {
	e, _ := poolOf(c.kind).Get().(*colChunk)
	if e == nil {
		e = new(colChunk)
		e.hdr = *thrift.NewEncoder(new(thrift.CompactProtocol).NewWriter(&e.hdrBuf))
	}
	e.col, e.codec, e.opt, e.st = c, codec, c.optional, nil
	e.dictable = c.kind == kindTimestamp || c.kind == kindLong || c.kind == kindDouble || (c.kind == kindString && !c.plain)
	rows = min(rows, pageBytes/8)
	e.capRows = rows
	if c.optional && e.defs == nil {
		e.defs = make([]byte, 0, rows)
	}
	switch c.kind {
	case kindTimestamp, kindLong, kindDouble:
		if e.words == nil {
			e.words = make([]int64, 0, rows+1)
		}
	case kindBool:
		if e.bools == nil {
			e.bools = make([]bool, 0, rows)
		}
	case kindString:
		if e.dictable && e.plainBytes == nil {
			e.plainBytes = make([]byte, 0, min(rows, dictProbe)*16) // the probation's
		}
		fallthrough
	default:
		if e.plainBytes == nil {
			// A guess at the values' size: the payload is most of a row.
			e.plainBytes = make([]byte, 0, min(pageBytes+pageBytes/4, rows*64))
		}
	}
	if c.kind == kindString && e.dictable && e.ptrs == nil {
		e.ptrs = make([]ptrSlot, ptrSlots)
	}
	if e.dictable && e.codes == nil {
		e.codes = make([]int32, 0, min(rows, dictProbe))
	}
	e.reset()
	return e
}

// release returns the encoder to its pool.
func (e *colChunk) release() {
	e.reset()
	e.st = nil
	if e.pages.Cap() > pooledPages {
		e.pages = bytes.Buffer{}
	}
	poolOf(e.col.kind).Put(e)
}

// reset readies the encoder for the next row group's chunk of its
// column, keeping its buffers.
func (e *colChunk) reset() {
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

func (b *pageBounds) clear() {
	b.has, b.nan, b.long = false, false, false
	b.minB, b.maxB = b.minB[:0], b.maxB[:0]
}

// add encodes a chunk buffer's values.
func (e *colChunk) add(b *colBuf) error {
	for lo := 0; lo < b.n; {
		lo = e.addRange(b, lo, min(b.n, lo+e.room()))
		if e.full() {
			if err := e.cutPage(); err != nil {
				return err
			}
		}
	}
	clear(e.ptrs) // b's bytes may change once add returns
	return nil
}

// room is how many more values the page takes before its size is checked
// again: a page is cut once it holds about pageBytes (byte values stop
// the page themselves), or at dictProbe values of a dictionary on probation.
func (e *colChunk) room() int {
	left := max(0, pageBytes-e.pageSize())
	r := 1 + left/8
	if e.col.kind == kindBool {
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
func (e *colChunk) pageSize() int {
	switch {
	case e.enc == encDict:
		return len(e.codes) * 2
	case e.col.kind == kindBool:
		return len(e.bools) / 8
	case e.col.kind == kindString || e.col.kind == kindBinary:
		return len(e.plainBytes)
	}
	return 8 * len(e.words)
}

// full reports whether the page is to be cut; it decides a dictionary on
// probation first.
func (e *colChunk) full() bool {
	if e.probing && e.n == dictProbe {
		e.probing = false
		if !e.dictPays() {
			e.toPlain()
		} else {
			e.codes = slices.Grow(e.codes, e.capRows) // it stays: room for a page
		}
	}
	if e.enc == encDict && (e.dictSize() > dictMaxBytes || len(e.wordList) > dictWordMax) {
		return true
	}
	return e.pageSize() >= pageBytes
}

// dictSize is the dictionary page's size, uncompressed.
func (e *colChunk) dictSize() int { return 8*len(e.wordList) + len(e.dictPlain) }

// dictPays reports whether the dictionary and the indexes of the page's
// values are at most a 1/dictByteRatio of the page written PLAIN.
func (e *colChunk) dictPays() bool {
	values := len(e.codes)
	idx := (values*bits.Len32(uint32(max(e.dictLen-1, 0))) + 7) / 8
	if e.col.kind == kindString {
		return (e.dictSize()+idx)*dictByteRatio <= len(e.plainBytes)
	}
	return e.dictLen*dictWordRatio <= values && e.dictSize()+idx < 8*values
}

// toPlain writes the page being filled, and the rest of the chunk, PLAIN:
// no page has been cut with the dictionary, so it is dropped.
func (e *colChunk) toPlain() {
	e.enc, e.probing = encPlain, false
	e.codes = e.codes[:0]
	clear(e.wordDict)
	clear(e.byteDict)
	e.wordList, e.dictPlain, e.dictLen, e.hasPrev, e.seen = e.wordList[:0], e.dictPlain[:0], 0, false, e.seen[:0]
	clear(e.ptrs)
}

// addRange encodes values lo to hi of b into the page and returns where it
// stopped: hi, or earlier when PLAIN byte values filled the page. The loops
// are written out per kind, bounds inline: this is the writer's per-value
// work.
func (e *colChunk) addRange(b *colBuf, lo, hi int) int {
	opt := e.opt
	var null []bool
	if opt {
		null = b.null[lo:hi]
	}
	pb := &e.pb
	switch e.col.kind {
	case kindTimestamp, kindLong:
		if vs := b.ints[lo:hi]; !opt && e.enc == encPlain && len(vs) > 0 {
			// REQUIRED and PLAIN: the values as they are, bounds in one
			// branch-free pass.
			e.words = append(e.words, vs...)
			mn, mx := vs[0], vs[0]
			for _, v := range vs[1:] {
				mn, mx = min(mn, v), max(mx, v)
			}
			pb.addInt(mn)
			pb.addInt(mx)
			break
		}
		for j, v := range b.ints[lo:hi] {
			if opt && e.addLevel(null[j]) {
				continue
			}
			e.addWord(v)
			pb.addInt(v)
		}
	case kindDouble:
		for j, v := range b.floats[lo:hi] {
			if opt && e.addLevel(null[j]) {
				continue
			}
			e.addWord(int64(math.Float64bits(v)))
			if v != v {
				pb.nan = true
				continue
			}
			pb.addFloat(v)
		}
	case kindBool:
		for j, v := range b.bools[lo:hi] {
			if opt && e.addLevel(null[j]) {
				continue
			}
			e.bools = append(e.bools, v)
			if !pb.has {
				pb.minT, pb.maxT = v, v
			}
			pb.minT = pb.minT && v
			pb.maxT = pb.maxT || v
			pb.has = true
		}
	default:
		for j, v := range b.bytes[lo:hi] {
			if !opt || !e.addLevel(null[j]) {
				e.addBytes(v)
			}
			if e.enc == encPlain && len(e.plainBytes) >= pageBytes {
				hi = lo + j + 1
				break
			}
		}
	}
	e.n += hi - lo
	return hi
}

// addLevel records a definition level; it reports a null.
func (e *colChunk) addLevel(null bool) bool {
	if null {
		e.defs = append(e.defs, 0)
		e.nulls++
		return true
	}
	e.defs = append(e.defs, 1)
	return false
}

func (e *colChunk) addWord(v int64) {
	if e.enc != encDict || e.probing {
		// Kept on probation too: the page may yet be written PLAIN.
		e.words = append(e.words, v)
	}
	if e.enc != encDict {
		return
	}
	if e.hasPrev && v == e.prevWord {
		e.codes = append(e.codes, e.prevCode)
		return
	}
	code, ok := e.wordDict[v]
	if !ok {
		if e.wordDict == nil {
			e.wordDict = make(map[int64]int32)
		}
		code = int32(len(e.wordList))
		e.wordDict[v] = code
		e.wordList = append(e.wordList, v)
		e.dictLen++
		if e.probing && e.dictLen*dictWordRatio > dictProbe {
			e.toPlain() // it cannot pay at the probe any more
			return
		}
	}
	e.prevWord, e.prevCode, e.hasPrev = v, code, true
	e.codes = append(e.codes, code)
}

func (e *colChunk) addBytes(v []byte) {
	if e.enc != encDict {
		e.plainBytes = plain.AppendByteArray(e.plainBytes, v)
		e.boundBytes(v)
		return
	}
	if e.probing {
		// The page may yet be written PLAIN.
		e.plainBytes = plain.AppendByteArray(e.plainBytes, v)
	}
	p := unsafe.SliceData(v)
	slot := &e.ptrs[ptrHash(p)]
	var code int32
	if slot.code != 0 && slot.p == p && slot.n == len(v) {
		code = slot.code - 1
	} else {
		var ok bool
		code, ok = e.byteDict[string(v)]
		if !ok {
			if e.byteDict == nil {
				e.byteDict = make(map[string]int32)
			}
			code = int32(e.dictLen)
			e.byteDict[string(v)] = code
			e.dictPlain = plain.AppendByteArray(e.dictPlain, v)
			e.dictLen++
			e.seen = append(e.seen, 0)
			if e.probing && e.dictLen*dictByteRatio > dictProbe {
				// Most values distinct: it cannot pay at the probe any more.
				e.boundBytes(v)
				e.toPlain()
				return
			}
		}
		*slot = ptrSlot{p, len(v), code + 1}
	}
	e.codes = append(e.codes, code)
	if e.seen[code] != e.pageGen+1 {
		e.seen[code] = e.pageGen + 1 // bounds once per distinct value and page
		e.boundBytes(v)
	}
}

func (e *colChunk) boundBytes(v []byte) {
	pb := &e.pb
	if len(v) > statsPrefix {
		pb.long = true
	}
	pb.addBytes(v)
}

// cutPage encodes, compresses and appends the page being filled.
func (e *colChunk) cutPage() error {
	if e.n == 0 {
		return nil
	}
	if e.probing {
		e.probing = false
		if !e.dictPays() {
			e.toPlain()
		}
	}
	// A REQUIRED PLAIN page is compressed from the values as they are
	// buffered; the others are assembled in a scratch buffer.
	var body []byte
	scratch := scratchFree.get()
	defer scratchFree.put(scratch)
	if e.opt {
		lv, err := (&rle.Encoding{BitWidth: 1}).EncodeLevels(e.lv, e.defs)
		e.lv = lv
		if err != nil {
			return fmt.Errorf("encode %s definition levels: %w", e.col.name, err)
		}
		body = binary.LittleEndian.AppendUint32((*scratch)[:0], uint32(len(lv)))
		body = append(body, lv...)
	}
	encoding := format.Plain
	var words []int64 // the values of a REQUIRED PLAIN number page
	switch {
	case e.enc == encDict:
		encoding = format.RLEDictionary
		width := bits.Len32(uint32(max(e.dictLen-1, 0)))
		idx, err := (&rle.Encoding{BitWidth: width}).EncodeInt32(e.lv, e.codes)
		e.lv = idx
		if err != nil {
			return fmt.Errorf("encode %s page: %w", e.col.name, err)
		}
		body = append(append(body, byte(width)), idx...)
		e.nDict++
	case e.col.kind == kindBool:
		body = appendBits(body, e.bools)
		e.nPlain++
	case e.col.kind == kindString || e.col.kind == kindBinary:
		if e.opt {
			body = append(body, e.plainBytes...)
		} else {
			body = e.plainBytes
		}
		e.nPlain++
	default:
		if e.opt {
			body = appendWords(body, e.words)
		} else {
			body = wordBytes(e.words, body)
			words = e.words
		}
		e.nPlain++
	}
	if e.opt || e.enc == encDict {
		*scratch = body // keep what it grew to
	}
	h := format.PageHeader{Type: format.DataPage, DataPageHeader: thriftSome(format.DataPageHeader{
		NumValues: int32(e.n), Encoding: encoding, DefinitionLevelEncoding: format.RLE, RepetitionLevelEncoding: format.RLE,
		Statistics: format.Statistics{NullCount: int64(e.nulls)},
	})}
	if e.col.kind == kindDouble {
		words = nil // doubles share few high bytes: zstd's own matches pay
	}
	size, err := e.writePage(&h, &e.pages, body, words)
	if err != nil {
		return err
	}
	if len(e.locs) == 0 && e.expect > e.n {
		// Room for the chunk's pages at the first page's rate (and an
		// eighth more), allocated once: grown by doubling, the pages'
		// buffers took 70 MB per M events of allocation, 42 MB so.
		want := size * e.expect / e.n
		e.pages.Grow(min(want+want/8, rowGroupBytes) - e.pages.Len())
	}
	e.locs = append(e.locs, format.PageLocation{Offset: int64(e.pages.Len() - size), CompressedPageSize: int32(size), FirstRowIndex: e.rows})
	e.indexPage()
	e.rows += int64(e.n)
	e.numValues += int64(e.n)
	e.nullCount += int64(e.nulls)
	e.n, e.nulls = 0, 0
	e.defs, e.words, e.bools, e.plainBytes, e.codes = e.defs[:0], e.words[:0], e.bools[:0], e.plainBytes[:0], e.codes[:0]
	e.pb.clear()
	e.pageGen++
	if e.enc == encDict && (e.dictSize() > dictMaxBytes || len(e.wordList) > dictWordMax) {
		e.enc = encPlain // the dictionary is full: the rest of the chunk is PLAIN
	}
	return nil
}

// littleEndian: int64s in memory are their PLAIN bytes.
var littleEndian = binary.NativeEndian.Uint16([]byte{1, 0}) == 1

// wordBytes returns words PLAIN-encoded: their memory on a little-endian
// machine, else appended to scratch.
func wordBytes(words []int64, scratch []byte) []byte {
	if littleEndian {
		return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(words))), 8*len(words))
	}
	return appendWords(scratch, words)
}

// appendWords appends words PLAIN-encoded.
func appendWords(dst []byte, words []int64) []byte {
	if littleEndian {
		return append(dst, unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(words))), 8*len(words))...)
	}
	for _, w := range words {
		dst = binary.LittleEndian.AppendUint64(dst, uint64(w))
	}
	return dst
}

// writePage appends a page (header, then the body compressed) to out and
// returns its size. words, when not nil, are the int64 values body holds
// PLAIN: zstd pages of them are written by appendZstdWords.
func (e *colChunk) writePage(h *format.PageHeader, out *bytes.Buffer, body []byte, words []int64) (int, error) {
	comp := scratchFree.get()
	defer scratchFree.put(comp)
	var c []byte
	if _, zstd := e.codec.(*zstdCodec); zstd && words != nil && zstdWordsFit(words) {
		sc := zwFree.get()
		c = appendZstdWords((*comp)[:0], words, sc)
		zwFree.put(sc)
	} else {
		var err error
		c, err = e.codec.Encode((*comp)[:0], body)
		if err != nil {
			return 0, fmt.Errorf("compress %s page: %w", e.col.name, err)
		}
	}
	*comp = c
	h.UncompressedPageSize = int32(len(body))
	h.CompressedPageSize = int32(len(c))
	e.hdrBuf.Reset()
	if err := e.hdr.Encode(h); err != nil {
		return 0, fmt.Errorf("encode %s page header: %w", e.col.name, err)
	}
	out.Write(e.hdrBuf.Bytes())
	out.Write(c)
	e.uncomp += int64(e.hdrBuf.Len() + len(body))
	return e.hdrBuf.Len() + len(c), nil
}

// Page scratch buffers are shared by every column encoder: a page is
// assembled and compressed in two of them, so as many are in use as pages
// are being cut at once, not two per column and row group in flight
// (which cost ~40 MiB of peak RSS on the 1M-event stream). A free list
// rather than a sync.Pool: a GC does not empty it, and it holds at most
// 16 buffers.
// A buffer holds a page of pageBytes and a value more compressed, as
// snappy sizes its output (its bound: 7/6 of the input): a smaller one
// made s2 allocate its own for every payload page.
var scratchFree = freeList[[]byte]{
	max:  16,
	make: func() *[]byte { b := make([]byte, 0, s2.MaxEncodedLen(pageBytes+pageBytes/8)); return &b },
	keep: func(b *[]byte) bool { return cap(*b) <= 4*pageBytes },
}

// zwFree holds the scratch of appendZstdWords (literals and Huffman
// tables, ~150 KB), as scratchFree holds page buffers: a few, as about as
// many int64 pages are compressed at once as there are cores.
var zwFree = freeList[zwScratch]{
	max:  4,
	make: func() *zwScratch { return new(zwScratch) },
	keep: func(s *zwScratch) bool { return cap(s.lits) <= 4*pageBytes },
}

// freeList keeps up to max values that keep accepts for reuse.
type freeList[T any] struct {
	mu   sync.Mutex
	free []*T
	max  int
	make func() *T
	keep func(*T) bool
}

func (l *freeList[T]) get() *T {
	l.mu.Lock()
	defer l.mu.Unlock()
	if n := len(l.free); n > 0 {
		v := l.free[n-1]
		l.free = l.free[:n-1]
		return v
	}
	return l.make()
}

func (l *freeList[T]) put(v *T) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.free) < l.max && l.keep(v) {
		l.free = append(l.free, v)
	}
}

// indexPage adds the page's bounds to the column index, the chunk's
// statistics and the Delta stats.
func (e *colChunk) indexPage() {
	pb := &e.pb
	e.index.NullCounts = append(e.index.NullCounts, int64(e.nulls))
	e.st.nulls += int64(e.nulls)
	if pb.nan {
		// Bounds without the NaNs would let a reader that orders NaN
		// last (Spark) prune rows away: no column index, no chunk bounds,
		// as parquet-java does.
		e.noIndex = true
		e.st.bad = true
	}
	if !pb.has {
		e.index.NullPages = append(e.index.NullPages, true)
		e.index.MinValues = append(e.index.MinValues, []byte{})
		e.index.MaxValues = append(e.index.MaxValues, []byte{})
		return
	}
	e.index.NullPages = append(e.index.NullPages, false)
	lo, hi := e.indexBounds(pb)
	e.index.MinValues = append(e.index.MinValues, lo)
	e.index.MaxValues = append(e.index.MaxValues, hi)
	e.mergeChunk(pb)
	switch e.col.kind {
	case kindTimestamp, kindLong:
		e.st.addInt(pb.minI)
		e.st.addInt(pb.maxI)
	case kindDouble:
		e.st.addFloat(pb.minF)
		e.st.addFloat(pb.maxF)
	case kindString:
		e.st.bad = e.st.bad || pb.long
		e.st.addBytes(pb.minB)
		e.st.addBytes(pb.maxB)
	}
}

// indexBounds renders a page's bounds as the column index holds them:
// PLAIN values; byte arrays cut to indexPrefix bytes (the max rounded up).
func (e *colChunk) indexBounds(pb *pageBounds) (lo, hi []byte) {
	switch e.col.kind {
	case kindTimestamp, kindLong:
		return plain.Int64(pb.minI), plain.Int64(pb.maxI)
	case kindDouble:
		return plain.Double(zeroAsNeg(pb.minF)), plain.Double(zeroAsPos(pb.maxF))
	case kindBool:
		return plain.Boolean(pb.minT), plain.Boolean(pb.maxT)
	}
	lo = bytes.Clone(pb.minB[:min(len(pb.minB), indexPrefix)])
	if lo == nil {
		lo = []byte{}
	}
	return lo, roundUp(pb.maxB, indexPrefix)
}

// zeroAsNeg and zeroAsPos write a zero bound as -0 (min) and +0 (max), as
// the Parquet spec asks, so that readers comparing either zero prune right.
func zeroAsNeg(v float64) float64 {
	if v == 0 {
		return math.Copysign(0, -1)
	}
	return v
}

func zeroAsPos(v float64) float64 {
	if v == 0 {
		return 0
	}
	return v
}

// roundUp returns b cut to n bytes and still an upper bound of b: its last
// byte that is not 0xff is incremented; b whole when every byte is 0xff.
func roundUp(b []byte, n int) []byte {
	if len(b) <= n {
		return append([]byte{}, b...)
	}
	out := bytes.Clone(b[:n])
	for i := n - 1; i >= 0; i-- {
		if out[i] != 0xff {
			out[i]++
			return out[:i+1]
		}
	}
	return append([]byte{}, b...)
}

// mergeChunk adds a page's bounds to the chunk's.
func (e *colChunk) mergeChunk(pb *pageBounds) {
	cb := &e.cb
	if e.col.kind != kindBool {
		cb.merge(e.col.kind, &pb.bounds)
		return
	}
	if !cb.has {
		cb.minT, cb.maxT = pb.minT, pb.maxT
	}
	cb.minT = cb.minT && pb.minT
	cb.maxT = cb.maxT || pb.maxT
	cb.has = true
}

// finish cuts the last page and encodes the dictionary page, if any.
func (e *colChunk) finish() error {
	if err := e.cutPage(); err != nil {
		return err
	}
	if e.nDict == 0 {
		return nil
	}
	dict := e.dictPlain
	if e.col.kind != kindString {
		scratch := scratchFree.get()
		defer scratchFree.put(scratch)
		dict = wordBytes(e.wordList, (*scratch)[:0])
	}
	h := format.PageHeader{Type: format.DictionaryPage, DictionaryPageHeader: thriftSome(format.DictionaryPageHeader{
		NumValues: int32(e.dictLen), Encoding: format.Plain,
	})}
	var out bytes.Buffer
	if _, err := e.writePage(&h, &out, dict, nil); err != nil {
		return err
	}
	e.dictPage = append(e.dictPage[:0], out.Bytes()...)
	return nil
}

// size is the chunk's bytes in the file.
func (e *colChunk) size() int64 { return int64(len(e.dictPage) + e.pages.Len()) }

// meta returns the chunk's metadata, for a chunk written at offset start.
func (e *colChunk) meta(start int64, path string) format.ColumnChunk {
	md := format.ColumnMetaData{
		Type:                  physicalType(e.col.kind),
		PathInSchema:          []string{path},
		Codec:                 e.codec.CompressionCodec(),
		NumValues:             e.numValues,
		TotalUncompressedSize: e.uncomp,
		TotalCompressedSize:   e.size(),
		DataPageOffset:        start + int64(len(e.dictPage)),
		Statistics:            e.statistics(),
	}
	md.Encoding = append(md.Encoding, format.Plain)
	if e.opt {
		md.Encoding = append(md.Encoding, format.RLE)
	}
	if e.nDict > 0 {
		md.Encoding = append(md.Encoding, format.RLEDictionary)
		md.DictionaryPageOffset = start
		md.EncodingStats = append(md.EncodingStats, format.PageEncodingStats{PageType: format.DictionaryPage, Encoding: format.Plain, Count: 1},
			format.PageEncodingStats{PageType: format.DataPage, Encoding: format.RLEDictionary, Count: e.nDict})
	}
	if e.nPlain > 0 {
		md.EncodingStats = append(md.EncodingStats, format.PageEncodingStats{PageType: format.DataPage, Encoding: format.Plain, Count: e.nPlain})
	}
	return format.ColumnChunk{FileOffset: start, MetaData: md}
}

// statistics are the chunk's: exact PLAIN bounds of its non-null values
// (NaN left out) and its null count.
func (e *colChunk) statistics() format.Statistics {
	s := format.Statistics{NullCount: e.nullCount}
	cb := &e.cb
	if !cb.has || e.noIndex {
		return s
	}
	switch e.col.kind {
	case kindTimestamp, kindLong:
		s.MinValue, s.MaxValue = plain.Int64(cb.minI), plain.Int64(cb.maxI)
	case kindDouble:
		s.MinValue, s.MaxValue = plain.Double(zeroAsNeg(cb.minF)), plain.Double(zeroAsPos(cb.maxF))
	case kindBool:
		s.MinValue, s.MaxValue = plain.Boolean(cb.minT), plain.Boolean(cb.maxT)
	default:
		s.MinValue, s.MaxValue = bytes.Clone(cb.minB), bytes.Clone(cb.maxB)
		if s.MinValue == nil {
			s.MinValue = []byte{}
		}
		if s.MaxValue == nil {
			s.MaxValue = []byte{}
		}
	}
	return s
}

// pageIndexes returns the chunk's column index (ok false when it has none)
// and its offset index, for a chunk written at offset start.
func (e *colChunk) pageIndexes(start int64) (ci format.ColumnIndex, ok bool, oi format.OffsetIndex) {
	base := start + int64(len(e.dictPage))
	locs := make([]format.PageLocation, len(e.locs))
	for i, l := range e.locs {
		l.Offset += base
		locs[i] = l
	}
	oi.PageLocations = locs
	if e.noIndex {
		return ci, false, oi
	}
	ci = format.ColumnIndex{
		NullPages:     append([]bool(nil), e.index.NullPages...),
		MinValues:     append([][]byte(nil), e.index.MinValues...),
		MaxValues:     append([][]byte(nil), e.index.MaxValues...),
		BoundaryOrder: format.Unordered,
		NullCounts:    append([]int64(nil), e.index.NullCounts...),
	}
	return ci, true, oi
}

func physicalType(k kind) format.Type {
	switch k {
	case kindTimestamp, kindLong:
		return format.Int64
	case kindDouble:
		return format.Double
	case kindBool:
		return format.Boolean
	}
	return format.ByteArray
}

// appendBits appends booleans PLAIN: bit-packed, least significant first.
func appendBits(dst []byte, v []bool) []byte {
	for i := 0; i < len(v); i += 8 {
		var b byte
		for j, x := range v[i:min(len(v), i+8)] {
			if x {
				b |= 1 << j
			}
		}
		dst = append(dst, b)
	}
	return dst
}

func thriftSome[T any](v T) thrift.Null[T] { return thrift.Null[T]{V: v, Valid: true} }
