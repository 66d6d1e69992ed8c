package lateness

import (
	"hash/maphash"

	"tidemark"
)

// DefaultStateRowBytes is Config.StateRowBytes's default: what one open
// (window, key) aggregate costs the stream, as its state_bytes estimate
// counts it (the stream's BenchmarkStateBytes measured 97 bytes).
const DefaultStateRowBytes = 100

// keyWindows counts, per group, the windows of the lake's size that hold
// rows and the distinct (window, key) pairs among them: their ratio is the
// keys a window holds, which turns the what-if's open windows per key into
// state rows. The count is bounded: after max pairs it stops (the rows come
// in event-time order, so what it saw is the range's first part).
//
// Each window has a set of its keys' hashes (maphash, seeded): rows come
// nearly in event-time order, so most rows find their window's small set
// in the cache. One set of every pair's hash (bench.sh's 1M-row lake has
// 1,000 keys in each window) cost about a cache miss a row: in the CPU
// profile, keyWindows.add went from 0.07 to 0.03 s a report.
type keyWindows struct {
	size     int64 // window length, µs
	max      int
	seed     maphash.Seed
	pairs    int // counted so far, over every group
	windows  map[windowOf]*windowKeys
	perGroup map[int]*[2]int64 // group -> windows, pairs
	full     bool
	// The last window counted: rows come in runs of one window.
	last     windowOf
	lastKeys *windowKeys
}

type windowOf struct {
	group int
	start int64
}

// windowKeys is one window's keys and its group's counts.
type windowKeys struct {
	keys  map[uint64]struct{}
	count *[2]int64
}

func newKeyWindows(size int64, max int) *keyWindows {
	return &keyWindows{size: size, max: max, seed: maphash.MakeSeed(),
		windows: map[windowOf]*windowKeys{}, perGroup: map[int]*[2]int64{}}
}

func (kw *keyWindows) add(group int, t int64, k tidemark.Key) {
	if kw.full || kw.size <= 0 {
		return
	}
	if kw.pairs >= kw.max {
		kw.full = true
		return
	}
	at := windowOf{group, t - mod(t, kw.size)}
	w := kw.lastKeys
	if w == nil || kw.last != at {
		w = kw.windows[at]
		if w == nil {
			c := kw.perGroup[group]
			if c == nil {
				c = new([2]int64)
				kw.perGroup[group] = c
			}
			c[0]++
			w = &windowKeys{keys: map[uint64]struct{}{}, count: c}
			kw.windows[at] = w
		}
		kw.last, kw.lastKeys = at, w
	}
	h := maphash.String(kw.seed, string(k))
	if _, ok := w.keys[h]; !ok {
		w.keys[h] = struct{}{}
		w.count[1]++
		kw.pairs++
	}
}

// perWindow returns the mean number of keys in a window of group g (1 when
// nothing was counted: a lake without keys has one key).
func (kw *keyWindows) perWindow(g int) float64 {
	c := kw.perGroup[g]
	if c == nil || c[0] == 0 {
		return 1
	}
	return float64(c[1]) / float64(c[0])
}
