package lake

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"time"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/deprecated"
	"github.com/parquet-go/parquet-go/encoding"
	"github.com/parquet-go/parquet-go/format"

	"tidemark"

	"tidemark/lake/delta"
	"tidemark/lake/store"
)

// colData is one decoded column of a row group. Only the slice for the
// column's kind is filled; null is per row and meaningful only when hasNull.
//
// A string column whose every page is dictionary-encoded (with one
// dictionary, as Parquet writes it) also has codes (per row, the dictionary
// index; -1 for null) and dict (the dictionary's values), so readers can
// decode each distinct value once.
type colData struct {
	ints   []int64   // timestamp, long
	floats []float64 // double
	bools  []bool    // boolean
	bytes  [][]byte  // string, binary: views into arena or dictArena
	null   []bool    // per row; meaningful only when hasNull
	arena  []byte

	hasNull bool

	codes     []int32
	dict      [][]byte
	dictOK    bool
	dictArena []byte
	offs      []int   // arena [start, end) per plain byte value, in row order
	src       []int32 // scratch of chunkReader.src, kept for its capacity
	// codesOnly (set by the reader's owner, kept by reset): a reader of
	// this string column reads dict and codes when dictOK, so the per-row
	// views (bytes, 24 bytes a row) are cut only when it is not.
	codesOnly bool
}

// reserve makes room for n rows, so decoding appends without regrowing.
// The buffers are empty (reset) and reused from row group to row group.
func (c *colData) reserve(k kind, n int) {
	c.null = room(c.null, n)
	switch k {
	case kindTimestamp, kindLong:
		c.ints = room(c.ints, n)
	case kindDouble:
		c.floats = room(c.floats, n)
	case kindBool:
		c.bools = room(c.bools, n)
	default:
		if !c.codesOnly {
			c.bytes = room(c.bytes, n)
		}
		c.src = room(c.src[:0], n)
	}
}

// room returns the empty s, or a new slice with room for n and an eighth
// more when s has less: row groups of a table differ a little in size,
// and a buffer sized exactly was made anew (zeroed, fresh pages) for
// each larger one, 0.03 of lateness's 0.5 CPU-s over a 1M-row lake.
func room[T any](s []T, n int) []T {
	if cap(s) >= n {
		return s
	}
	return make([]T, 0, n+n/8)
}

func (c *colData) reset() {
	c.ints, c.floats, c.bools, c.bytes, c.null, c.arena = c.ints[:0], c.floats[:0], c.bools[:0], c.bytes[:0], c.null[:0], c.arena[:0]
	c.hasNull = false
	c.codes, c.dict, c.dictOK, c.dictArena, c.offs = c.codes[:0], c.dict[:0], false, c.dictArena[:0], c.offs[:0]
}

// isNull reports whether row i is null.
func (c *colData) isNull(i int) bool { return c.hasNull && c.null[i] }

// fileReader reads one Parquet data file of a table through store.Reader.
// parquet-go can panic on a malformed file (issue #537); every entry point
// recovers and returns an error naming the file instead.
type fileReader struct {
	key string
	r   store.Reader
	f   *parquet.File
}

// errCorrupt marks a data file that could not be decoded.
var errCorrupt = errors.New("lake: corrupt data file")

func recoverTo(key string, err *error) {
	if p := recover(); p != nil {
		*err = fmt.Errorf("read %s: %w: parquet panic: %v", key, errCorrupt, p)
	}
}

func openFileReader(ctx context.Context, st store.Store, key string) (fr *fileReader, err error) {
	r, err := st.Open(ctx, key)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", key, err)
	}
	defer func() {
		if err != nil {
			r.Close()
		}
	}()
	defer recoverTo(key, &err)
	if err := delta.CheckParquetTrailer(r, r.Size()); err != nil {
		return nil, fmt.Errorf("read %s: %w: %v", key, errCorrupt, err)
	}
	f, err := parquet.OpenFile(r, r.Size(), parquet.SkipBloomFilters(true), parquet.SkipPageIndex(true), parquet.ReadBufferSize(1<<20))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w: %v", key, errCorrupt, err)
	}
	return &fileReader{key: key, r: r, f: f}, nil
}

