package colfile

import (
	"encoding/binary"
	"math/bits"

	"github.com/klauspost/compress/huff0"
)

// A zstd encoder for PLAIN pages of int64 values (timestamps, offsets,
// durations). zstd's fastest level spends ~60-100 ns per value on them
// (80-150 MB/s): a match of 4 or 5 bytes every 8, found by hashing every
// position, and the sequences entropy-coded. Here the one match that
// matters is found directly: the high bytes a value shares with the one
// before it (offset 8). A block holds a run of values that share at least
// K high bytes with their predecessor; each is one sequence, the low 8-K
// bytes as literals and a K-byte match at the repeated offset 8. Every
// sequence of a block has the same literal length, match length and
// offset code, so the block's sequences are coded in RLE mode and take no
// bits at all; the literals are Huffman-coded (huff0, zstd's own literal
// coder) when that is smaller. K is chosen every zwLook values for the
// fewest bytes; a value that shares fewer than K bytes is stored whole,
// as the block's trailing literals. The output is an ordinary zstd frame
// (RFC 8878: single segment, content size, no checksum), which every
// decoder reads. On the 1M-event stream's event_time, disorder_us and
// offset pages it runs at 300-900 MB/s per core, 5-6% larger than
// zstd's fastest level (3.43 vs 3.28, 3.42 vs 3.24, 2.05 vs 1.94 MB).
const (
	zwMagic = 0xFD2FB528
	// zwMaxBlock bounds a block (decompressed; zstd allows 128 KiB): the
	// Huffman coder's buffers grow with it, and a quarter of zstd's largest
	// codes the literals as well.
	zwMaxBlock = 32 << 10
	zwLook     = 512 // values a block's K is chosen over (at most zwMaxBlock/8)
	// zwBlockCost is about what a block adds beyond its literals: block
	// header, literals and sequences headers, the RLE codes, the bitstream.
	zwBlockCost = 12
	zwHuffMin   = 1024 // fewer literals are stored raw
)

// zstdWordsFit reports whether appendZstdWords should encode words rather
// than the general encoder: values that repeat their predecessor exactly
// (arrival times within a millisecond: 35% of them on the bench's input)
// are runs the general encoder codes as long matches, which the RLE blocks
// cannot (2.31 vs 1.39 MB).
func zstdWordsFit(words []int64) bool {
	same := 0
	for i := 1; i < len(words); i++ {
		if words[i] == words[i-1] {
			same++
		}
	}
	return same*8 <= len(words)
}

// zwScratch is what appendZstdWords reuses from one call to the next.
type zwScratch struct {
	lits []byte
	huff huff0.Scratch
}

// appendZstdWords appends words, PLAIN, as one zstd frame.
func appendZstdWords(dst []byte, words []int64, sc *zwScratch) []byte {
	n := len(words)
	size := 8 * n
	dst = binary.LittleEndian.AppendUint32(dst, zwMagic)
	// Frame header: single segment (the window is the content), no
	// checksum, no dictionary; the content size in 1, 2 or 4 bytes.
	switch {
	case size < 256:
		dst = append(dst, 0<<6|1<<5, byte(size))
	case size < 65536+256:
		dst = append(dst, 1<<6|1<<5)
		dst = binary.LittleEndian.AppendUint16(dst, uint16(size-256))
	default:
		dst = append(dst, 2<<6|1<<5)
		dst = binary.LittleEndian.AppendUint32(dst, uint32(size))
	}
	z := zwEncoder{dst: dst, huff: &sc.huff, lits: sc.lits[:0], last: -1}
	defer func() { sc.lits = z.lits }()
	if n > 0 {
		z.whole(words[0])
	}
	kk, until := 0, 0 // the match length chosen for values before until
	for i := 1; i < n; {
		k := sharedHigh(words[i], words[i-1])
		if i >= until && k >= 3 {
			kk, until = chooseK(words[i-1:min(n, i+zwLook)]), i+zwLook
		}
		if k < 3 || k < kk {
			// Stored whole: a value that shares fewer bytes than the
			// run's K would end its block at once.
			z.whole(words[i])
			i++
			continue
		}
		// A run of values sharing at least kk high bytes, up to the
		// values kk was chosen over (then it is chosen again). It goes on
		// the block being assembled if that is a run of the same K with
		// no trailing literals, else it starts a block.
		if z.first || z.seqs == 0 || z.k != kk || len(z.lits) != z.seqs*(8-kk) {
			z.flush()
			z.k = kk
		}
		if !z.offsetSet {
			// The frame's first sequence names offset 8 as the third
			// repeated offset (zstd starts them at 1, 4, 8); from then on
			// it is the first, which every other sequence uses. A block
			// of its own: its offset code differs from theirs.
			z.lits = appendLow(z.lits, words[i], 8-kk)
			z.seqs, z.first, z.offsetSet = 1, true, true
			i++
			if i >= min(n, until) || sharedHigh(words[i], words[i-1]) < kk {
				continue
			}
			z.flush()
			z.k = kk
		}
		for i < min(n, until) && sharedHigh(words[i], words[i-1]) >= kk {
			if 8*(z.seqs+1) > zwMaxBlock {
				z.flush()
				z.k = kk
			}
			z.lits = appendLow(z.lits, words[i], 8-kk)
			z.seqs++
			i++
		}
	}
	z.flush()
	if z.last < 0 {
		z.rawBlock(nil) // no values: a frame still has a block
	}
	return z.finish()
}

