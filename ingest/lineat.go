package ingest

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// ReadLineAt reads again, whole, the line a local source's file holds at
// offset: for a line quarantined as too long, whose row kept only its
// first bytes (prefix). It reads at most max bytes of it and fails when
// the line is longer, when the file is gone, compressed (offsets count
// decompressed bytes) or an S3 object, or when the bytes at offset do not
// start with prefix (the file was rewritten since).
func ReadLineAt(source, file string, offset int64, prefix []byte, max int) ([]byte, error) {
	if strings.HasPrefix(source, "s3://") {
		return nil, errors.New("an S3 object is not read again")
	}
	if strings.HasSuffix(file, ".gz") || strings.HasSuffix(file, ".zst") {
		return nil, errors.New("a compressed file is not read again")
	}
	root, _, err := splitSpec(source)
	if err != nil {
		return nil, err
	}
	if real, err := filepath.EvalSymlinks(root); err == nil {
		root = real
	}
	f, err := os.Open(filepath.Join(root, filepath.FromSlash(file)))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	r := bufio.NewReader(io.NewSectionReader(f, offset, int64(max)+1))
	line, err := r.ReadSlice('\n')
	switch {
	case errors.Is(err, bufio.ErrBufferFull):
		var b []byte
		b = append(b, line...)
		for errors.Is(err, bufio.ErrBufferFull) {
			line, err = r.ReadSlice('\n')
			b = append(b, line...)
		}
		line = b
	}
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	line = bytes.TrimSuffix(line, []byte("\n"))
	if len(line) > max {
		return nil, fmt.Errorf("the line is longer than %d bytes", max)
	}
	if !bytes.HasPrefix(line, prefix) {
		return nil, errors.New("the file holds other bytes at that offset now")
	}
	return bytes.Clone(line), nil
}
