package colfile

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"

	"github.com/parquet-go/parquet-go/encoding/thrift"
	"github.com/parquet-go/parquet-go/format"
)

// Writer lays out a Parquet file of flat columns encoded by Chunks: the
// magic, the row groups' column chunks in order, then every chunk's
// column index and offset index, and the footer. Its schema elements and
// column orders are the ones parquet-go writes for the same columns.
type Writer struct {
	w      *bufio.Writer
	off    int64
	cols   []Column
	md     format.FileMetaData
	colIdx [][]format.ColumnIndex // by row group, column
	hasIdx [][]bool
	offIdx [][]format.OffsetIndex
}

var parquetMagic = []byte("PAR1")

// SchemaName is the name of a file's root schema element, as Spark
// writes it.
const SchemaName = "spark_schema"

// NewWriter starts a file of the columns, in the order given, on out;
// createdBy is the footer's created_by. Close writes the footer; out is
// neither synced nor closed.
func NewWriter(out io.Writer, cols []Column, createdBy string) (*Writer, error) {
	// Chunks are written whole, past the buffer; it gathers the indexes
	// and the footer.
	f := &Writer{w: bufio.NewWriterSize(out, 64<<10), cols: cols}
	f.md.Version = 2
	f.md.CreatedBy = createdBy
	f.md.Schema = append(f.md.Schema, format.SchemaElement{Name: SchemaName, NumChildren: thriftSome(int32(len(cols)))})
	seen := make(map[string]bool, len(cols))
	for _, c := range cols {
		if c.Name == "" || seen[c.Name] {
			return nil, fmt.Errorf("colfile: column name %q empty or repeated", c.Name)
		}
		seen[c.Name] = true
		typ := c.Type.parquetType()
		el := format.SchemaElement{Name: c.Name, RepetitionType: thriftSome(format.Required)}
		if c.Optional {
			el.RepetitionType = thriftSome(format.Optional)
		}
		if lt := typ.LogicalType(); lt != nil {
			el.LogicalType = *lt
		}
		if l := int32(typ.Length()); l > 0 {
			el.TypeLength = thriftSome(l)
		}
		if pt := typ.PhysicalType(); pt != nil {
			el.Type = thriftSome(*pt)
		}
		if ct := typ.ConvertedType(); ct != nil {
			el.ConvertedType = thriftSome(*ct)
		}
		f.md.Schema = append(f.md.Schema, el)
		f.md.ColumnOrders = append(f.md.ColumnOrders, *typ.ColumnOrder())
	}
	if err := f.write(parquetMagic); err != nil {
		return nil, err
	}
	return f, nil
}

func (f *Writer) write(b []byte) error {
	n, err := f.w.Write(b)
	f.off += int64(n)
	if err != nil {
		return fmt.Errorf("write parquet file: %w", err)
	}
	return nil
}

// WriteRowGroup writes a row group of rows rows: its finished chunks, one
// per column in the Writer's order. The chunks may be Reset once it
// returns.
func (f *Writer) WriteRowGroup(chunks []*Chunk, rows int64) error {
	if len(chunks) != len(f.cols) {
		return fmt.Errorf("colfile: row group of %d chunks for %d columns", len(chunks), len(f.cols))
	}
	rg := format.RowGroup{NumRows: rows, FileOffset: f.off, Ordinal: int16(len(f.md.RowGroups))}
	cis := make([]format.ColumnIndex, len(chunks))
	has := make([]bool, len(chunks))
	ois := make([]format.OffsetIndex, len(chunks))
	for leaf, c := range chunks {
		if c.col.Name != f.cols[leaf].Name || c.col.Type != f.cols[leaf].Type {
			return fmt.Errorf("colfile: chunk of column %s where %s belongs", c.col.Name, f.cols[leaf].Name)
		}
		if c.numValues != rows {
			return fmt.Errorf("colfile: column %s chunk has %d values for %d rows", c.col.Name, c.numValues, rows)
		}
		start := f.off
		if err := f.write(c.dictPage); err != nil {
			return err
		}
		if err := f.write(c.pages.Bytes()); err != nil {
			return err
		}
		cc := c.meta(start)
		rg.Columns = append(rg.Columns, cc)
		rg.TotalByteSize += cc.MetaData.TotalUncompressedSize
		rg.TotalCompressedSize += cc.MetaData.TotalCompressedSize
		cis[leaf], has[leaf], ois[leaf] = c.pageIndexes(start)
	}
	f.md.RowGroups = append(f.md.RowGroups, rg)
	f.md.NumRows += rows
	f.colIdx = append(f.colIdx, cis)
	f.hasIdx = append(f.hasIdx, has)
	f.offIdx = append(f.offIdx, ois)
	return nil
}

