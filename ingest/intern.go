package ingest

import (
	"hash/maphash"
	"math/bits"

	"tidemark"
)

// keyTable interns a decoder's keys, so a line whose key was seen before
// costs no allocation. It is a set-associative cache of bounded size: a
// key's hash picks one group of 8 slots, and a byte of the hash (its tag)
// is kept per slot in one 64-bit word per group, so a lookup reads that
// word, compares the 8 tags at once, and looks at a slot (hash, then key
// bytes) only where its tag matches. The table grows by doubling while
// it is at most half full, up to internMaxSlots; then a new key in a full
// group replaces one of its 8 entries. So memory is bounded, a lookup
// costs one hash and one tag word whatever the cardinality, and there is
// no clear-all cliff: with more distinct keys than slots the frequent keys
// keep being found while rare ones come and go. The bound is small on
// purpose: the table stays in the core's cache, and with more distinct
// keys than any cache holds (300,000 users) a lookup that misses costs
// little more than the allocation it could not save. (A Go map of up to
// 64k keys, cleared when full, lost every key at once, regrew from empty
// and missed the cache on nearly every lookup of such keys:
// BenchmarkDecodeGenerated/key=user_id decoded ~2x slower with it.)
//
// Which string a key is interned as never shows: two Keys with the same
// bytes are equal whichever allocation holds them.
type keyTable struct {
	tags  []uint64     // by group: a slot's tag byte, 0 = free
	slots []internSlot // group g's are slots[8g : 8g+8]
	used  int
	seed  maphash.Seed
}

type internSlot struct {
	hash uint64
	key  tidemark.Key
}

const (
	internFirstSlots = 1 << 10
	// internMaxSlots bounds the table: 24 bytes a slot (192 KiB) and one
	// tag byte, plus the keys it holds, at most internMaxKey bytes each
	// (2 MiB at most).
	internMaxSlots = 1 << 13
	// internMaxKey is the longest key interned (a URL path fits); a
	// longer one is rarely a repeated dimension value and is allocated
	// each time.
	internMaxKey = 256
)

func newKeyTable() keyTable { return keyTable{seed: maphash.MakeSeed()} }

// tagOf is a slot's tag for hash h: never 0, which marks a free slot.
func tagOf(h uint64) uint64 { return h>>56 | 0x80 }

// intern returns the Key with the bytes b (an encoded, non-empty key).
func (t *keyTable) intern(b []byte) tidemark.Key {
	if len(b) > internMaxKey {
		return tidemark.Key(b)
	}
	if t.tags == nil {
		t.tags = make([]uint64, internFirstSlots/8)
		t.slots = make([]internSlot, internFirstSlots)
	}
	h := maphash.Bytes(t.seed, b)
	g := int(h) & (len(t.tags) - 1)
	w := t.tags[g]
	for m := zeroBytes(w ^ ones*tagOf(h)); m != 0; m &= m - 1 {
		s := &t.slots[8*g+bits.TrailingZeros64(m)>>3]
		if s.hash == h && string(s.key) == string(b) {
			return s.key
		}
	}
	k := tidemark.Key(b)
	t.insert(h, k)
	return k
}

// insert puts a key that is not in the table into its group: a free
// slot, or, in a full group, one the table grows to make (below the
// bound no key is ever dropped) or, at the bound, one of the 8 entries.
func (t *keyTable) insert(h uint64, k tidemark.Key) {
	for {
		g := int(h) & (len(t.tags) - 1)
		w := t.tags[g]
		i := 0
		if free := zeroBytes(w); free != 0 {
			i = bits.TrailingZeros64(free) >> 3
			t.used++
		} else if len(t.slots) < internMaxSlots {
			t.grow()
			continue
		} else {
			i = int(h>>48) & 7 // the high bits pick which entry goes
		}
		t.tags[g] = w&^(0xff<<(8*i)) | tagOf(h)<<(8*i)
		t.slots[8*g+i] = internSlot{hash: h, key: k}
		if 2*t.used > len(t.slots) && len(t.slots) < internMaxSlots {
			t.grow()
		}
		return
	}
}

// zeroBytes flags (high bit of the byte) exactly the zero bytes of w.
func zeroBytes(w uint64) uint64 {
	return ^((w&^highs + ^uint64(highs)) | w) & highs
}

// grow doubles the table and reinserts every key by its stored hash into
// its new group (one of two a group splits into, so none overflows).
func (t *keyTable) grow() {
	oldTags, oldSlots := t.tags, t.slots
	t.tags = make([]uint64, 2*len(oldTags))
	t.slots = make([]internSlot, 2*len(oldSlots))
	mask := len(t.tags) - 1
	for g, w := range oldTags {
		for m := ^zeroBytes(w) & highs; m != 0; m &= m - 1 {
			s := oldSlots[8*g+bits.TrailingZeros64(m)>>3]
			ng := int(s.hash) & mask
			i := bits.TrailingZeros64(zeroBytes(t.tags[ng])) >> 3
			t.tags[ng] |= tagOf(s.hash) << (8 * i)
			t.slots[8*ng+i] = s
		}
	}
}
