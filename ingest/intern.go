package ingest

import (
	"hash/maphash"

	"tidemark"
)

// keyTable interns a decoder's keys, so a line whose key was seen before
// costs no allocation. It is an open-addressing hash table with linear
// probing over a bounded neighbourhood: it grows by doubling up to
// internMaxSlots and then stays that size, and a key whose neighbourhood
// is full replaces one of its entries. So memory is bounded, a lookup
// costs one hash and at most internProbes probes whatever the cardinality,
// and there is no clear-all cliff: with more distinct keys than slots the
// frequent keys keep being found while rare ones come and go (a Go map
// cleared when full lost every key at once and regrew from empty each
// time).
//
// Which string a key is interned as never shows: two Keys with the same
// bytes are equal whichever allocation holds them.
type keyTable struct {
	slots []internSlot // a power of two; key "" marks a free slot
	used  int
	seed  maphash.Seed
}

type internSlot struct {
	hash uint64
	key  tidemark.Key
}

const (
	internFirstSlots = 1 << 10
	// internMaxSlots bounds the table: 24 bytes a slot (1.5 MiB) plus
	// the keys it holds, at most internMaxKey bytes each.
	internMaxSlots = 1 << 16
	// internProbes is the neighbourhood a key is looked for in.
	internProbes = 8
	// internMaxKey is the longest key interned; a longer one is rarely a
	// repeated dimension value and is allocated each time.
	internMaxKey = 128
)

func newKeyTable() keyTable { return keyTable{seed: maphash.MakeSeed()} }

// intern returns the Key with the bytes b (an encoded, non-empty key).
func (t *keyTable) intern(b []byte) tidemark.Key {
	if len(b) > internMaxKey {
		return tidemark.Key(b)
	}
	if t.slots == nil {
		t.slots = make([]internSlot, internFirstSlots)
	}
	h := maphash.Bytes(t.seed, b)
	mask := len(t.slots) - 1
	home := int(h) & mask
	for p := range internProbes {
		s := &t.slots[(home+p)&mask]
		if s.key == "" {
			k := tidemark.Key(b)
			*s = internSlot{hash: h, key: k}
			t.used++
			if 2*t.used > len(t.slots) && len(t.slots) < internMaxSlots {
				t.grow()
			}
			return k
		}
		if s.hash == h && string(s.key) == string(b) {
			return s.key
		}
	}
	// The neighbourhood is full: the new key takes one of its slots,
	// chosen by the hash's high bits so the same entry is not always
	// the one to go.
	k := tidemark.Key(b)
	t.slots[(home+int(h>>59)%internProbes)&mask] = internSlot{hash: h, key: k}
	return k
}

// grow doubles the table and reinserts every key by its stored hash. A key
// whose new neighbourhood is full is dropped: it is only a cache.
func (t *keyTable) grow() {
	old := t.slots
	t.slots = make([]internSlot, 2*len(old))
	t.used = 0
	mask := len(t.slots) - 1
	for _, s := range old {
		if s.key == "" {
			continue
		}
		home := int(s.hash) & mask
		for p := range internProbes {
			if d := &t.slots[(home+p)&mask]; d.key == "" {
				*d = s
				t.used++
				break
			}
		}
	}
}
