package colfile

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/bits"
	"sync"

	"github.com/klauspost/compress/s2"
	"github.com/parquet-go/parquet-go/encoding/rle"
	"github.com/parquet-go/parquet-go/encoding/thrift"
	"github.com/parquet-go/parquet-go/format"
)

// cutPage encodes, compresses and appends the page being filled: a
// Parquet V1 data page, definition levels RLE/bit-packed.
func (e *Chunk) cutPage() error {
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
			return fmt.Errorf("encode %s definition levels: %w", e.col.Name, err)
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
			return fmt.Errorf("encode %s page: %w", e.col.Name, err)
		}
		body = append(append(body, byte(width)), idx...)
		e.nDict++
	case e.col.Type == Boolean:
		body = appendBits(body, e.bools)
		e.nPlain++
	case e.col.Type.isBytes():
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
	if e.col.Type == Double {
		words = nil // doubles share few high bytes: zstd's own matches pay
	}
	size, err := e.writePage(&h, &e.pages, body, words)
	if err != nil {
		return err
	}
	if len(e.locs) == 0 && e.expect > e.n {
		// Room for the chunk's pages at the first page's rate (and an
		// eighth more), allocated once (Expect).
		want := size * e.expect / e.n
		e.pages.Grow(min(want+want/8, growMax) - e.pages.Len())
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
	if e.enc == encDict && e.dictFull() {
		e.enc = encPlain // the dictionary is full: the rest of the chunk is PLAIN
	}
	return nil
}

// finishDict encodes the dictionary page, if a data page used it: PLAIN.
func (e *Chunk) finishDict() error {
	if e.nDict == 0 {
		return nil
	}
	dict := e.dictPlain
	if e.col.Type != String {
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

// writePage appends a page (header, then the body compressed) to out and
// returns its size. words, when not nil, are the int64 values body holds
// PLAIN: zstd pages of them are written by appendZstdWords.
func (e *Chunk) writePage(h *format.PageHeader, out *bytes.Buffer, body []byte, words []int64) (int, error) {
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
			return 0, fmt.Errorf("compress %s page: %w", e.col.Name, err)
		}
	}
	*comp = c
	h.UncompressedPageSize = int32(len(body))
	h.CompressedPageSize = int32(len(c))
	e.hdrBuf.Reset()
	if err := e.hdr.Encode(h); err != nil {
		return 0, fmt.Errorf("encode %s page header: %w", e.col.Name, err)
	}
	out.Write(e.hdrBuf.Bytes())
	out.Write(c)
	e.uncomp += int64(e.hdrBuf.Len() + len(body))
	return e.hdrBuf.Len() + len(c), nil
}

// Page scratch buffers are shared by every chunk encoder: a page is
// assembled and compressed in two of them, so as many are in use as pages
// are being cut at once, not two per column and row group in flight
// (which cost ~40 MiB of peak RSS on the 1M-event stream). A free list
// rather than a sync.Pool: a GC does not empty it, and it holds at most
// 16 buffers.
// A buffer holds a page of PageBytes and a value more compressed, as
// snappy sizes its output (its bound: 7/6 of the input): a smaller one
// made s2 allocate its own for every payload page.
var scratchFree = freeList[[]byte]{
	max:  16,
	make: func() *[]byte { b := make([]byte, 0, s2.MaxEncodedLen(PageBytes+PageBytes/8)); return &b },
	keep: func(b *[]byte) bool { return cap(*b) <= 4*PageBytes },
}

// zwFree holds the scratch of appendZstdWords (literals and Huffman
// tables, ~150 KB), as scratchFree holds page buffers: a few, as about as
// many int64 pages are compressed at once as there are cores.
var zwFree = freeList[zwScratch]{
	max:  4,
	make: func() *zwScratch { return new(zwScratch) },
	keep: func(s *zwScratch) bool { return cap(s.lits) <= 4*PageBytes },
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

func thriftSome[T any](v T) thrift.Null[T] { return thrift.Null[T]{V: v, Valid: true} }
