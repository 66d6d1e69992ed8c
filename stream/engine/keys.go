package engine

import (
	"fmt"
	"hash/maphash"

	"tidemark"
)

// keyTable interns the keys of open state: it maps a key to its id in the
// engine's key table, by open addressing over int32 ids with linear
// probing, the key bytes stored once (in keyEntry). It costs ~5 bytes per
// key where a map[tidemark.Key]int32 costs ~36 (a string header and an int
// per slot, control bytes, load-factor and doubling slack), which is most
// of a per-user stream's state beyond the aggregates themselves.
//
// Deleted entries leave a tombstone; the table is rebuilt when live
// entries and tombstones fill three quarters of it, so a lookup always
// meets an empty slot.
type keyTable struct {
	seed  maphash.Seed
	slots []int32 // emptySlot, tombstone, or a key id
	live  int     // key ids in slots
	used  int     // key ids and tombstones
}

const (
	emptySlot int32 = -1
	tombstone int32 = -2
)

func newKeyTable() keyTable { return keyTable{seed: maphash.MakeSeed()} }

// Len returns the number of keys.
func (t *keyTable) Len() int { return t.live }

// hash returns the hash of key k that get and put take.
func (t *keyTable) hash(k tidemark.Key) int {
	return int(maphash.String(t.seed, string(k)))
}

// get returns the id of key k.
func (t *keyTable) get(keys []keyEntry, k tidemark.Key) (int32, bool) {
	return t.getHashed(keys, k, t.hash(k))
}

// getHashed returns the id of key k, whose hash is h: a miss followed by a
// put hashes the key once.
func (t *keyTable) getHashed(keys []keyEntry, k tidemark.Key, h int) (int32, bool) {
	if t.live == 0 {
		return 0, false
	}
	mask := len(t.slots) - 1
	for i := h & mask; ; i = (i + 1) & mask {
		switch id := t.slots[i]; id {
		case emptySlot:
			return 0, false
		case tombstone:
		default:
			if keys[id].key == k {
				return id, true
			}
		}
	}
}

// put adds key k, absent from the table, with id.
func (t *keyTable) put(keys []keyEntry, k tidemark.Key, id int32) {
	t.putHashed(keys, id, t.hash(k))
}

// putHashed is put of a key whose hash is h. keys[id] holds the key
// already: a table that must grow is rebuilt from keys, the new one with it.
func (t *keyTable) putHashed(keys []keyEntry, id int32, h int) {
	if (t.used+1)*4 > len(t.slots)*3 {
		t.rehash(keys, t.live+1)
		return
	}
	t.insert(id, h)
}

// insert adds id, hashed to h, to a table with room for it.
func (t *keyTable) insert(id int32, h int) {
	mask := len(t.slots) - 1
	i := h & mask
	for t.slots[i] >= 0 {
		i = (i + 1) & mask
	}
	if t.slots[i] == emptySlot {
		t.used++
	}
	t.slots[i] = id
	t.live++
}

// del removes key k, present with id.
func (t *keyTable) del(k tidemark.Key, id int32) {
	mask := len(t.slots) - 1
	for i := t.hash(k) & mask; ; i = (i + 1) & mask {
		switch t.slots[i] {
		case id:
			t.slots[i] = tombstone
			t.live--
			return
		case emptySlot:
			panic(fmt.Sprintf("stream: key id %d is not in the key table", id))
		}
	}
}

// rehash rebuilds the table without tombstones, sized for n keys at under
// half full, from keys: every entry but the freed ones (refs < 0). It reads
// keys in order rather than through the old table's ids, which for a
// per-user state were a cache miss each.
func (t *keyTable) rehash(keys []keyEntry, n int) {
	t.slots = emptySlots(n)
	t.live, t.used = 0, 0
	for id := range keys {
		if k := &keys[id]; k.refs >= 0 {
			t.insert(int32(id), t.hash(k.key))
		}
	}
}

// reset empties the table, sized for n keys.
func (t *keyTable) reset(n int) {
	t.slots = nil
	t.live, t.used = 0, 0
	t.rehash(nil, n)
}

// slotTable finds the slot of an open (window, key): open addressing over
// int32 slot indices, hashed by (bucket sequence, key id), compared against
// the slot itself (which records both). ~6 bytes per open pair where a
// map[uint64]int32 costs 20-40 with its doubling slack.
type slotTable struct {
	slots []int32 // emptySlot, tombstone, or an index into Engine.slots
	live  int
	used  int
}

// Len returns the number of open pairs.
func (t *slotTable) Len() int { return t.live }

func slotHash(seq uint32, kid int32) int {
	h := (uint64(seq)<<32 | uint64(uint32(kid))) * 0x9E3779B97F4A7C15
	return int(h >> 32)
}