// sharedHigh is how many high bytes a and b share, at most 7 (a sequence
// keeps at least one literal byte, so its literal length is never 0,
// which would change the meaning of its repeated offset).
func sharedHigh(a, b int64) int {
	return min(7, bits.LeadingZeros64(uint64(a^b))/8)
}

// chooseK returns the match length that codes the values w[1:] (each
// after its predecessor) in the fewest bytes: a smaller K keeps more
// values in a run, a larger one stores fewer literals per value; 8 when
// storing them whole is cheapest (no value shares 8 bytes, at most 7).
func chooseK(w []int64) int {
	// count[k]: values sharing exactly k bytes. A run of values sharing at
	// least K starts at value i for every K in (k[i-1], k[i]]: starts
	// counts them as a difference array over K.
	var count [8]int
	var starts [9]int
	prev := 0
	for i := 1; i < len(w); i++ {
		k := sharedHigh(w[i], w[i-1])
		count[k]++
		if k > prev {
			starts[prev+1]++
			starts[k+1]--
		}
		prev = k
	}
	best, bestCost := 8, 8*(len(w)-1)
	fit, runs := 0, starts[0]+starts[1]+starts[2]
	for j := 3; j <= 7; j++ {
		fit += count[j]
	}
	for K := 3; K <= 7; K++ {
		runs += starts[K] // runs of values sharing at least K
		cost := fit*(8-K) + (len(w)-1-fit)*8 + runs*zwBlockCost
		if cost < bestCost {
			best, bestCost = K, cost
		}
		fit -= count[K]
	}
	return best
}

// appendLow appends the low n bytes of v, little-endian.
func appendLow(b []byte, v int64, n int) []byte {
	return binary.LittleEndian.AppendUint64(b, uint64(v))[:len(b)+n]
}

// zwEncoder assembles a frame's blocks. The block being assembled holds
// seqs sequences of 8-k literals and a k-byte match each, then trailing
// literals (values stored whole); with no sequences it is a raw block.
type zwEncoder struct {
	dst       []byte
	huff      *huff0.Scratch
	lits      []byte // literals of the block being assembled
	seqs, k   int
	first     bool // its one sequence is the frame's first (see appendZstdWords)
	last      int  // offset in dst of the last block header, -1 for none
	offsetSet bool // the first repeated offset is 8
}

// whole adds v to the block as trailing literals, first writing the block
// if v would take it past zstd's largest.
func (z *zwEncoder) whole(v int64) {
	if 8*z.seqs+len(z.lits)-z.seqs*(8-z.k)+8 > zwMaxBlock || len(z.lits)+8 > zwMaxBlock {
		z.flush()
	}
	z.lits = appendLow(z.lits, v, 8)
}

// flush writes the block being assembled, if it holds anything.
func (z *zwEncoder) flush() {
	switch {
	case z.seqs > 0:
		z.seqBlock()
	case len(z.lits) > 0:
		z.rawBlock(z.lits)
	}
	z.lits, z.seqs, z.first = z.lits[:0], 0, false
}

