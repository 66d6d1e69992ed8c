package ingest

import (
	"fmt"
	"hash/fnv"
	"io"
	"os"
	"strconv"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
)

// fingerprintBytes is how much of a file's start identifies it alongside
// its inode.
const fingerprintBytes = 1024

// fingerprint hashes the first n bytes of a file (n = 0: as many as exist,
// up to fingerprintBytes). It returns the hash and how many bytes it
// covers; a short or unreadable file gives a shorter (possibly empty) hash.
func fingerprint(name string, n int) (string, int) {
	if n <= 0 {
		n = fingerprintBytes
	}
	f, err := os.Open(name)
	if err != nil {
		return hashOf(nil), 0
	}
	defer f.Close()
	buf := make([]byte, n)
	got, _ := io.ReadFull(f, buf)
	return hashOf(buf[:got]), got
}

func hashOf(b []byte) string {
	h := fnv.New64a()
	h.Write(b)
	return strconv.FormatUint(h.Sum64(), 16)
}

// sameContent reports whether the file at name starts with the bytes p's
// fingerprint covers, and if so extends st's fingerprint to cover more of
// the file where it has grown.
func (st *fileState) sameContent(name string, p FilePosition) bool {
	h, n := fingerprint(name, p.HashLen)
	if p.HashLen > 0 && (n != p.HashLen || h != p.Hash) {
		return false
	}
	if p.HashLen < fingerprintBytes {
		st.pos.Hash, st.pos.HashLen = fingerprint(name, 0)
	} else {
		st.pos.Hash, st.pos.HashLen = p.Hash, p.HashLen
	}
	return true
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
