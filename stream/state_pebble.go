package stream

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/bloom"
	"github.com/cockroachdb/pebble/v2/vfs"

	"tidemark"
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
	// MemoryLimit is the Go GC's soft memory limit (--memory-limit): bytes,
	// 0 for auto (state_memory.go), < 0 for off.
	MemoryLimit int64
}

func (o StateOptions) validate() error {
	switch o.Store {
	case "", StateMemory:
		if o.Dir != "" {
			return errors.New("stream: --state-dir needs --state-store pebble")
		}
	case StatePebble:
	default:
		return fmt.Errorf("stream: unknown --state-store %q (memory or pebble)", o.Store)
	}
	return nil
}

// The Pebble database holds one entry per open (window, key) and a marker:
//
//	'p' + big-endian (window start ^ sign bit) + orderedKey(key) -> the aggregate
//	'm'                                                           -> diskMarker
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

// diskState is the Pebble side of an Engine using StatePebble.
type diskState struct {
	db  *pebble.DB
	dir string

	open int64 // open pairs in db (closed ones not yet deleted excluded)
	// Pairs starting at or before closedTo are closed: the scan that closed
	// them emitted them, and the next flush deletes them.
	closedTo  int64
	hasClosed bool

	flushed bool // memory holds only pairs already in db: the next batch evicts them
	reused  bool // opened on a database whose marker matched the last commit
	kbuf    []byte
	vbuf    []byte
}

// diskMarker is what the database says about itself: whose state, after
// which committed batch, and the non-pair part of that state.
type diskMarker struct {
	StreamID     string
	BatchID      int64
	Token        uint32 // stateRef.Token of the batch: CRC-32C of its changes
	Window       tidemark.WindowSpec
	Watermark    int64
	HasWatermark bool
	Sources      []SourceState
	Open         int64
}

const markerMagic = "TMPB\x01"

func (m *diskMarker) marshal() []byte {
	b := append([]byte(nil), markerMagic...)
	b = appendString(b, m.StreamID)
	b = binary.AppendVarint(b, m.BatchID)
	b = binary.LittleEndian.AppendUint32(b, m.Token)
	b = binary.AppendVarint(b, m.Window.Size)
	b = binary.AppendVarint(b, m.Window.Slide)
	b = appendBool(b, m.HasWatermark)
	b = binary.AppendVarint(b, m.Watermark)
	b = appendSources(b, m.Sources)
	b = binary.AppendVarint(b, m.Open)
	return binary.LittleEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
}

func (m *diskMarker) unmarshal(data []byte) error {
	d, err := openFramed(data, markerMagic, "local state marker")
	if err != nil {
		return err
	}
	var out diskMarker
	out.StreamID = d.string()
	out.BatchID = d.varint()
	if len(d.b) < 4 {
		d.fail()
	} else {
		out.Token = binary.LittleEndian.Uint32(d.b)
		d.b = d.b[4:]
	}
	var st State
	d.stateHeader(&st)
	out.Window, out.HasWatermark, out.Watermark, out.Sources = st.Window, st.HasWatermark, st.Watermark, st.Sources
	out.Open = d.varint()
	if err := d.finish("local state marker"); err != nil {
		return err
	}
	*m = out
	return nil
}

// pairKey appends the database key of (start, key) to dst.
func pairKey(dst []byte, start int64, key tidemark.Key) []byte {
	dst = append(dst, pairPrefix)
	dst = binary.BigEndian.AppendUint64(dst, uint64(start)^(1<<63))
	return appendOrderedKeyChecked(dst, key)
}

// appendOrderedKey encodes key so that bytewise order is Key.Compare's:
// per part 0x00 (null) or 0x01, the value with 0x00 escaped as 0x00 0xff,
// and 0x00 0x01 as terminator; bytes after the last well-formed part (keys
// MakeKey never makes) as 0x02 and the same escaping.
func appendOrderedKey(dst []byte, key tidemark.Key) []byte {
	parts := key.Parts()
	wellFormed := 0
	for _, p := range parts {
		if p.Null {
			dst = append(dst, 0)
			wellFormed++
			continue
		}
		dst = appendEscaped(append(dst, 1), p.Value)
		wellFormed += 1 + uvarintLen(uint64(len(p.Value))) + len(p.Value)
	}
	if wellFormed < len(key) {
		dst = appendEscaped(append(dst, 2), string(key[wellFormed:]))
	}
	return dst
}

// appendOrderedKeyChecked is appendOrderedKey for any key: one whose parts
// do not re-encode to its own prefix (a non-minimal length, never made by
// MakeKey) is stored whole as one malformed tail, which decodes back.
func appendOrderedKeyChecked(dst []byte, key tidemark.Key) []byte {
	parts := key.Parts()
	enc := tidemark.AppendKey(nil, parts...)
	if len(enc) > len(key) || string(enc) != string(key[:len(enc)]) {
		return appendEscaped(append(dst, 2), string(key))
	}
	return appendOrderedKey(dst, key)
}

func uvarintLen(v uint64) int {
	n := 1
	for ; v >= 0x80; v >>= 7 {
		n++
	}
	return n
}

func appendEscaped(dst []byte, v string) []byte {
	for i := 0; i < len(v); i++ {
		if v[i] == 0 {
			dst = append(dst, 0, 0xff)
		} else {
			dst = append(dst, v[i])
		}
	}
	return append(dst, 0, 1)
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

func decodeAgg(v []byte) (tidemark.Agg, error) {
	d := decoder{b: v}
	a := d.agg()
	return a, d.finish("local state aggregate")
}

// quietLogger keeps Pebble's informational lines (compactions, WAL
// recycling) off the stream's stderr; errors still show.
type quietLogger struct{}

func (quietLogger) Infof(string, ...any) {}
func (quietLogger) Errorf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "pebble: "+format+"\n", args...)
}
func (quietLogger) Fatalf(format string, args ...any) {
	panic(fmt.Sprintf("pebble: "+format, args...))
}