// rawBlock appends b as a raw block.
func (z *zwEncoder) rawBlock(b []byte) {
	z.last = len(z.dst)
	z.dst = appendBlockHeader(z.dst, 0, len(b))
	z.dst = append(z.dst, b...)
}

// seqBlock writes the block being assembled as a compressed block: its
// literals raw, its sequences (literal length 8-k, match length k, offset
// 8: the first repeated offset, the third for the frame's first) in RLE
// mode.
func (z *zwEncoder) seqBlock() {
	seqs, k := z.seqs, z.k
	start := len(z.dst)
	z.last = start
	z.dst = append(z.dst, 0, 0, 0) // the header, once the size is known
	z.literals()
	// Sequences section: the count, RLE modes for literal lengths, offsets
	// and match lengths, their one code each, and the bitstream.
	switch {
	case seqs < 128:
		z.dst = append(z.dst, byte(seqs))
	case seqs < 0x7f00:
		z.dst = append(z.dst, byte(seqs>>8+0x80), byte(seqs))
	default:
		z.dst = append(z.dst, 0xff)
		z.dst = binary.LittleEndian.AppendUint16(z.dst, uint16(seqs-0x7f00))
	}
	ofCode, bitstream := byte(0), byte(1) // offset value 1; only the end mark
	if z.first {
		// Offset value 3: code 1 with one extra bit, 1, then the end mark.
		ofCode, bitstream = 1, 0b11
	}
	z.dst = append(z.dst, 1<<6|1<<4|1<<2, byte(8-k), ofCode, byte(k-3), bitstream)
	copy(z.dst[start:], appendBlockHeader(nil, 2, len(z.dst)-start-3))
}

// literals appends the literals section of the block being assembled:
// Huffman-coded in four streams (huff0, the coder zstd's own encoder
// uses) when that is smaller, else raw, or RLE when they are one byte
// repeated.
func (z *zwEncoder) literals() {
	l := len(z.lits)
	if l >= zwHuffMin {
		z.huff.Reuse = huff0.ReusePolicyNone
		out, _, err := huff0.Compress4X(z.lits, z.huff)
		switch {
		case err == huff0.ErrUseRLE:
			z.dst = appendLiteralsHeader(z.dst, 1, l)
			z.dst = append(z.dst, z.lits[0])
			return
		case err == nil && len(out)+5 < l:
			// Compressed, four streams: sizes of 10, 14 or 18 bits.
			c := len(out)
			switch {
			case l < 1<<10 && c < 1<<10:
				h := 2 | 1<<2 | uint64(l)<<4 | uint64(c)<<14
				z.dst = append(z.dst, byte(h), byte(h>>8), byte(h>>16))
			case l < 1<<14 && c < 1<<14:
				h := 2 | 2<<2 | uint64(l)<<4 | uint64(c)<<18
				z.dst = append(z.dst, byte(h), byte(h>>8), byte(h>>16), byte(h>>24))
			default:
				h := 2 | 3<<2 | uint64(l)<<4 | uint64(c)<<22
				z.dst = append(z.dst, byte(h), byte(h>>8), byte(h>>16), byte(h>>24), byte(h>>32))
			}
			z.dst = append(z.dst, out...)
			return
		}
	}
	z.dst = appendLiteralsHeader(z.dst, 0, l)
	z.dst = append(z.dst, z.lits...)
}

// appendLiteralsHeader appends the 1-, 2- or 3-byte header of a raw
// (typ 0) or RLE (1) literals section of l literals.
func appendLiteralsHeader(dst []byte, typ byte, l int) []byte {
	switch {
	case l < 32:
		return append(dst, typ|byte(l<<3))
	case l < 4096:
		return append(dst, typ|byte(1<<2|(l&15)<<4), byte(l>>4))
	}
	return append(dst, typ|byte(3<<2|(l&15)<<4), byte(l>>4), byte(l>>12))
}

// appendBlockHeader appends a block header of type typ and size (not
// last: finish marks the last block).
func appendBlockHeader(dst []byte, typ, size int) []byte {
	v := uint32(typ)<<1 | uint32(size)<<3
	return append(dst, byte(v), byte(v>>8), byte(v>>16))
}

// finish marks the last block and returns the frame.
func (z *zwEncoder) finish() []byte {
	z.dst[z.last] |= 1
	return z.dst
}
