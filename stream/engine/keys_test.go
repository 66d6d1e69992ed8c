package engine

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"tidemark"
)

// TestKeyTable checks the intern table against a Go map over random
// interleavings of adds and deletes, through growth and tombstone rebuilds.
func TestKeyTable(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 16))
	tab := newKeyTable()
	var keys []keyEntry
	var free []int32
	want := map[tidemark.Key]int32{}
	for step := range 200_000 {
		k := tidemark.Key(fmt.Sprintf("k%d", rng.IntN(5000)))
		id, ok := tab.get(keys, k)
		wid, wok := want[k]
		if ok != wok || (ok && id != wid) {
			t.Fatalf("step %d: get(%q) = %d, %v; want %d, %v", step, k, id, ok, wid, wok)
		}
		switch {
		case !ok:
			if n := len(free); n > 0 {
				id, free = free[n-1], free[:n-1]
			} else {
				id = int32(len(keys))
				keys = append(keys, keyEntry{})
			}
			keys[id] = keyEntry{key: k}
			tab.put(keys, k, id)
			want[k] = id
		case rng.IntN(2) == 0:
			tab.del(k, id)
			keys[id] = keyEntry{refs: -1} // freed, as Engine.releaseKey leaves it
			free = append(free, id)
			delete(want, k)
		}
		if tab.Len() != len(want) {
			t.Fatalf("step %d: Len %d, want %d", step, tab.Len(), len(want))
		}
	}
	if len(tab.slots) > 4*2*5000 {
		t.Errorf("table of %d slots for at most 5000 keys", len(tab.slots))
	}
}

// TestKeyTableDelMissingPanics: deleting a key the table does not hold is
// an engine bug; it must stop at the first empty slot with a panic, not
// probe forever.
func TestKeyTableDelMissingPanics(t *testing.T) {
	tab := newKeyTable()
	keys := []keyEntry{{key: "a"}}
	tab.put(keys, "a", 0)
	defer func() {
		if recover() == nil {
			t.Fatal("del of a missing key returned")
		}
		if _, ok := tab.get(keys, "a"); !ok {
			t.Fatal("the failed del removed another key")
		}
	}()
	tab.del("b", 1)
}