// defaultStateDir is where a stream's Pebble state lives without --state-dir.
func defaultStateDir(streamID string) (string, error) {
	base, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("stream: no --state-dir and no user cache directory: %w", err)
	}
	return filepath.Join(base, "tidemark", "state", streamID), nil
}

// openPebble opens (creating) the database in dir. A directory holding
// something else is refused; a database of ours that Pebble cannot open
// (damaged files) is removed and created anew: it is only a working copy.
func openPebble(dir string) (*pebble.DB, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("stream: create --state-dir %s: %w", dir, err)
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("stream: read --state-dir %s: %w", dir, err)
	}
	_, statErr := os.Stat(filepath.Join(dir, ownerFile))
	ours := statErr == nil
	if len(ents) > 0 && !ours {
		return nil, fmt.Errorf("stream: --state-dir %s is not empty and was not made by tidemark; give an empty or new directory", dir)
	}
	if !ours {
		if err := os.WriteFile(filepath.Join(dir, ownerFile), []byte("tidemark stream state (Pebble): a local copy of the checkpoint's state, safe to delete while the stream is stopped\n"), 0o644); err != nil {
			return nil, fmt.Errorf("stream: --state-dir %s: %w", dir, err)
		}
	}
	opts := func() *pebble.Options {
		o := &pebble.Options{
			CacheSize:    pebbleCacheBytes,
			MemTableSize: pebbleMemTableBytes,
			Logger:       quietLogger{},
			// The plain filesystem: Pebble's default wraps it with disk-health
			// checks whose goroutine a failed Open never stops.
			FS: vfs.Default,
		}
		// Bloom filters: most lookups of a batch are for pairs that do not
		// exist yet (a user's first event in a window), answered without
		// reading a data block.
		for i := range o.Levels {
			o.Levels[i].FilterPolicy = bloom.FilterPolicy(10)
		}
		return o
	}
	db, err := pebble.Open(filepath.Join(dir, "db"), opts())
	if err == nil {
		return db, nil
	}
	if errors.Is(err, fs.ErrPermission) || isLockError(err) {
		return nil, fmt.Errorf("stream: open local state %s: %w", dir, err)
	}
	// Damaged: drop it, the checkpoint rebuilds it.
	if rmErr := os.RemoveAll(filepath.Join(dir, "db")); rmErr != nil {
		return nil, fmt.Errorf("stream: local state %s is damaged (%v) and cannot be removed: %w", dir, err, rmErr)
	}
	db, err2 := pebble.Open(filepath.Join(dir, "db"), opts())
	if err2 != nil {
		return nil, fmt.Errorf("stream: open local state %s: %w", dir, err2)
	}
	return db, nil
}

// isLockError reports whether Pebble failed because another process holds
// the database: never a reason to delete it.
func isLockError(err error) bool {
	return bytes.Contains([]byte(err.Error()), []byte("lock"))
}

// readMarker returns the database's marker; ok is false when it has none
// or an unreadable one.
func (d *diskState) readMarker() (diskMarker, bool) {
	var m diskMarker
	v, closer, err := d.db.Get([]byte(markerName))
	if err != nil {
		return m, false
	}
	defer closer.Close()
	if m.unmarshal(v) != nil {
		return m, false
	}
	return m, true
}

// get returns the stored aggregate of (start, key).
func (d *diskState) get(start int64, key tidemark.Key) (tidemark.Agg, bool, error) {
	d.kbuf = pairKey(d.kbuf[:0], start, key)
	v, closer, err := d.db.Get(d.kbuf)
	if errors.Is(err, pebble.ErrNotFound) {
		return tidemark.Agg{}, false, nil
	}
	if err != nil {
		return tidemark.Agg{}, false, fmt.Errorf("stream: local state %s: %w", d.dir, err)
	}
	a, err := decodeAgg(v)
	closer.Close()
	if err != nil {
		return a, false, fmt.Errorf("stream: local state %s: %w", d.dir, err)
	}
	return a, true, nil
}

// lowerBound is where open pairs start in key order.
func (d *diskState) lowerBound() []byte {
	if !d.hasClosed {
		return []byte{pairPrefix}
	}
	return pairKey(nil, d.closedTo+1, "")
}

// scan calls fn for each pair with lower bound <= key < upper, in order.
func scanPairs(r pebble.Reader, lower, upper []byte, fn func(start int64, key tidemark.Key, agg tidemark.Agg) error) error {
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
		agg, err := decodeAgg(v)
		if err != nil {
			it.Close()
			return err
		}
		if err := fn(start, key, agg); err != nil {
			it.Close()
			return err
		}
	}
	return errors.Join(it.Error(), it.Close())
}

// wipe empties the database: pairs and marker.
func (d *diskState) wipe() error {
	b := d.db.NewBatch()
	defer b.Close()
	if err := b.DeleteRange([]byte{0}, []byte{0xff}, nil); err != nil {
		return err
	}
	if err := b.Commit(pebble.NoSync); err != nil {
		return fmt.Errorf("stream: clear local state %s: %w", d.dir, err)
	}
	d.open, d.hasClosed = 0, false
	return nil
}

// bytes is the store's size on disk (tables, WAL, manifest).
func (d *diskState) bytes() int64 {
	return int64(d.db.Metrics().DiskSpaceUsage())
}