func (fr *fileReader) Close() error { return fr.r.Close() }

func (fr *fileReader) numRowGroups() int { return len(fr.f.Metadata().RowGroups) }

// int64Range returns the min and max of a timestamp or long column in row
// group rg from the footer statistics, ok=false when they are missing.
func (fr *fileReader) int64Range(rg int, name string) (lo, hi int64, ok bool) {
	lc, found := fr.f.Schema().Lookup(name)
	if !found || lc.Node.Type().Kind() != parquet.Int64 {
		return 0, 0, false // INT96 statistics are not ordered: none
	}
	md := fr.f.Metadata()
	if rg >= len(md.RowGroups) || lc.ColumnIndex >= len(md.RowGroups[rg].Columns) {
		return 0, 0, false
	}
	s := md.RowGroups[rg].Columns[lc.ColumnIndex].MetaData.Statistics
	minV, maxV := s.MinValue, s.MaxValue
	if len(minV) != 8 || len(maxV) != 8 {
		minV, maxV = s.Min, s.Max // deprecated fields, signed order for INT64
	}
	if len(minV) != 8 || len(maxV) != 8 {
		return 0, 0, false
	}
	b := []int64{int64(binary.LittleEndian.Uint64(minV)), int64(binary.LittleEndian.Uint64(maxV))}
	toMicros(b, timeUnit(lc.Node.Type())) // microseconds unless a timestamp says otherwise
	return b[0], b[1], true
}

// readRowGroup decodes the given columns of row group rg into out (one per
// column, reused). A column missing from the file reads as all null. It
// returns the row count.
func (fr *fileReader) readRowGroup(rg int, cols []column, out []colData) (n int, err error) {
	defer recoverTo(fr.key, &err)
	groups := fr.f.RowGroups()
	if rg >= len(groups) {
		return 0, fmt.Errorf("read %s: row group %d out of range", fr.key, rg)
	}
	group := groups[rg]
	n = int(group.NumRows())
	chunks := group.ColumnChunks()
	var buf []parquet.Value
	for i, c := range cols {
		d := &out[i]
		d.reset()
		lc, ok := fr.f.Schema().Lookup(c.name)
		if !ok {
			for range n {
				d.null = append(d.null, true)
			}
			d.hasNull = true
			fillZero(d, c.kind, n)
			continue
		}
		typ := lc.Node.Type()
		if err := checkKind(typ.Kind(), c.kind); err != nil {
			return 0, fmt.Errorf("read %s column %s: %w", fr.key, c.name, err)
		}
		if buf == nil {
			buf = make([]parquet.Value, 4096)
		}
		d.reserve(c.kind, n)
		if err := readChunk(chunks[lc.ColumnIndex], c.kind, lc.MaxDefinitionLevel, d, buf); err != nil {
			return 0, fmt.Errorf("read %s column %s: %w: %v", fr.key, c.name, errCorrupt, err)
		}
		if got := rowsIn(d, c.kind); got != n {
			return 0, fmt.Errorf("read %s column %s: %w: %d values for %d rows", fr.key, c.name, errCorrupt, got, n)
		}
		if c.kind == kindTimestamp && typ.Kind() == parquet.Int64 {
			toMicros(d.ints, timeUnit(typ))
		}
	}
	return n, nil
}

// The physical types a column of each kind may have in a file another
// engine wrote, as the Parquet format allows them for its Delta type:
// timestamps as INT64 in milliseconds, microseconds or nanoseconds (by the
// TIMESTAMP logical type or the legacy TIMESTAMP_MILLIS/MICROS converted
// type; none means microseconds, as Delta writes them) or as INT96 (Spark's
// default before TIMESTAMP_MICROS: nanoseconds of the day and a Julian
// day); long also from INT32 (int, short, byte, as type widening leaves
// older files); double also from FLOAT. Values are converted to tidemark's
// (µs, int64, float64) as they are read; nanoseconds are floored to the
// microsecond.
func checkKind(k parquet.Kind, want kind) error {
	ok := false
	switch want {
	case kindTimestamp:
		ok = k == parquet.Int64 || k == parquet.Int96
	case kindLong:
		ok = k == parquet.Int64 || k == parquet.Int32
	case kindDouble:
		ok = k == parquet.Double || k == parquet.Float
	case kindBool:
		ok = k == parquet.Boolean
	case kindString, kindBinary:
		ok = k == parquet.ByteArray
	}
	if !ok {
		return fmt.Errorf("physical type %s, want %s", k, want.deltaType())
	}
	return nil
}