// get returns the slot of (seq, kid).
func (t *slotTable) get(slots *slab, seq uint32, kid int32) (int32, bool) {
	if t.live == 0 {
		return 0, false
	}
	mask := len(t.slots) - 1
	for i := slotHash(seq, kid) & mask; ; i = (i + 1) & mask {
		switch idx := t.slots[i]; idx {
		case emptySlot:
			return 0, false
		case tombstone:
		default:
			if slots.at(idx).matches(seq, kid) {
				return idx, true
			}
		}
	}
}

// put adds slot idx, whose (seq, key) is absent from the table; the slab
// holds it already, so a table that must grow is rebuilt from the slab, idx
// with it.
func (t *slotTable) put(slots *slab, idx int32) {
	if (t.used+1)*4 > len(t.slots)*3 {
		t.rehash(slots, t.live+1)
		return
	}
	t.insert(slots, idx)
}

// insert adds slot idx to a table with room for it.
func (t *slotTable) insert(slots *slab, idx int32) {
	mask := len(t.slots) - 1
	s := slots.at(idx)
	i := slotHash(s.seq(), s.key) & mask
	for t.slots[i] >= 0 {
		i = (i + 1) & mask
	}
	if t.slots[i] == emptySlot {
		t.used++
	}
	t.slots[i] = idx
	t.live++
}

// del removes slot idx, present, before the slot itself is cleared.
func (t *slotTable) del(slots *slab, idx int32) {
	mask := len(t.slots) - 1
	s := slots.at(idx)
	for i := slotHash(s.seq(), s.key) & mask; ; i = (i + 1) & mask {
		switch t.slots[i] {
		case idx:
			t.slots[i] = tombstone
			t.live--
			return
		case emptySlot:
			panic(fmt.Sprintf("stream: slot %d is not in the slot table", idx))
		}
	}
}

// rehash rebuilds the table without tombstones, sized for n pairs at under
// half full, from the slab: every slot but the freed ones (key < 0), read
// in order rather than through the old table's indices, which for a
// per-user state were a cache miss each.
func (t *slotTable) rehash(slots *slab, n int) {
	t.slots = emptySlots(n)
	t.live, t.used = 0, 0
	for idx := range int32(slots.len()) {
		if slots.at(idx).key >= 0 {
			t.insert(slots, idx)
		}
	}
}

// emptySlots returns the slots of an open-addressing table for n entries:
// a power of two at least 16 and over twice n, every one empty.
func emptySlots(n int) []int32 {
	size := 16
	for size < 2*n {
		size *= 2
	}
	slots := make([]int32, size)
	for i := range slots {
		slots[i] = emptySlot
	}
	return slots
}

// clear empties the table in place, keeping its size.
func (t *keyTable) clear() {
	for i := range t.slots {
		t.slots[i] = emptySlot
	}
	t.live, t.used = 0, 0
}

// clear empties the table in place, keeping its size.
func (t *slotTable) clear() {
	for i := range t.slots {
		t.slots[i] = emptySlot
	}
	t.live, t.used = 0, 0
}

// touchAhead is how many records Process looks up ahead of folding them,
// once the state holds touchMinKeys keys: below that its tables and
// entries stay in the caches, and reading ahead would only add work (~30
// ns per record at 1k keys, BenchmarkProcess).
const (
	touchAhead   = 16
	touchMinKeys = 1 << 14
)

// touch hashes the keys of the next records into hashes and reads, for
// each, the memory its lookup will need: the key table's slot, the key's
// entry and bytes, and the slot the key was last given. With a per-user
// state far larger than the caches each of these is a miss; issued for
// sixteen independent records at once they overlap instead of stalling the
// fold one by one. It changes nothing: a lookup that misses here (a
// collision, a key the batch adds) is found by add as before.
func (e *Engine) touch(recs []tidemark.Record, hashes []int) {
	t := &e.keyIDs
	mask := len(t.slots) - 1
	var ids [touchAhead]int32
	for i := range recs {
		h := t.hash(recs[i].Key)
		hashes[i] = h
		ids[i] = -1
		if mask > 0 {
			ids[i] = t.slots[h&mask]
		}
	}
	var sink int32
	for i := range recs {
		if id := ids[i]; id >= 0 {
			k := &e.keys[id]
			if len(k.key) > 0 {
				sink += int32(k.key[len(k.key)-1])
			}
			ids[i] = k.last
		} else {
			ids[i] = -1
		}
	}
	for i := range recs {
		if l := ids[i]; uint(l) < uint(e.slots.len()) {
			sink += e.slots.at(l).key
		}
	}
	e.touched += sink
}

// touchSlot reads slot idx and its key entry, as touch does for records:
// the changelog's walk over a batch's changed slots (in the order records
// first touched them: all over the slab) calls it some slots ahead, so the
// misses of the slots it will read overlap.
func (e *Engine) touchSlot(idx int32) {
	if uint(idx) < uint(e.slots.len()) {
		if kid := e.slots.at(idx).key; kid >= 0 {
			e.touched += e.keys[kid].refs
		}
	}
}
