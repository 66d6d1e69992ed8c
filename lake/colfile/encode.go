package colfile

import (
	"encoding/binary"
	"math"
	"math/bits"
	"unsafe"

	"github.com/parquet-go/parquet-go/encoding/plain"
)

// The value encodings: a page's values PLAIN, or as indexes into the
// chunk's dictionary (RLE_DICTIONARY), decided per chunk as the package
// doc says.

// dictSize is the dictionary page's size, uncompressed.
func (e *Chunk) dictSize() int { return 8*len(e.wordList) + len(e.dictPlain) }

// dictFull reports a dictionary that may take no more values.
func (e *Chunk) dictFull() bool {
	return e.dictSize() > dictMaxBytes || len(e.wordList) > dictWordMax
}

// dictPays reports whether the dictionary and the indexes of the page's
// values are at most a 1/dictByteRatio of the page written PLAIN.
func (e *Chunk) dictPays() bool {
	values := len(e.codes)
	idx := (values*bits.Len32(uint32(max(e.dictLen-1, 0))) + 7) / 8
	if e.col.Type == String {
		return (e.dictSize()+idx)*dictByteRatio <= len(e.plainBytes)
	}
	return e.dictLen*dictWordRatio <= values && e.dictSize()+idx < 8*values
}

// toPlain writes the page being filled, and the rest of the chunk, PLAIN:
// no page has been cut with the dictionary, so it is dropped.
func (e *Chunk) toPlain() {
	e.enc, e.probing = encPlain, false
	e.codes = e.codes[:0]
	clear(e.wordDict)
	clear(e.byteDict)
	e.wordList, e.dictPlain, e.dictLen, e.hasPrev, e.seen = e.wordList[:0], e.dictPlain[:0], 0, false, e.seen[:0]
	clear(e.ptrs)
}

// addRange encodes values lo to hi of v into the page and returns where it
// stopped: hi, or earlier when PLAIN byte values filled the page. The loops
// are written out per type, bounds inline: this is the writer's per-value
// work.
func (e *Chunk) addRange(v *Values, lo, hi int) int {
	opt := e.opt
	var null []bool
	if opt {
		null = v.Null[lo:hi]
	}
	pb := &e.pb
	switch e.col.Type {
	case Timestamp, Int64:
		if vs := v.Ints[lo:hi]; !opt && e.enc == encPlain && len(vs) > 0 {
			// REQUIRED and PLAIN: the values as they are, bounds in one
			// branch-free pass.
			e.words = append(e.words, vs...)
			mn, mx := vs[0], vs[0]
			for _, x := range vs[1:] {
				mn, mx = min(mn, x), max(mx, x)
			}
			pb.AddInt(mn)
			pb.AddInt(mx)
			break
		}
		for j, x := range v.Ints[lo:hi] {
			if opt && e.addLevel(null[j]) {
				continue
			}
			e.addWord(x)
			pb.AddInt(x)
		}
	case Double:
		for j, x := range v.Floats[lo:hi] {
			if opt && e.addLevel(null[j]) {
				continue
			}
			e.addWord(int64(math.Float64bits(x)))
			if x != x {
				pb.nan = true
				continue
			}
			pb.AddFloat(x)
		}
	case Boolean:
		for j, x := range v.Bools[lo:hi] {
			if opt && e.addLevel(null[j]) {
				continue
			}
			e.bools = append(e.bools, x)
			pb.AddBool(x)
		}
	default:
		for j, x := range v.Bytes[lo:hi] {
			if !opt || !e.addLevel(null[j]) {
				e.addBytes(x)
			}
			if e.enc == encPlain && len(e.plainBytes) >= PageBytes {
				hi = lo + j + 1
				break
			}
		}
	}
	e.n += hi - lo
	return hi
}

// addLevel records a definition level; it reports a null.
func (e *Chunk) addLevel(null bool) bool {
	if null {
		e.defs = append(e.defs, 0)
		e.nulls++
		return true
	}
	e.defs = append(e.defs, 1)
	return false
}

func (e *Chunk) addWord(v int64) {
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

func (e *Chunk) addBytes(v []byte) {
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

func (e *Chunk) boundBytes(v []byte) {
	pb := &e.pb
	pb.maxLen = max(pb.maxLen, len(v))
	pb.AddBytes(v)
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