// timeUnit returns the unit of an INT64 timestamp column.
func timeUnit(t parquet.Type) time.Duration {
	if lt := t.LogicalType(); lt != nil {
		if ts, ok := lt.Value.(*format.TimestampType); ok && ts.Unit.Value != nil {
			return ts.Unit.Value.Duration()
		}
	}
	if ct := t.ConvertedType(); ct != nil && *ct == deprecated.TimestampMillis {
		return time.Millisecond
	}
	return time.Microsecond
}

// toMicros converts INT64 timestamps of unit to microseconds in place.
func toMicros(v []int64, unit time.Duration) {
	switch unit {
	case time.Millisecond:
		for i := range v {
			v[i] *= 1000
		}
	case time.Nanosecond:
		for i := range v {
			v[i] = tidemark.FloorDiv(v[i], 1000)
		}
	}
}

// julianUnixEpoch is the Julian day number of 1970-01-01.
const julianUnixEpoch = 2440588

// int96Micros converts an INT96 timestamp (nanoseconds of the day in the
// first 8 bytes, little endian, then the Julian day) to µs since the epoch.
func int96Micros(v deprecated.Int96) int64 {
	nanos := int64(uint64(v[1])<<32 | uint64(v[0]))
	day := int64(int32(v[2]))
	return (day-julianUnixEpoch)*tidemark.MicrosPerDay + tidemark.FloorDiv(nanos, 1000)
}

func rowsIn(d *colData, k kind) int {
	switch k {
	case kindTimestamp, kindLong:
		return len(d.ints)
	case kindDouble:
		return len(d.floats)
	case kindBool:
		return len(d.bools)
	default:
		if d.codesOnly && d.dictOK {
			return len(d.codes)
		}
		return len(d.bytes)
	}
}

func fillZero(d *colData, k kind, n int) {
	switch k {
	case kindTimestamp, kindLong:
		d.ints = append(d.ints, make([]int64, n)...)
	case kindDouble:
		d.floats = append(d.floats, make([]float64, n)...)
	case kindBool:
		d.bools = append(d.bools, make([]bool, n)...)
	default:
		d.bytes = append(d.bytes, make([][]byte, n)...)
	}
}

// chunkReader decodes one column chunk into a colData, page by page, with
// bulk copies of the typed page data (the per-value parquet.Value path is
// kept only for pages of unexpected shapes).
type chunkReader struct {
	k        kind
	maxDef   int
	d        *colData
	buf      []parquet.Value
	dict     parquet.Dictionary // the dictionary d.dict was last decoded from
	dictBase int32              // index in d.dict of that dictionary's first value
	anyNull  bool
	// Per-row sources of byte values until the views are cut: >= 0 is an
	// index into d.dict, -1 null, -2 the next pair of d.offs.
	src []int32
}

func readChunk(chunk parquet.ColumnChunk, k kind, maxDef int, d *colData, buf []parquet.Value) error {
	pages := chunk.Pages()
	defer pages.Close()
	cr := chunkReader{k: k, maxDef: maxDef, d: d, buf: buf, src: d.src[:0]}
	defer func() { d.src = cr.src[:0] }()
	d.dictOK = k == kindString || k == kindBinary
	for {
		page, err := pages.ReadPage()
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
		err = cr.page(page)
		parquet.Release(page)
		if err != nil {
			return err
		}
	}
	d.hasNull = cr.anyNull
	if k == kindString || k == kindBinary {
		cr.cutViews()
	}
	return nil
}

