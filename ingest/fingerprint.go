package ingest

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"os"
	"strconv"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
)

// A local file is identified by its content, not by its name or inode
// (docs/file-identity.md): the SHA-256 of its first fingerprintBytes bytes
// after decompression, as Vector's checksum strategy does. A file shorter
// than that is fingerprinted over what it holds, and its fingerprint grows
// with it. A file whose first bytes match a file already known continues
// that file: a rename, a compressed or copied rotation, a restored copy.
// Device and inode are only a hint, checked first because they are cheap.

// fingerprintBytes is how much of a file's start (decompressed) identifies it.
const fingerprintBytes = 1024

// idBytes is the length of a hash, in bytes (hex doubles it): 128 bits, so
// that two different files sharing one by chance is out of reach.
const idBytes = 16

// hashOf is the identity hash of b: SHA-256, truncated, in hex.
func hashOf(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:idBytes])
}

// objectID is an S3 object's identity: its key and ETag (objects are
// immutable; a new version is a new object).
func objectID(key, etag string) string { return hashOf([]byte(key + "\x00" + etag)) }

// print is the start of a file, decompressed: what identifies it.
type print struct {
	b []byte // the first fingerprintBytes bytes, or all there are
	// partial: a compressed file ended early (it is still being written),
	// so b may be shorter than the file will be.
	partial bool
}

// readPrint reads the start of a file (decompressing .gz and .zst).
func readPrint(name string, compressed bool) (print, error) {
	f, err := os.Open(name)
	if err != nil {
		return print{}, err
	}
	defer f.Close()
	var r io.Reader = f
	if compressed {
		dec, err := decompressor(name, f)
		if err != nil {
			if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
				return print{partial: true}, nil // not even a whole header yet
			}
			return print{}, err
		}
		defer dec.Close()
		r = dec
	}
	buf := make([]byte, fingerprintBytes)
	n := 0
	for n < len(buf) && err == nil {
		var k int
		k, err = r.Read(buf[n:])
		n += k
	}
	p := print{b: buf[:n]}
	switch {
	case err == nil || errors.Is(err, io.EOF):
		return p, nil // full, or the whole file
	case compressed:
		p.partial = true // ends early (still being written) or is corrupt: retried when it changes
		return p, nil
	}
	return p, err
}

// headOf returns the hash of a file's first line (CSV: its header and first
// record), the quick test of whether a file shorter than a known one's
// fingerprint may be a copy of it. ok is false while the file holds no such
// complete line (final: the bytes are all the file will have, so the last
// line needs no newline).
func headOf(b []byte, csv, final bool) (string, bool) {
	lines := 1
	if csv {
		lines = 2
	}
	end := 0
	for range lines {
		i := bytes.IndexByte(b[end:], '\n')
		if i < 0 {
			switch {
			case len(b) >= fingerprintBytes, final && len(b) > 0:
				return hashOf(b), true // a first line longer than the fingerprint, or a file of one line
			}
			return "", false
		}
		end += i + 1
	}
	return hashOf(b[:end]), true
}

// matches reports whether bytes b, the start of a file, are the start of
// the file p describes: they cover its fingerprint and hash to it.
func (p *FilePosition) matches(b []byte) bool {
	return p.HashLen > 0 && len(b) >= p.HashLen && hashOf(b[:p.HashLen]) == p.Hash
}

// legacyHash is the identity hash of checkpoints written before content
// identity (FilePosition.ID empty): FNV-64a of the first n raw bytes. It is
// only read, to carry such a checkpoint over.
func legacyHash(name string, n int) (string, bool) {
	f, err := os.Open(name)
	if err != nil {
		return "", false
	}
	defer f.Close()
	buf := make([]byte, n)
	got, _ := io.ReadFull(f, buf)
	if got != n {
		return "", false
	}
	h := fnv.New64a()
	h.Write(buf)
	return strconv.FormatUint(h.Sum64(), 16), true
}

// decompressor returns a reader that decompresses a .gz or .zst file.
func decompressor(name string, r io.Reader) (io.ReadCloser, error) {
	if isGzip(name) {
		z, err := gzip.NewReader(r)
		if err != nil {
			return nil, fmt.Errorf("gunzip %s: %w", name, err)
		}
		return z, nil
	}
	z, err := zstd.NewReader(r, zstd.WithDecoderConcurrency(1))
	if err != nil {
		return nil, fmt.Errorf("unzstd %s: %w", name, err)
	}
	return zstdCloser{z}, nil
}

func isGzip(name string) bool {
	n := len(name)
	return n >= 3 && (name[n-3:] == ".gz" || name[n-3:] == ".GZ")
}

type zstdCloser struct{ *zstd.Decoder }

func (z zstdCloser) Close() error { z.Decoder.Close(); return nil }

func statFile(name string) (os.FileInfo, error) { return os.Stat(name) }
