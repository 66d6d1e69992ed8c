package engine

// Key order: each window's pairs are emitted and snapshotted in key order,
// sorted by an eight-byte prefix of the ordered key encoding.

import (
	"cmp"
	"encoding/binary"
	"slices"

	"tidemark"
)

// keyOrder is a slot with the first eight bytes of its key's ordered
// encoding (appendOrderedKey), which decide most comparisons without
// touching the key.
type keyOrder struct {
	prefix uint64
	idx    int32
}

// sortSlots sorts a window's slot list by key, in place, through buf. The
// list's first b.sorted slots are in key order from the last sort (a list
// only grows at its end), so only the slots added since are sorted, then
// merged with them; a window untouched since then costs nothing.
func (e *Engine) sortSlots(b *bucket, buf []keyOrder) []keyOrder {
	slots := b.slots
	head := int(b.sorted)
	if head >= len(slots) {
		return buf
	}
	buf = slices.Grow(buf[:0], len(slots))
	for _, idx := range slots {
		buf = append(buf, keyOrder{prefix: e.keys[e.slots.at(idx).key].prefix, idx: idx})
	}
	less := func(a, b keyOrder) int {
		if c := cmp.Compare(a.prefix, b.prefix); c != 0 {
			return c
		}
		return e.keys[e.slots.at(a.idx).key].key.Compare(e.keys[e.slots.at(b.idx).key].key)
	}
	tail := buf[head:]
	slices.SortFunc(tail, less)
	if head == 0 || less(buf[head-1], tail[0]) < 0 {
		for i, o := range buf {
			slots[i] = o.idx
		}
	} else {
		// Merge the sorted head with the sorted tail into slots; keys are
		// distinct within a window, so the order is total.
		i, j, k := 0, head, 0
		for i < head && j < len(buf) {
			if less(buf[i], buf[j]) < 0 {
				slots[k] = buf[i].idx
				i++
			} else {
				slots[k] = buf[j].idx
				j++
			}
			k++
		}
		for ; i < head; i, k = i+1, k+1 {
			slots[k] = buf[i].idx
		}
		for ; j < len(buf); j, k = j+1, k+1 {
			slots[k] = buf[j].idx
		}
	}
	b.sorted = int32(len(slots))
	return buf
}

// orderedPrefix returns the first eight bytes of appendOrderedKey(key) as a
// big-endian number (zero-padded), so prefixes order as keys do wherever
// they differ. Single-byte-length values and nulls are encoded in place;
// anything else goes through AppendOrderedKey.
func orderedPrefix(key tidemark.Key, dst []byte) uint64 {
	s := string(key)
	for len(dst) < 8 && len(s) > 0 {
		switch {
		case s[0] == 0:
			dst = append(dst, 0)
			s = s[1:]
		case s[0] == 1 && len(s) >= 2 && s[1] < 0x80 && int(s[1]) <= len(s)-2:
			dst = append(dst, 1)
			for _, c := range []byte(s[2 : 2+int(s[1])]) {
				if c == 0 {
					dst = append(dst, 0, 0xff)
				} else {
					dst = append(dst, c)
				}
				if len(dst) >= 8 {
					break
				}
			}
			dst = append(dst, 0, 1)
			s = s[2+int(s[1]):]
		default:
			dst = AppendOrderedKey(dst[:0], key)
			s = ""
		}
	}
	var b [8]byte
	copy(b[:], dst)
	return binary.BigEndian.Uint64(b[:])
}