// Close writes the page indexes (every column index, then every offset
// index, as parquet-go and parquet-java lay them out) and the footer, and
// flushes.
func (f *Writer) Close() error {
	proto := new(thrift.CompactProtocol)
	for _, offsets := range []bool{false, true} {
		for g := range f.md.RowGroups {
			for leaf := range f.offIdx[g] {
				cc := &f.md.RowGroups[g].Columns[leaf]
				var v any = &f.offIdx[g][leaf]
				if !offsets {
					if !f.hasIdx[g][leaf] {
						continue
					}
					v = &f.colIdx[g][leaf]
				}
				b, err := thrift.Marshal(proto, v)
				if err != nil {
					return fmt.Errorf("encode page index: %w", err)
				}
				if offsets {
					cc.OffsetIndexOffset, cc.OffsetIndexLength = f.off, int32(len(b))
				} else {
					cc.ColumnIndexOffset, cc.ColumnIndexLength = f.off, int32(len(b))
				}
				if err := f.write(b); err != nil {
					return err
				}
			}
		}
	}
	b, err := thrift.Marshal(proto, &f.md)
	if err != nil {
		return fmt.Errorf("encode parquet footer: %w", err)
	}
	b = binary.LittleEndian.AppendUint32(b, uint32(len(b)))
	b = append(b, parquetMagic...)
	if err := f.write(b); err != nil {
		return err
	}
	if err := f.w.Flush(); err != nil {
		return fmt.Errorf("write parquet file: %w", err)
	}
	return nil
}

// size is the chunk's bytes in the file.
func (e *Chunk) size() int64 { return int64(len(e.dictPage) + e.pages.Len()) }

// meta returns the chunk's metadata, for a chunk written at offset start.
func (e *Chunk) meta(start int64) format.ColumnChunk {
	md := format.ColumnMetaData{
		Type:                  *e.col.Type.parquetType().PhysicalType(),
		PathInSchema:          []string{e.col.Name},
		Codec:                 e.codec.CompressionCodec(),
		NumValues:             e.numValues,
		TotalUncompressedSize: e.uncomp,
		TotalCompressedSize:   e.size(),
		DataPageOffset:        start + int64(len(e.dictPage)),
		Statistics:            e.statistics(),
	}
	md.Encoding = append(md.Encoding, format.Plain)
	if e.opt {
		md.Encoding = append(md.Encoding, format.RLE)
	}
	if e.nDict > 0 {
		md.Encoding = append(md.Encoding, format.RLEDictionary)
		md.DictionaryPageOffset = start
		md.EncodingStats = append(md.EncodingStats, format.PageEncodingStats{PageType: format.DictionaryPage, Encoding: format.Plain, Count: 1},
			format.PageEncodingStats{PageType: format.DataPage, Encoding: format.RLEDictionary, Count: e.nDict})
	}
	if e.nPlain > 0 {
		md.EncodingStats = append(md.EncodingStats, format.PageEncodingStats{PageType: format.DataPage, Encoding: format.Plain, Count: e.nPlain})
	}
	return format.ColumnChunk{FileOffset: start, MetaData: md}
}

// pageIndexes returns the chunk's column index (ok false when it has none)
// and its offset index, for a chunk written at offset start.
func (e *Chunk) pageIndexes(start int64) (ci format.ColumnIndex, ok bool, oi format.OffsetIndex) {
	base := start + int64(len(e.dictPage))
	locs := make([]format.PageLocation, len(e.locs))
	for i, l := range e.locs {
		l.Offset += base
		locs[i] = l
	}
	oi.PageLocations = locs
	if e.noIndex {
		return ci, false, oi
	}
	ci = format.ColumnIndex{
		NullPages:     append([]bool(nil), e.index.NullPages...),
		MinValues:     append([][]byte(nil), e.index.MinValues...),
		MaxValues:     append([][]byte(nil), e.index.MaxValues...),
		BoundaryOrder: format.Unordered,
		NullCounts:    append([]int64(nil), e.index.NullCounts...),
	}
	return ci, true, oi
}
