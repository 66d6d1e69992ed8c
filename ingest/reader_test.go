package ingest

import (
	"bytes"
	"fmt"
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

// readerRecords drains a finished stream and renders its records.
func readerRecords(t testing.TB, src io.Reader, format string, max int) string {
	return drainRecords(t, newLineReader(src, 0, true, format, max))
}

// drainRecords renders every record of a finished stream. For a stable
// reader it renders them only at the end, so a record overwritten by a
// later read shows.
func drainRecords(t testing.TB, r *lineReader) string {
	var recs [][]byte
	var offs, lens []int64
	var b strings.Builder
	for i := 0; ; i++ {
		p, off, n, ok, err := r.next()
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			if !r.done {
				continue // a reader that returned (0, nil)
			}
			for j := range recs {
				fmt.Fprintf(&b, "%d+%d:%q\n", offs[j], lens[j], recs[j])
			}
			return b.String()
		}
		if r.stable {
			recs, offs, lens = append(recs, p), append(offs, off), append(lens, n)
		} else {
			fmt.Fprintf(&b, "%d+%d:%q\n", off, n, p)
		}
		if i > 1<<20 {
			t.Fatal("no end")
		}
	}
}

// wantLines renders what an NDJSON stream must split into.
func wantLines(data []byte, max int) string {
	var b strings.Builder
	off := 0
	for len(data) > 0 {
		line := data
		next := len(data)
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			line, next = data[:i], i+1
		}
		p := line
		if len(p) > max {
			p = p[:max]
		}
		fmt.Fprintf(&b, "%d+%d:%q\n", off, len(line), p)
		off += next
		data = data[next:]
	}
	return b.String()
}

func TestLineReader(t *testing.T) {
	tests := []struct {
		data string
		max  int
	}{
		{"", 10},
		{"a\nbb\n\nccc", 10},
		{"abc\nabcd\nabcde\n", 4},
		{strings.Repeat("x", 200_000) + "\nshort\n" + strings.Repeat("y", 70_000), 1000},
		{strings.Repeat("z", 1<<17) + "\n", 1 << 17},
	}
	for _, tt := range tests {
		want := wantLines([]byte(tt.data), tt.max)
		for name, src := range map[string]io.Reader{
			"whole":   strings.NewReader(tt.data),
			"onebyte": iotest.OneByteReader(strings.NewReader(tt.data)),
			"half":    iotest.HalfReader(strings.NewReader(tt.data)),
		} {
			if got := readerRecords(t, src, FormatNDJSON, tt.max); got != want {
				t.Errorf("%s, %d bytes, max %d: got\n%.300s\nwant\n%.300s", name, len(tt.data), tt.max, got, want)
			}
		}
	}
}

func TestLineReaderCSVLong(t *testing.T) {
	data := "h\n\"" + strings.Repeat("a\n", 50) + "\"\nshort\n"
	got := readerRecords(t, iotest.OneByteReader(strings.NewReader(data)), FormatCSV, 20)
	want := fmt.Sprintf("0+1:\"h\"\n2+102:%q\n105+5:\"short\"\n", "\""+strings.Repeat("a\n", 9)+"a")
	if got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
}

func FuzzLineReader(f *testing.F) {
	f.Add([]byte("a\nbb\n\nccc"), uint8(2), false)
	f.Add([]byte("\n\n\nxxxxxxxx\n"), uint8(3), true)
	f.Fuzz(func(t *testing.T, data []byte, max uint8, oneByte bool) {
		m := int(max%64) + 1
		var src io.Reader = bytes.NewReader(data)
		if oneByte {
			src = iotest.OneByteReader(src)
		}
		if got, want := readerRecords(t, src, FormatNDJSON, m), wantLines(data, m); got != want {
			t.Fatalf("max %d: got\n%s\nwant\n%s", m, got, want)
		}
	})
}

func FuzzLineReaderStable(f *testing.F) {
	f.Add([]byte("a\nbb\n\nccc"), uint8(2), uint8(3))
	f.Add([]byte("\n\n\nxxxxxxxx\nyy\n"), uint8(3), uint8(1))
	f.Fuzz(func(t *testing.T, data []byte, max, size uint8) {
		m := int(max%64) + 1
		r := newLineReader(iotest.HalfReader(bytes.NewReader(data)), 0, true, FormatNDJSON, m)
		r.stable, r.size = true, int(size%32)+1
		if got, want := drainRecords(t, r), wantLines(data, m); got != want {
			t.Fatalf("max %d size %d: got\n%s\nwant\n%s", m, r.size, got, want)
		}
	})
}

// TestLineReaderStable checks that a stable reader's records keep their
// bytes after later reads, across buffer replacements, and that appending
// to one cannot overwrite the next.
func TestLineReaderStable(t *testing.T) {
	var data bytes.Buffer
	for i := range 500 {
		fmt.Fprintf(&data, "{\"i\":%d,\"pad\":%q}\n", i, strings.Repeat("x", i%37))
	}
	for _, size := range []int{1, 7, 64, 1 << 10} {
		r := newLineReader(iotest.HalfReader(bytes.NewReader(data.Bytes())), 0, true, FormatNDJSON, 1<<20)
		r.stable, r.size = true, size
		var got [][]byte
		for {
			p, _, _, ok, err := r.next()
			if err != nil {
				t.Fatal(err)
			}
			if !ok {
				if r.done {
					break
				}
				continue
			}
			if len(got) > 0 {
				prev := got[len(got)-1]
				_ = append(prev, '!') // must not reach p
			}
			got = append(got, p)
		}
		want := bytes.Split(bytes.TrimSuffix(data.Bytes(), []byte("\n")), []byte("\n"))
		if len(got) != len(want) {
			t.Fatalf("size %d: got %d records, want %d", size, len(got), len(want))
		}
		for i := range want {
			if !bytes.Equal(got[i], want[i]) {
				t.Fatalf("size %d: record %d got %q, want %q", size, i, got[i], want[i])
			}
		}
	}
}
