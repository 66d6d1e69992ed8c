package engine

import (
	"cmp"
	"slices"

	"tidemark"
)

// MemStore is a Store on the heap: a sorted list of pairs and a marker. It
// gives the store path of the engine (load a pair on first touch, close
// stored windows by range, flush, evict) without a database, so the engine's
// tests check that path against the memory engine with no I/O. A stream
// keeps its state in the slab (no Store) or in Pebble (stream's store).
type MemStore struct {
	pairs  []memPair // sorted by start, then key
	marker []byte
}

type memPair struct {
	start int64
	key   tidemark.Key
	agg   tidemark.Agg
	st    *tidemark.AggState // a copy of what was put; Get and Scan copy it
}

var _ Store = (*MemStore)(nil)

func comparePair(a memPair, start int64, key tidemark.Key) int {
	if c := cmp.Compare(a.start, start); c != 0 {
		return c
	}
	return a.key.Compare(key)
}

func (m *MemStore) find(start int64, key tidemark.Key) (int, bool) {
	return slices.BinarySearchFunc(m.pairs, memPair{start: start, key: key}, func(a, b memPair) int {
		return comparePair(a, b.start, b.key)
	})
}

// Get returns the stored aggregate of (start, key).
func (m *MemStore) Get(start int64, key tidemark.Key) (tidemark.Agg, *tidemark.AggState, bool, error) {
	if i, ok := m.find(start, key); ok {
		return m.pairs[i].agg, m.pairs[i].st.Clone(), true, nil
	}
	return tidemark.Agg{}, nil, false, nil
}

// Scan calls fn for every pair starting in [lo, hi], in order.
func (m *MemStore) Scan(lo, hi int64, fn PairFunc) error {
	return scanMem(m.pairs, lo, hi, fn)
}

func scanMem(pairs []memPair, lo, hi int64, fn PairFunc) error {
	i, _ := slices.BinarySearchFunc(pairs, lo, func(a memPair, lo int64) int { return cmp.Compare(a.start, lo) })
	for ; i < len(pairs) && pairs[i].start <= hi; i++ {
		if err := fn(pairs[i].start, pairs[i].key, pairs[i].agg, pairs[i].st.Clone()); err != nil {
			return err
		}
	}
	return nil
}

type memView []memPair

func (v memView) Scan(lo, hi int64, fn PairFunc) error { return scanMem(v, lo, hi, fn) }

// View is a copy of the pairs.
func (m *MemStore) View() (Scanner, func()) { return memView(slices.Clone(m.pairs)), func() {} }

// Write applies a flush.
func (m *MemStore) Write(deleteTo int64, del bool, pairs func(put PairFunc) error, marker []byte) error {
	if del {
		m.pairs = slices.DeleteFunc(m.pairs, func(p memPair) bool { return p.start <= deleteTo })
	}
	if err := m.Load(pairs); err != nil {
		return err
	}
	m.marker = slices.Clone(marker)
	return nil
}

// Load sets pairs.
func (m *MemStore) Load(pairs func(put PairFunc) error) error {
	return pairs(func(start int64, key tidemark.Key, agg tidemark.Agg, st *tidemark.AggState) error {
		i, ok := m.find(start, key)
		if ok {
			m.pairs[i].agg, m.pairs[i].st = agg, st.Clone()
			return nil
		}
		m.pairs = slices.Insert(m.pairs, i, memPair{start: start, key: key, agg: agg, st: st.Clone()})
		return nil
	})
}

// Marker returns the marker of the last Write.
func (m *MemStore) Marker() ([]byte, bool) { return m.marker, m.marker != nil }

// DropMarker deletes the marker.
func (m *MemStore) DropMarker() error { m.marker = nil; return nil }

// Clear deletes every pair and the marker.
func (m *MemStore) Clear() error { m.pairs, m.marker = nil, nil; return nil }

// Bytes is a rough size: the keys and the aggregates.
func (m *MemStore) Bytes() int64 {
	var n int64
	for _, p := range m.pairs {
		n += int64(len(p.key)) + 64
	}
	return n
}

func (m *MemStore) String() string { return "memory" }

// Close does nothing: the pairs stay readable (a test reopens them).
func (m *MemStore) Close() error { return nil }
