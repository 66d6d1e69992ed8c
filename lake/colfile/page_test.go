package colfile

import (
	"bytes"
	"math/rand/v2"
	"os"
	"testing"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/encoding/thrift"
	"github.com/parquet-go/parquet-go/format"
)

// TestPagesDecodeEveryCodec decodes the data pages of a REQUIRED PLAIN
// int64 column with each codec's own decoder, byte-exact against the
// values: a check of the pages that does not go through parquet-go's page
// reader (whose LZ4_RAW decoding, before v0.32.1, read pages that
// compress less than 3x as garbage).
func TestPagesDecodeEveryCodec(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 1))
	w := make([]int64, 3000)
	rows := make([][]any, len(w))
	for i := range w {
		w[i] = int64(r.IntN(5000))*7919 - 5000*3000
		rows[i] = []any{w[i]}
	}
	for _, codec := range []Codec{Zstd, Snappy, LZ4Raw} {
		path := WriteRows(t, t.TempDir(), []Column{{Name: "a", Type: Int64, Codec: codec}}, rows, 1000, 1000)
		f, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		fi, err := f.Stat()
		if err != nil {
			t.Fatal(err)
		}
		pf, err := parquet.OpenFile(f, fi.Size())
		if err != nil {
			t.Fatal(err)
		}
		var got []byte
		for _, rg := range pf.Metadata().RowGroups {
			cc := rg.Columns[0]
			b := make([]byte, cc.OffsetIndexLength)
			if _, err := f.ReadAt(b, cc.OffsetIndexOffset); err != nil {
				t.Fatal(err)
			}
			var oi format.OffsetIndex
			if err := thrift.Unmarshal(new(thrift.CompactProtocol), b, &oi); err != nil {
				t.Fatal(err)
			}
			for _, loc := range oi.PageLocations {
				span := make([]byte, loc.CompressedPageSize)
				if _, err := f.ReadAt(span, loc.Offset); err != nil {
					t.Fatal(err)
				}
				var h format.PageHeader
				rd := bytes.NewReader(span)
				if err := thrift.NewDecoder(new(thrift.CompactProtocol).NewReader(rd)).Decode(&h); err != nil {
					t.Fatal(err)
				}
				plain, err := codec.impl().Decode(nil, span[len(span)-rd.Len():])
				if err != nil {
					t.Fatalf("codec %d: %v", codec, err)
				}
				got = append(got, plain...)
			}
		}
		if want := appendWords(nil, w); !bytes.Equal(got, want) {
			t.Errorf("codec %d: pages decode to %d bytes, not the %d of the values", codec, len(got), len(want))
		}
	}
}
