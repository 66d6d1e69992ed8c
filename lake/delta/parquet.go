package delta

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// CheckParquetTrailer checks a Parquet file's trailer (footer length and
// PAR1 magic) before parquet-go trusts it: parquet-go allocates whatever
// footer length the last 8 bytes declare, so the 8 bytes "PAR1PAR1" (a
// length of 0x31524150) made it allocate 789 MiB, and a crafted file could
// ask for 4 GiB (found by lake's FuzzReadFile). Every reader of Parquet
// files calls it first: checkpoints here, data files in lake.
func CheckParquetTrailer(r io.ReaderAt, size int64) error {
	if size < 12 {
		return fmt.Errorf("%d bytes is too small for a Parquet file", size)
	}
	var tail [8]byte
	if _, err := r.ReadAt(tail[:], size-8); err != nil {
		return err
	}
	if string(tail[4:]) != "PAR1" {
		return errors.New("no PAR1 magic at the end")
	}
	if n := int64(binary.LittleEndian.Uint32(tail[:4])); n > size-12 {
		return fmt.Errorf("footer length %d does not fit in %d bytes", n, size)
	}
	return nil
}
