package stream

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/cockroachdb/pebble/v2"

	"tidemark"
	"tidemark/stream/engine"
)

// StateStore names where a stream keeps its open (window, key) aggregates.
type StateStore string

const (
	// StateMemory keeps them in the engine's slab on the heap (the default).
	StateMemory StateStore = "memory"
	// StatePebble keeps them in a local Pebble database; the engine holds
	// only the pairs the current batch touches.
	StatePebble StateStore = "pebble"
)

// StateOptions chooses the store of the open state (--state-store,
// --state-dir). The checkpoint stays the durable record either way: a
// Pebble database is a local working copy of the state after the last
// committed batch, reused at a restart only when it provably is that state.
type StateOptions struct {
	Store StateStore // "" means StateMemory
	// Dir is the Pebble database's directory; "" means
	// <user cache dir>/tidemark/state/<stream id>. It must be local, empty
	// or a directory this store made; one stream uses it at a time.
	Dir string
}

func (o StateOptions) validate() error {
	switch o.Store {
	case "", StateMemory:
		if o.Dir != "" {
			return configErr("{State.Dir} needs {State.Store} pebble")
		}
	case StatePebble:
	default:
		return configErr("unknown {State.Store} %q (memory or pebble)", o.Store)
	}
	return nil
}

// The Pebble database holds one entry per open (window, key) and a marker:
//
//	'p' + big-endian (window start ^ sign bit) + orderedKey(key) -> the aggregate
//	'm'                                                           -> engine.Marker
//
// so keys sort by window start, then by key in Key.Compare's order: closing
// windows is a range scan from the first open window start to the new last
// closed one, and a snapshot is one scan in the order the memory store
// writes it. The marker is written in the same Pebble batch as the pairs it
// describes.
const (
	pairPrefix = 'p'
	markerName = "m"
)

// Pebble's memory: the block cache and the memtable. Both are small next to
// the batch pipeline; the state's bulk is on disk, paged in by the cache.
const (
	pebbleCacheBytes    = 32 << 20
	pebbleMemTableBytes = 16 << 20
)

// ownerFile marks a directory this store created, so a damaged database is
// removed and rebuilt only where it is provably ours.
const ownerFile = "TIDEMARK_STATE"

// pebbleStore is the engine.Store of --state-store pebble: a local Pebble
// database, a working copy of the state after the last committed batch
// (its marker, engine.Marker, says which). It lives here, with the
// runner, because it does I/O; the engine package does none.
type pebbleStore struct {
	db   *pebble.DB
	dir  string
	kbuf []byte
	vbuf []byte
}

var _ engine.Store = (*pebbleStore)(nil)

func (d *pebbleStore) String() string { return d.dir }

// pairKey appends the database key of (start, key) to dst.
func pairKey(dst []byte, start int64, key tidemark.Key) []byte {
	dst = append(dst, pairPrefix)
	dst = binary.BigEndian.AppendUint64(dst, uint64(start)^(1<<63))
	return engine.AppendOrderedKey(dst, key)
}

// decodePairKey inverts pairKey.
func decodePairKey(k []byte) (int64, tidemark.Key, error) {
	if len(k) < 9 || k[0] != pairPrefix {
		return 0, "", errors.New("stream: local state: bad pair key")
	}
	start := int64(binary.BigEndian.Uint64(k[1:9]) ^ (1 << 63))
	var out []byte
	for b := k[9:]; len(b) > 0; {
		tag := b[0]
		b = b[1:]
		if tag == 0 {
			out = append(out, 0)
			continue
		}
		if tag > 2 {
			return 0, "", errors.New("stream: local state: bad key part")
		}
		var v []byte
		for {
			if len(b) < 2 && (len(b) == 0 || b[0] == 0) {
				return 0, "", errors.New("stream: local state: unterminated key part")
			}
			if b[0] != 0 {
				v = append(v, b[0])
				b = b[1:]
				continue
			}
			if b[1] == 0xff {
				v = append(v, 0)
				b = b[2:]
				continue
			}
			if b[1] != 1 {
				return 0, "", errors.New("stream: local state: bad key escape")
			}
			b = b[2:]
			break
		}
		if tag == 1 {
			out = tidemark.AppendKeyPart(out, string(v), false)
		} else {
			out = append(out, v...)
		}
	}
	return start, tidemark.Key(out), nil
}

// decodePair decodes a pair's value: its aggregate and --agg state.
func decodePair(v []byte) (tidemark.Agg, *tidemark.AggState, error) { return engine.DecodePair(v) }

// Marker returns the database's marker; ok is false when it has none.
func (d *pebbleStore) Marker() ([]byte, bool) {
	v, closer, err := d.db.Get([]byte(markerName))
	if err != nil {
		return nil, false
	}
	defer closer.Close()
	return append([]byte(nil), v...), true
}

// DropMarker deletes the marker, durably.
func (d *pebbleStore) DropMarker() error {
	return d.db.Delete([]byte(markerName), pebble.Sync)
}

