package engine

// Closing windows: what the watermark closes leaves the slab (and the Store),
// and the slab's containers shrink when mostly empty.

import (
	"slices"

	"tidemark"
)

// closes reports whether the window starting at start is closed by W.
func (e *Engine) closes(start int64) bool {
	size := e.cfg.Window.Size
	return e.hasW && e.w >= tidemark.MinTime+size && start <= e.w-size
}

// closeUpTo appends every window with end <= w to out, final, and frees
// its state.
func (e *Engine) closeUpTo(w int64, out []tidemark.Result) []tidemark.Result {
	return e.closeWindows(w, out, true)
}

// closeWindows frees every window with end <= w, appending it to out when
// emit is set. With a Store the stored pairs of those windows are
// found by a range scan (closeDisk), never a scan of all state.
func (e *Engine) closeWindows(w int64, out []tidemark.Result, emit bool) []tidemark.Result {
	size := e.cfg.Window.Size
	if w < tidemark.MinTime+size {
		return out // no window can end at or before w
	}
	if e.disk != nil {
		out = e.closeDisk(w-size, out, emit)
	}
	if emit {
		more := 0
		for i := 0; i < len(e.buckets) && e.buckets[i].start <= w-size; i++ {
			more += len(e.buckets[i].slots)
		}
		out = slices.Grow(out, more)
	}
	// all: every open window closes (the drain), so the containers are
	// emptied at once below rather than slot by slot.
	all := e.disk == nil && len(e.buckets) > 0 && e.buckets[len(e.buckets)-1].start <= w-size
	n := 0
	var order []keyOrder
	for ; n < len(e.buckets) && e.buckets[n].start <= w-size; n++ {
		b := &e.buckets[n]
		win := tidemark.Window{Start: b.start, End: b.start + size}
		if emit {
			// Emitted in key order, window after window: finish then
			// finds the output sorted rather than sorting its results.
			order = e.sortSlots(b, order)
		}
		for _, idx := range b.slots {
			s := e.slots.at(idx)
			if emit {
				// The state leaves with the pair: its slot is freed or
				// (all) the states dropped below.
				out = append(out, tidemark.Result{Window: win, Key: e.keys[s.key].key, Agg: s.agg, Final: true, State: e.stateOf(idx)})
			}
			if int(idx) < len(e.states) {
				e.states[idx] = nil
			}
			if all {
				continue
			}
			if e.disk != nil {
				if s.seqf&diskBit != 0 {
					e.disk.open--
				} else {
					e.memNew--
				}
			}
			e.index.del(&e.slots, idx)
			e.releaseKey(s.key)
			*s = slot{key: -1} // matches no key: a stale last hint misses
			e.free = append(e.free, idx)
		}
		e.spare = append(e.spare, b.slots[:0])
		e.seqs = append(e.seqs, b.seq)
	}
	e.buckets = slices.Delete(e.buckets, 0, n)
	if all {
		e.clearOpen()
	} else if n > 0 {
		e.compact()
	}
	return out
}

// clearOpen empties a memory engine's slab and tables once every window
// has closed, releasing them as compact would: the empty tables grow again
// on the next put.
func (e *Engine) clearOpen() {
	e.slots, e.free = slab{}, nil
	e.states = nil
	e.keys, e.freeKeys = nil, nil
	e.spare = nil
	e.keyIDs = keyTable{seed: e.keyIDs.seed}
	e.index = slotTable{}
	e.keyBytes = 0
}

// compactMin is the slab size below which compact never bothers.
const compactMin = 4096

// compact rebuilds the state's containers when closing has left them
// mostly empty (under a quarter of the slab open). Go maps and slices never
// shrink, so without it a burst of keys (a backfill, a spike of users)
// would hold its peak memory for the rest of the run. The rebuild costs
// O(open pairs) and happens only after three quarters of the slab closed,
// so it is paid for by those closes.
func (e *Engine) compact() {
	open := e.index.Len()
	if e.slots.len() < compactMin || open > e.slots.len()/4 {
		return
	}
	remap := make([]int32, e.slots.len()) // old slot index -> new
	keyRemap := make([]int32, len(e.keys))
	for i := range keyRemap {
		keyRemap[i] = -1
	}
	var slots slab
	var states []*tidemark.AggState
	if e.states != nil {
		states = make([]*tidemark.AggState, 0, open)
	}
	keys := make([]keyEntry, 0, e.keyIDs.Len())
	keyIDs := keyTable{seed: e.keyIDs.seed}
	keyIDs.reset(e.keyIDs.Len())
	var index slotTable
	index.rehash(&slots, open)
	for bi := range e.buckets {
		b := &e.buckets[bi]
		list := make([]int32, 0, len(b.slots))
		for _, idx := range b.slots {
			s := *e.slots.at(idx)
			kid := keyRemap[s.key]
			if kid < 0 {
				kid = int32(len(keys))
				key := e.keys[s.key].key
				keys = append(keys, keyEntry{key: key, prefix: e.keys[s.key].prefix})
				keyIDs.put(keys, key, kid)
				keyRemap[s.key] = kid
			}
			keys[kid].refs++
			s.key = kid
			n := slots.push()
			*slots.at(n) = s
			if states != nil {
				states = append(states, e.stateOf(idx))
			}
			keys[kid].last = n
			remap[idx] = n
			list = append(list, n)
			index.put(&slots, n)
		}
		b.slots = list
	}
	for i, c := range e.changed {
		if !e.closes(c.start) {
			e.changed[i].idx = remap[c.idx]
		}
	}
	e.slots, e.keys, e.keyIDs, e.index, e.states = slots, keys, keyIDs, index, states
	e.free, e.freeKeys, e.spare = nil, nil, nil
}