func (cr *chunkReader) page(page parquet.Page) error {
	if len(page.RepetitionLevels()) > 0 {
		return errors.New("repeated values in a flat column")
	}
	n := int(page.NumValues())
	defs := page.DefinitionLevels()
	if defs != nil && len(defs) != n {
		return fmt.Errorf("page has %d definition levels for %d values", len(defs), n)
	}
	nonNull := n
	if defs != nil {
		nonNull = 0
		for _, l := range defs {
			if int(l) == cr.maxDef {
				nonNull++
			}
		}
	}
	data := page.Data()
	dict := page.Dictionary()
	ok := false
	switch {
	case dict != nil:
		ok = cr.indexed(data, dict, defs, n, nonNull)
	case cr.k == kindTimestamp || cr.k == kindLong:
		if data.Kind() == encoding.Int64 {
			ok = expand(&cr.d.ints, data.Int64(), defs, cr.maxDef, n, nonNull, 0)
		}
	case cr.k == kindDouble:
		if data.Kind() == encoding.Double {
			ok = expand(&cr.d.floats, data.Double(), defs, cr.maxDef, n, nonNull, math.NaN())
		}
	case cr.k == kindString || cr.k == kindBinary:
		if data.Kind() == encoding.ByteArray {
			ok = cr.plainBytes(data, defs, n, nonNull)
		}
	}
	if !ok {
		return cr.values(page)
	}
	d := cr.d
	if defs == nil {
		d.null = append(d.null, make([]bool, n)...)
	} else {
		for _, l := range defs {
			null := int(l) != cr.maxDef
			cr.anyNull = cr.anyNull || null
			d.null = append(d.null, null)
		}
	}
	return nil
}

// expand appends the page's non-null values to dst with zero at the null
// rows; it reports false when the counts do not match (then nothing was
// appended).
func expand[T any](dst *[]T, vals []T, defs []byte, maxDef, n, nonNull int, zero T) bool {
	if len(vals) != nonNull {
		return false
	}
	if defs == nil {
		*dst = append(*dst, vals...)
		return true
	}
	j := 0
	for _, l := range defs {
		if int(l) == maxDef {
			*dst = append(*dst, vals[j])
			j++
		} else {
			*dst = append(*dst, zero)
		}
	}
	return true
}

// indexed reads a dictionary-encoded page: the codes, resolved through the
// dictionary decoded once per chunk.
func (cr *chunkReader) indexed(data encoding.Values, dict parquet.Dictionary, defs []byte, n, nonNull int) bool {
	if data.Kind() != encoding.Int32 {
		return false
	}
	codes := data.Int32()
	if len(codes) != nonNull {
		return false
	}
	size := int32(dict.Len())
	for _, c := range codes {
		if c < 0 || c >= size {
			return false
		}
	}
	d := cr.d
	dp := dict.Page()
	dv := dp.Data()
	switch cr.k {
	case kindTimestamp, kindLong:
		if dv.Kind() != encoding.Int64 || len(dv.Int64()) != int(size) {
			return false
		}
		vals := dv.Int64()
		return expandCodes(&d.ints, vals, codes, defs, cr.maxDef, 0)
	case kindDouble:
		if dv.Kind() != encoding.Double || len(dv.Double()) != int(size) {
			return false
		}
		return expandCodes(&d.floats, dv.Double(), codes, defs, cr.maxDef, math.NaN())
	case kindString, kindBinary:
		if dv.Kind() != encoding.ByteArray {
			return false
		}
		if cr.dict != dict {
			if cr.dict != nil {
				d.dictOK = false // a second dictionary: codes would be ambiguous
			}
			vals, offs := dv.ByteArray()
			if len(offs) != int(size)+1 || offs[0] > offs[size] || int(offs[size]) > len(vals) {
				return false
			}
			base := len(d.dict)
			d.dictArena = append(d.dictArena[:0:0], vals[offs[0]:offs[size]]...) // never grown again: views stay valid
			for i := range int(size) {
				lo, hi := offs[i]-offs[0], offs[i+1]-offs[0]
				if lo > hi || int(hi) > len(d.dictArena) {
					return false
				}
				d.dict = append(d.dict, d.dictArena[lo:hi:hi])
			}
			cr.dict = dict
			cr.dictBase = int32(base)
		}
		j := 0
		for i := range n {
			if defs != nil && int(defs[i]) != cr.maxDef {
				cr.src = append(cr.src, -1)
				continue
			}
			cr.src = append(cr.src, cr.dictBase+codes[j])
			j++
		}
		return true
	}
	return false
}

