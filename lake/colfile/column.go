package colfile

import (
	"bytes"

	"github.com/parquet-go/parquet-go"
)

// Type is a column's type: its Parquet physical type, and the logical
// type a reader (Spark, DuckDB) maps it with.
type Type uint8

// The column types.
const (
	Timestamp Type = iota // INT64, TIMESTAMP(MICROS, isAdjustedToUTC=true)
	String                // BYTE_ARRAY, STRING (UTF-8)
	Int64                 // INT64
	Double                // DOUBLE
	Boolean               // BOOLEAN
	ByteArray             // BYTE_ARRAY, raw bytes
)

// words reports whether the type's values are int64s or float64s, which
// the encoder handles alike as the integers of their 8 PLAIN bytes.
func (t Type) words() bool { return t == Timestamp || t == Int64 || t == Double }

// isBytes reports a byte-array type.
func (t Type) isBytes() bool { return t == String || t == ByteArray }

// parquetType is the type as parquet-go's writer describes it in a file's
// schema: the schema elements (logical and converted types) and column
// orders are taken from it, so a file reads as one parquet-go wrote.
func (t Type) parquetType() parquet.Type {
	switch t {
	case Timestamp:
		return parquet.Timestamp(parquet.Microsecond).Type()
	case String:
		return parquet.String().Type()
	case Int64:
		return parquet.Int64Type
	case Double:
		return parquet.DoubleType
	case Boolean:
		return parquet.BooleanType
	}
	return parquet.ByteArrayType
}

// Codec is the compression of a column's pages. The zero Codec is Zstd.
type Codec uint8

// The codecs, each at its fastest setting (see codec.go).
const (
	// Zstd is zstd's fastest level; REQUIRED int64 pages of values that
	// rarely repeat their predecessor are framed by appendZstdWords.
	Zstd Codec = iota
	// Snappy is written with s2's fast snappy-compatible encoder.
	Snappy
	// LZ4Raw is LZ4_RAW (readers: Spark >= 3.4, parquet-java >= 1.13).
	LZ4Raw
)

// Column describes one column of a file: a flat leaf, REQUIRED or
// OPTIONAL.
type Column struct {
	Name     string
	Type     Type
	Optional bool
	// Dictionary lets the column's chunks be written RLE_DICTIONARY when
	// that pays (see the package doc); PLAIN otherwise. Boolean and
	// ByteArray columns are always PLAIN.
	Dictionary bool
	Codec      Codec
}

// dictable reports whether the column's chunks start with a dictionary.
func (c Column) dictable() bool {
	return c.Dictionary && (c.Type.words() || c.Type == String)
}

// Values are a run of one column's values, typed: only the slice of the
// column's Type is read (Ints for Timestamp and Int64, Floats for Double,
// Bools for Boolean, Bytes for String and ByteArray), and its length is
// the number of values. Null, read for an OPTIONAL column only, is as long
// and true where the value is null; a null's slot in the typed slice holds
// any placeholder.
type Values struct {
	Ints   []int64
	Floats []float64
	Bools  []bool
	Bytes  [][]byte
	Null   []bool
}

// len is the number of values of type t.
func (v *Values) len(t Type) int {
	switch t {
	case Timestamp, Int64:
		return len(v.Ints)
	case Double:
		return len(v.Floats)
	case Boolean:
		return len(v.Bools)
	}
	return len(v.Bytes)
}

// Bounds are the min and max of the non-null values of a column: Ints for
// Timestamp and Int64, Floats for Double (NaN never a bound), Bools for
// Boolean, owned Bytes for String and ByteArray (compared as unsigned
// bytes). Has is false when there are no values.
type Bounds struct {
	Has                bool
	MinInt, MaxInt     int64
	MinFloat, MaxFloat float64
	MinBool, MaxBool   bool
	MinBytes, MaxBytes []byte
}

// AddInt widens the bounds to v.
func (b *Bounds) AddInt(v int64) {
	widen(b.Has, &b.MinInt, &b.MaxInt, v)
	b.Has = true
}

// AddFloat widens the bounds to v, which must not be NaN.
func (b *Bounds) AddFloat(v float64) {
	widen(b.Has, &b.MinFloat, &b.MaxFloat, v)
	b.Has = true
}

// AddBool widens the bounds to v.
func (b *Bounds) AddBool(v bool) {
	if !b.Has {
		b.MinBool, b.MaxBool = v, v
	}
	b.MinBool = b.MinBool && v
	b.MaxBool = b.MaxBool || v
	b.Has = true
}

// widen moves lo and hi out to v; with has false they start at v.
func widen[T int64 | float64](has bool, lo, hi *T, v T) {
	if !has || v < *lo {
		*lo = v
	}
	if !has || v > *hi {
		*hi = v
	}
}

// AddBytes widens the bounds to v, copying it when it becomes one.
func (b *Bounds) AddBytes(v []byte) {
	if !b.Has || bytes.Compare(v, b.MinBytes) < 0 {
		b.MinBytes = append(b.MinBytes[:0], v...)
	}
	if !b.Has || bytes.Compare(v, b.MaxBytes) > 0 {
		b.MaxBytes = append(b.MaxBytes[:0], v...)
	}
	b.Has = true
}

// Merge widens the bounds to those of other values of a column of type t.
func (b *Bounds) Merge(t Type, o *Bounds) {
	if !o.Has {
		return
	}
	switch t {
	case Timestamp, Int64:
		b.AddInt(o.MinInt)
		b.AddInt(o.MaxInt)
	case Double:
		b.AddFloat(o.MinFloat)
		b.AddFloat(o.MaxFloat)
	case Boolean:
		b.AddBool(o.MinBool)
		b.AddBool(o.MaxBool)
	default:
		b.AddBytes(o.MinBytes)
		b.AddBytes(o.MaxBytes)
	}
}

// clear empties the bounds, keeping the bytes' buffers.
func (b *Bounds) clear() {
	b.Has = false
	b.MinBytes, b.MaxBytes = b.MinBytes[:0], b.MaxBytes[:0]
}

// Stats are what a finished chunk knows of its values, for statistics the
// caller keeps besides the file's (Delta's add-action stats).
type Stats struct {
	Bounds       // of the non-null values, NaN left out
	Nulls  int64 // null values
	NaN    bool  // a NaN was seen: the chunk has no bounds in the file
	MaxLen int   // the length of the longest byte value
}
