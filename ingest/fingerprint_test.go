package ingest

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/klauspost/compress/gzip"
)

// FuzzFingerprint: the print of a .gz file is the print of the bytes it
// holds; a .gz cut short gives a prefix of it, marked partial (a file still
// being written), or an error, never a wrong start; the head of a start is
// the head of any longer start.
func FuzzFingerprint(f *testing.F) {
	f.Add([]byte("a\nb\n"), uint16(3), false)
	f.Add([]byte("event_time,page\n2026-01-01T00:00:00Z,/a\n"), uint16(20), true)
	f.Add(bytes.Repeat([]byte("x"), 3000), uint16(100), false)
	f.Add([]byte{}, uint16(0), false)
	f.Fuzz(func(t *testing.T, data []byte, cut uint16, csv bool) {
		dir := t.TempDir()
		plain := filepath.Join(dir, "f.log")
		if err := os.WriteFile(plain, data, 0o644); err != nil {
			t.Fatal(err)
		}
		var gz bytes.Buffer
		zw := gzip.NewWriter(&gz)
		zw.Write(data)
		zw.Close()
		zname := filepath.Join(dir, "f.log.gz")
		if err := os.WriteFile(zname, gz.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		p, err := readPrint(plain, false)
		if err != nil {
			t.Fatal(err)
		}
		want := data[:min(len(data), fingerprintBytes)]
		if !bytes.Equal(p.b, want) || p.partial {
			t.Fatalf("plain print: got %d bytes partial=%v, want %d", len(p.b), p.partial, len(want))
		}
		z, err := readPrint(zname, true)
		if err != nil || !bytes.Equal(z.b, p.b) || z.partial {
			t.Fatalf("gzip print: got %d bytes partial=%v err=%v, want the plain print (%d bytes)", len(z.b), z.partial, err, len(p.b))
		}
		k := int(cut) % (gz.Len() + 1)
		if err := os.WriteFile(zname, gz.Bytes()[:k], 0o644); err != nil {
			t.Fatal(err)
		}
		if c, err := readPrint(zname, true); err == nil && !bytes.HasPrefix(p.b, c.b) {
			t.Fatalf("gzip cut at %d: print %q is not a prefix of %q", k, c.b, p.b)
		} else if err == nil && k < gz.Len() && !c.partial && len(c.b) < len(p.b) {
			t.Fatalf("gzip cut at %d: a short print (%d of %d bytes) not marked partial", k, len(c.b), len(p.b))
		}
		// The head is a function of the start: a longer start has the same.
		if h, ok := headOf(p.b, csv, false); ok {
			for n := 0; n <= len(p.b); n++ {
				if h2, ok2 := headOf(p.b[:n], csv, false); ok2 && h2 != h {
					t.Fatalf("head of the first %d bytes differs from the head of %d", n, len(p.b))
				}
			}
			if h2, _ := headOf(data, csv, true); len(data) <= fingerprintBytes && h2 != h {
				t.Fatalf("head of the whole file (final) differs")
			}
		}
		// matches: a start matches the position fingerprinted from it.
		pos := FilePosition{Hash: hashOf(p.b), HashLen: len(p.b)}
		if len(p.b) > 0 && !pos.matches(data) {
			t.Fatal("the file does not match its own fingerprint")
		}
	})
}