func expandCodes[T any](dst *[]T, dict []T, codes []int32, defs []byte, maxDef int, zero T) bool {
	j := 0
	if defs == nil {
		for _, c := range codes {
			*dst = append(*dst, dict[c])
		}
		return true
	}
	for _, l := range defs {
		if int(l) == maxDef {
			*dst = append(*dst, dict[codes[j]])
			j++
		} else {
			*dst = append(*dst, zero)
		}
	}
	return true
}

// plainBytes reads a page of byte values into the arena.
func (cr *chunkReader) plainBytes(data encoding.Values, defs []byte, n, nonNull int) bool {
	vals, offs := data.ByteArray()
	if len(offs) != nonNull+1 {
		return false
	}
	d := cr.d
	base := len(d.arena) - int(offs[0])
	for i := range nonNull {
		if offs[i] > offs[i+1] {
			return false
		}
	}
	if int(offs[nonNull]) > len(vals) {
		return false
	}
	d.arena = append(d.arena, vals[offs[0]:offs[nonNull]]...)
	d.dictOK = false
	j := 0
	for i := range n {
		if defs != nil && int(defs[i]) != cr.maxDef {
			cr.src = append(cr.src, -1)
			continue
		}
		d.offs = append(d.offs, base+int(offs[j]), base+int(offs[j+1]))
		cr.src = append(cr.src, -2)
		j++
	}
	return true
}

// values is the generic path: one parquet.Value at a time.
func (cr *chunkReader) values(page parquet.Page) error {
	d := cr.d
	if cr.k == kindString || cr.k == kindBinary {
		d.dictOK = false
	}
	vr := page.Values()
	for {
		m, err := vr.ReadValues(cr.buf)
		for _, v := range cr.buf[:m] {
			null := v.IsNull()
			cr.anyNull = cr.anyNull || null
			d.null = append(d.null, null)
			switch cr.k {
			case kindTimestamp, kindLong:
				switch {
				case null:
					d.ints = append(d.ints, 0)
				case v.Kind() == parquet.Int96:
					d.ints = append(d.ints, int96Micros(v.Int96()))
				case v.Kind() == parquet.Int32:
					d.ints = append(d.ints, int64(v.Int32()))
				default:
					d.ints = append(d.ints, v.Int64())
				}
			case kindDouble:
				switch {
				case null:
					d.floats = append(d.floats, math.NaN())
				case v.Kind() == parquet.Float:
					d.floats = append(d.floats, float64(v.Float()))
				default:
					d.floats = append(d.floats, v.Double())
				}
			case kindBool:
				d.bools = append(d.bools, !null && v.Boolean())
			default:
				if null {
					cr.src = append(cr.src, -1)
				} else {
					start := len(d.arena)
					d.arena = append(d.arena, v.ByteArray()...)
					d.offs = append(d.offs, start, len(d.arena))
					cr.src = append(cr.src, -2)
				}
			}
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		if m == 0 {
			return errors.New("page reader made no progress")
		}
	}
}

// cutViews makes the dictionary codes when every row came from the one
// dictionary, and the byte views, now that the arena no longer moves,
// unless codes are all the column's reader asks for (codesOnly).
func (cr *chunkReader) cutViews() {
	d := cr.d
	if d.dictOK && cr.dict != nil {
		d.codes = append(d.codes[:0], cr.src...) // -1 marks null
		if d.codesOnly {
			return
		}
	} else {
		d.dictOK = false
	}
	j := 0
	for _, src := range cr.src {
		switch {
		case src >= 0:
			d.bytes = append(d.bytes, d.dict[src])
		case src == -1:
			d.bytes = append(d.bytes, nil)
		default:
			lo, hi := d.offs[j], d.offs[j+1]
			d.bytes = append(d.bytes, d.arena[lo:hi:hi])
			j += 2
		}
	}
}