// Get returns the stored aggregate of (start, key).
func (d *pebbleStore) Get(start int64, key tidemark.Key) (tidemark.Agg, *tidemark.AggState, bool, error) {
	d.kbuf = pairKey(d.kbuf[:0], start, key)
	v, closer, err := d.db.Get(d.kbuf)
	if errors.Is(err, pebble.ErrNotFound) {
		return tidemark.Agg{}, nil, false, nil
	}
	if err != nil {
		return tidemark.Agg{}, nil, false, fmt.Errorf("stream: local state %s: %w", d.dir, err)
	}
	a, st, err := decodePair(v)
	closer.Close()
	if err != nil {
		return a, nil, false, fmt.Errorf("stream: local state %s: %w", d.dir, err)
	}
	return a, st, true, nil
}

// Scan calls fn for every pair starting in [lo, hi], in key order.
func (d *pebbleStore) Scan(lo, hi int64, fn engine.PairFunc) error {
	return scanRange(d.db, lo, hi, fn)
}

// View is a Pebble snapshot of the database.
func (d *pebbleStore) View() (engine.Scanner, func()) {
	snap := d.db.NewSnapshot()
	return pebbleView{snap}, func() { snap.Close() }
}

type pebbleView struct{ r pebble.Reader }

func (v pebbleView) Scan(lo, hi int64, fn engine.PairFunc) error { return scanRange(v.r, lo, hi, fn) }

// scanRange scans the pairs of r starting in [lo, hi].
func scanRange(r pebble.Reader, lo, hi int64, fn engine.PairFunc) error {
	lower := []byte{pairPrefix}
	if lo > tidemark.MinTime {
		lower = pairKey(nil, lo, "")
	}
	upper := []byte{pairPrefix + 1}
	if hi < tidemark.MaxTime {
		upper = pairKey(nil, hi+1, "")
	}
	return scanPairs(r, lower, upper, fn)
}

// Write applies a flush in one Pebble batch (not synced: the checkpoint is
// the durable record, and the marker in the same batch says which state
// the database holds).
func (d *pebbleStore) Write(deleteTo int64, del bool, pairs func(put engine.PairFunc) error, marker []byte) error {
	b := d.db.NewBatch()
	defer b.Close()
	if del {
		if err := b.DeleteRange([]byte{pairPrefix}, pairKey(nil, deleteTo+1, ""), nil); err != nil {
			return err
		}
	}
	err := pairs(func(start int64, key tidemark.Key, agg tidemark.Agg, st *tidemark.AggState) error {
		d.kbuf = pairKey(d.kbuf[:0], start, key)
		var err error
		if d.vbuf, err = engine.AppendPair(d.vbuf[:0], agg, st); err != nil {
			return err
		}
		return b.Set(d.kbuf, d.vbuf, nil)
	})
	if err != nil {
		return err
	}
	if marker != nil {
		if err := b.Set([]byte(markerName), marker, nil); err != nil {
			return err
		}
	} else if err := b.Delete([]byte(markerName), nil); err != nil {
		return err
	}
	if err := b.Commit(pebble.NoSync); err != nil {
		return fmt.Errorf("stream: write local state %s: %w", d.dir, err)
	}
	return nil
}

// Load writes pairs into the (empty) database in Pebble batches of a few
// MiB.
func (d *pebbleStore) Load(pairs func(put engine.PairFunc) error) error {
	b := d.db.NewBatch()
	defer func() { b.Close() }()
	err := pairs(func(start int64, key tidemark.Key, agg tidemark.Agg, st *tidemark.AggState) error {
		d.kbuf = pairKey(d.kbuf[:0], start, key)
		var err error
		if d.vbuf, err = engine.AppendPair(d.vbuf[:0], agg, st); err != nil {
			return err
		}
		if err := b.Set(d.kbuf, d.vbuf, nil); err != nil {
			return err
		}
		if b.Len() < 4<<20 {
			return nil
		}
		if err := b.Commit(pebble.NoSync); err != nil {
			return err
		}
		b.Close()
		b = d.db.NewBatch()
		return nil
	})
	if err != nil {
		return err
	}
	if err := b.Commit(pebble.NoSync); err != nil {
		return fmt.Errorf("stream: write local state %s: %w", d.dir, err)
	}
	return nil
}

// scanPairs calls fn for each pair with lower <= key < upper, in order.
func scanPairs(r pebble.Reader, lower, upper []byte, fn engine.PairFunc) error {
	it, err := r.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: upper})
	if err != nil {
		return err
	}
	for ok := it.First(); ok; ok = it.Next() {
		start, key, err := decodePairKey(it.Key())
		if err != nil {
			it.Close()
			return err
		}
		v, err := it.ValueAndErr()
		if err != nil {
			it.Close()
			return err
		}
		agg, st, err := decodePair(v)
		if err != nil {
			it.Close()
			return err
		}
		if err := fn(start, key, agg, st); err != nil {
			it.Close()
			return err
		}
	}
	return errors.Join(it.Error(), it.Close())
}

// Clear empties the database: pairs and marker.
func (d *pebbleStore) Clear() error {
	b := d.db.NewBatch()
	defer b.Close()
	if err := b.DeleteRange([]byte{0}, []byte{0xff}, nil); err != nil {
		return err
	}
	if err := b.Commit(pebble.NoSync); err != nil {
		return fmt.Errorf("stream: clear local state %s: %w", d.dir, err)
	}
	return nil
}

// Bytes is the store's size on disk (tables, WAL, manifest).
func (d *pebbleStore) Bytes() int64 {
	return int64(d.db.Metrics().DiskSpaceUsage())
}

func (d *pebbleStore) Close() error { return d.db.Close() }
