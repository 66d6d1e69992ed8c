package lake

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/encoding/thrift"
	"github.com/parquet-go/parquet-go/format"
)

// pqFile lays out a Parquet file of flat columns encoded by colChunk:
// the magic, the row groups' column chunks in order, then every chunk's
// column index and offset index, and the footer. Its schema elements and
// column orders are the ones parquet-go writes for the same schema.
type pqFile struct {
	w         *bufio.Writer
	off       int64
	createdBy string
	paths     []string // by leaf: the column's name
	md        format.FileMetaData
	colIdx    [][]format.ColumnIndex // by row group, leaf
	hasIdx    [][]bool
	offIdx    [][]format.OffsetIndex
}

var parquetMagic = []byte("PAR1")

func newPQFile(out io.Writer, sch *parquet.Schema, createdBy string) (*pqFile, error) {
	// Chunks are written whole, past the buffer; it gathers the indexes
	// and the footer.
	f := &pqFile{w: bufio.NewWriterSize(out, 64<<10), createdBy: createdBy}
	fields := sch.Fields()
	f.md.Version = 2
	f.md.CreatedBy = createdBy
	f.md.Schema = append(f.md.Schema, format.SchemaElement{Name: sch.Name(), NumChildren: thriftSome(int32(len(fields)))})
	for _, n := range fields {
		if !n.Leaf() || n.Repeated() {
			return nil, fmt.Errorf("lake: column %s is not a flat leaf", n.Name())
		}
		typ := n.Type()
		el := format.SchemaElement{Name: n.Name(), FieldID: int32(n.ID()), RepetitionType: thriftSome(format.Required)}
		if n.Optional() {
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
		f.paths = append(f.paths, n.Name())
	}
	if err := f.write(parquetMagic); err != nil {
		return nil, err
	}
	return f, nil
}

func (f *pqFile) write(b []byte) error {
	n, err := f.w.Write(b)
	f.off += int64(n)
	if err != nil {
		return fmt.Errorf("write parquet file: %w", err)
	}
	return nil
}

// writeRowGroup writes a row group's chunks, by leaf, and records them.
func (f *pqFile) writeRowGroup(chunks []*colChunk, rows int64) error {
	rg := format.RowGroup{NumRows: rows, FileOffset: f.off, Ordinal: int16(len(f.md.RowGroups))}
	cis := make([]format.ColumnIndex, len(chunks))
	has := make([]bool, len(chunks))
	ois := make([]format.OffsetIndex, len(chunks))
	for leaf, c := range chunks {
		start := f.off
		if err := f.write(c.dictPage); err != nil {
			return err
		}
		if err := f.write(c.pages.Bytes()); err != nil {
			return err
		}
		cc := c.meta(start, f.paths[leaf])
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

// close writes the page indexes (every column index, then every offset
// index, as parquet-go and parquet-java lay them out) and the footer, and
// flushes.
func (f *pqFile) close() error {
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
