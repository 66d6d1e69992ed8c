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
	f, err := openLocal(source, file)
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

// openLocal opens the file a local source read as file (a path relative
// to the source's root, "/"-separated).
func openLocal(source, file string) (*os.File, error) {
	root, _, err := splitSpec(source)
	if err != nil {
		return nil, err
	}
	if real, err := filepath.EvalSymlinks(root); err == nil {
		root = real
	}
	return os.Open(filepath.Join(root, filepath.FromSlash(file)))
}

// ReadCSVHeader reads again the header line of the local CSV file a
// record was read from (file, relative to the source's root), for a
// quarantined CSV record: quarantine keeps the record, not its file's
// header, and a CSV record cannot be decoded without it. It first checks
// that the file still holds the record's bytes (prefix: the record, or the
// first bytes of a record quarantined as too long) at offset, so a file
// rewritten or replaced since is not taken for the one read. Compressed
// files are read through (offsets count decompressed bytes). It fails for
// an S3 object, a file that is gone or changed, and a header longer than
// max bytes.
func ReadCSVHeader(source, file string, offset int64, prefix []byte, max int) ([]byte, error) {
	if strings.HasPrefix(source, "s3://") {
		return nil, errors.New("an S3 object is not read again")
	}
	if offset <= 0 {
		return nil, errors.New("the record at offset 0 is the header itself")
	}
	read := func(f func(io.Reader) error) error {
		fh, err := openLocal(source, file)
		if err != nil {
			return err
		}
		defer fh.Close()
		var r io.Reader = fh
		if isCompressed(file) {
			dec, err := decompressor(file, fh)
			if err != nil {
				return err
			}
			defer dec.Close()
			r = dec
		}
		return f(r)
	}
	err := read(func(r io.Reader) error {
		if _, err := io.CopyN(io.Discard, r, offset); err != nil {
			return fmt.Errorf("the file ends before offset %d: %w", offset, err)
		}
		got := make([]byte, len(prefix))
		if _, err := io.ReadFull(r, got); err != nil || !bytes.Equal(got, prefix) {
			return errors.New("the file holds other bytes at that offset now")
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	var header []byte
	err = read(func(r io.Reader) error {
		lr := newLineReader(r, 0, true, FormatCSV, max)
		payload, _, length, ok, err := lr.next()
		switch {
		case err != nil:
			return err
		case !ok:
			return errors.New("the file has no header line")
		case length > int64(max):
			return fmt.Errorf("the header line is longer than %d bytes", max)
		case int64(lr.off) > offset:
			return errors.New("the record is inside the header line")
		}
		header = bytes.Clone(payload)
		return nil
	})
	return header, err
}
