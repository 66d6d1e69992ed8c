package ingest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"

	"tidemark"
)

var fixedNow = time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC)

func fixedClock() time.Time { return fixedNow }

func writeFile(t *testing.T, name, data string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(name, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

func appendFile(t *testing.T, name, data string) {
	t.Helper()
	f, err := os.OpenFile(name, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(data); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

func ev(t string) string { return `{"event_time":"2026-01-01T09:` + t + `Z"}` }

// readAll reads until the source is exhausted (Once) or returns nothing.
func readAll(t *testing.T, s Source, batch int) []tidemark.Record {
	t.Helper()
	var all []tidemark.Record
	for i := 0; i < 10000; i++ {
		got, err := s.Read(context.Background(), nil, batch)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) > batch {
			t.Fatalf("Read returned %d records, max %d", len(got), batch)
		}
		all = append(all, got...)
		if len(got) == 0 && (s.Exhausted() || !onceOf(s)) {
			return all
		}
	}
	t.Fatal("source never exhausted")
	return nil
}

func onceOf(s Source) bool { return s.(*DirSource).cfg.Once }

// summary renders records as "file@offset:payload[reason]" lines.
func summary(recs []tidemark.Record) string {
	var b strings.Builder
	for _, r := range recs {
		fmt.Fprintf(&b, "%s@%d:%s", r.File, r.Offset, r.Payload)
		if r.Reason != tidemark.ReasonNone {
			fmt.Fprintf(&b, "[%s]", r.Reason)
		}
		b.WriteByte('\n')
	}
	return b.String()
}

func openTest(t *testing.T, spec string, cfg SourceConfig, resume Position) Source {
	t.Helper()
	if cfg.Clock == nil {
		cfg.Clock = fixedClock
	}
	s, err := Open(context.Background(), spec, cfg, resume)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Error(err)
		}
	})
	return s
}

func TestDirOnce(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "b.ndjson"), ev("02:00")+"\n"+ev("03:00")+"\r\n")
	writeFile(t, filepath.Join(dir, "a.ndjson"), ev("01:00")+"\nnot json\n\n"+ev("01:30"))
	writeFile(t, filepath.Join(dir, "a", "z.ndjson"), ev("04:00")+"\n")
	writeFile(t, filepath.Join(dir, ".hidden"), "x\n")
	writeFile(t, filepath.Join(dir, ".tmp", "x.ndjson"), "x\n")
	// Event-time aligned: each file waits its turn at the event time it
	// starts at (peeked, not taken), and the one that lags goes on until
	// it passes another (ties in path order): here, the one-file order.
	want := "a.ndjson@0:" + ev("01:00") + "\n" +
		"a.ndjson@38:not json[malformed]\n" +
		"a.ndjson@47:[blank]\n" +
		"a.ndjson@48:" + ev("01:30") + "\n" +
		"b.ndjson@0:" + ev("02:00") + "\n" +
		"b.ndjson@38:" + ev("03:00") + "\r\n" +
		"a/z.ndjson@0:" + ev("04:00") + "\n"
	for _, batch := range []int{1, 2, 1000} {
		s := openTest(t, dir, SourceConfig{Once: true}, Position{})
		got := readAll(t, s, batch)
		if summary(got) != want {
			t.Errorf("batch %d: got\n%s\nwant\n%s", batch, summary(got), want)
		}
		if !s.Exhausted() {
			t.Errorf("batch %d: got Exhausted false, want true", batch)
		}
		for _, r := range got {
			if r.Source != dir || r.Arrival != fixedNow.UnixMicro() {
				t.Errorf("got source %q arrival %d, want %q %d", r.Source, r.Arrival, dir, fixedNow.UnixMicro())
			}
		}
		p := s.Position()
		var offs []string
		for _, f := range p.Files {
			offs = append(offs, fmt.Sprintf("%s=%d", f.Path, f.Offset))
		}
		if g, w := strings.Join(offs, " "), "a.ndjson=85 a/z.ndjson=38 b.ndjson=77"; g != w {
			t.Errorf("got position %s, want %s", g, w)
		}
	}
}

func TestDirGlobAndFile(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "x.ndjson"), ev("01:00")+"\n")
	writeFile(t, filepath.Join(dir, "x.txt"), ev("02:00")+"\n")
	writeFile(t, filepath.Join(dir, "sub", "y.ndjson"), ev("03:00")+"\n")
	tests := []struct{ spec, files string }{
		{filepath.Join(dir, "*.ndjson"), "x.ndjson sub/y.ndjson"}, // event-time aligned
		{filepath.Join(dir, "sub", "*.ndjson"), "y.ndjson"},
		{filepath.Join(dir, "x.txt"), "x.txt"},
		{dir, "x.ndjson x.txt sub/y.ndjson"},
	}
	for _, tt := range tests {
		s := openTest(t, tt.spec, SourceConfig{Once: true}, Position{})
		var files []string
		for _, r := range readAll(t, s, 10) {
			files = append(files, r.File)
		}
		if got := strings.Join(files, " "); got != tt.files {
			t.Errorf("%s: got files %s, want %s", tt.spec, got, tt.files)
		}
	}
}

func TestDirPayloadsSurviveReads(t *testing.T) {
	dir := t.TempDir()
	var b strings.Builder
	for i := 0; i < 5000; i++ {
		fmt.Fprintf(&b, `{"event_time":%d,"pad":"%s"}`+"\n", 1767258000+i, strings.Repeat("x", i%97))
	}
	writeFile(t, filepath.Join(dir, "big.ndjson"), b.String())
	s := openTest(t, dir, SourceConfig{Once: true}, Position{})
	got := readAll(t, s, 7)
	if len(got) != 5000 {
		t.Fatalf("got %d records, want 5000", len(got))
	}
	lines := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
	off := 0
	for i, r := range got {
		if string(r.Payload) != lines[i] || r.Offset != int64(off) || !r.Valid() {
			t.Fatalf("record %d: got %q@%d (%s), want %q@%d", i, r.Payload, r.Offset, r.Reason, lines[i], off)
		}
		off += len(lines[i]) + 1
	}
}

func TestDirLineTooLong(t *testing.T) {
	dir := t.TempDir()
	long := `{"event_time":0,"x":"` + strings.Repeat("y", 300_000) + `"}`
	writeFile(t, filepath.Join(dir, "f.ndjson"), ev("01:00")+"\n"+long+"\n"+ev("02:00")+"\n"+long)
	s := openTest(t, dir, SourceConfig{Once: true, DecoderConfig: DecoderConfig{MaxLineBytes: 1000}}, Position{})
	got := readAll(t, s, 100)
	if len(got) != 4 {
		t.Fatalf("got %d records, want 4:\n%s", len(got), summary(got))
	}
	for _, i := range []int{1, 3} {
		r := got[i]
		wantErr := fmt.Sprintf("line is %d bytes, over the limit of 1000", len(long))
		if r.Reason != tidemark.ReasonLineTooLong || string(r.Payload) != long[:1000] || r.Err != wantErr {
			t.Errorf("record %d: got %s %q (%d payload bytes), want line_too_long %q", i, r.Reason, r.Err, len(r.Payload), wantErr)
		}
	}
	if got[2].Offset != int64(len(ev("01:00"))+1+len(long)+1) || !got[2].Valid() {
		t.Errorf("got record 2 at %d (%s), want a valid record after the long line", got[2].Offset, got[2].Reason)
	}
}

func TestDirCompressed(t *testing.T) {
	dir := t.TempDir()
	data := ev("01:00") + "\n" + ev("02:00") // no final newline: still a record
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write([]byte(data))
	zw.Close()
	writeFile(t, filepath.Join(dir, "a.ndjson.gz"), gz.String())
	// b differs from a: a file with a's content would be a copy of a (file
	// identity is by content) and add nothing.
	enc, _ := zstd.NewWriter(nil)
	writeFile(t, filepath.Join(dir, "b.ndjson.zst"), string(enc.EncodeAll([]byte(ev("01:30")+"\n"+ev("02:30")), nil)))
	for _, once := range []bool{true, false} {
		s := openTest(t, dir, SourceConfig{Once: once, PollOnly: true}, Position{})
		got := readAll(t, s, 1)
		// Event-time aligned: a file goes on while its frontier (01:00 after
		// its first line) is behind the next one's peeked time (b: 01:30).
		want := "a.ndjson.gz@0:" + ev("01:00") + "\na.ndjson.gz@38:" + ev("02:00") + "\n" +
			"b.ndjson.zst@0:" + ev("01:30") + "\nb.ndjson.zst@38:" + ev("02:30") + "\n"
		if summary(got) != want {
			t.Errorf("once=%v: got\n%s\nwant\n%s", once, summary(got), want)
		}
		// Resuming mid-file skips what was read.
		p := s.Position()
		p.Files[0].Offset, p.Files[0].Done = 38, false
		r := openTest(t, dir, SourceConfig{Once: once, PollOnly: true}, p)
		if got := summary(readAll(t, r, 10)); got != "a.ndjson.gz@38:"+ev("02:00")+"\n" {
			t.Errorf("once=%v: resumed: got\n%s", once, got)
		}
	}
}

func TestDirCSV(t *testing.T) {
	dir := t.TempDir()
	data := "event_time,page,v\r\n2026-01-01T09:00:00Z,\"/a\nb\",1\r\n2026-01-01T09:01:00Z,/c,2\r\nbad\r\n2026-01-01T09:02:00Z,/d,"
	writeFile(t, filepath.Join(dir, "f.csv"), data)
	cfg := SourceConfig{Once: true, DecoderConfig: DecoderConfig{Format: "csv", Keys: []string{"page"}, ValueField: "v"}}
	s := openTest(t, dir, cfg, Position{})
	got, err := s.Read(context.Background(), nil, 2)
	if err != nil {
		t.Fatal(err)
	}
	want := "f.csv@19:2026-01-01T09:00:00Z,\"/a\nb\",1\r\nf.csv@50:2026-01-01T09:01:00Z,/c,2\r\n"
	if summary(got) != want {
		t.Fatalf("got\n%s\nwant\n%s", summary(got), want)
	}
	if k := got[0].Key.String(); k != "/a\nb" || got[0].Value != 1 {
		t.Errorf("got key %q value %v, want %q 1", k, got[0].Value, "/a\nb")
	}
	// Resume from a JSON round trip of the position: the header comes back with it.
	js, err := json.Marshal(s.Position())
	if err != nil {
		t.Fatal(err)
	}
	var p Position
	if err := json.Unmarshal(js, &p); err != nil {
		t.Fatal(err)
	}
	r := openTest(t, dir, cfg, p)
	rest := readAll(t, r, 10)
	want = "f.csv@77:bad\r[malformed]\nf.csv@82:2026-01-01T09:02:00Z,/d,\n"
	if summary(rest) != want {
		t.Errorf("resumed: got\n%s\nwant\n%s", summary(rest), want)
	}
	if len(rest) == 2 && (rest[1].HasValue || rest[1].Key.String() != "/d") {
		t.Errorf("got value %v,%v key %q, want none and /d", rest[1].Value, rest[1].HasValue, rest[1].Key.String())
	}
}

func TestDirResumeNoDuplicates(t *testing.T) {
	dir := t.TempDir()
	for i, name := range []string{"a.ndjson", "b.ndjson", "c/d.ndjson"} {
		var b strings.Builder
		for j := 0; j < 50; j++ {
			fmt.Fprintf(&b, `{"event_time":%d}`+"\n", 1767258000+i*100+j)
		}
		writeFile(t, filepath.Join(dir, name), b.String())
	}
	full := summary(readAll(t, openTest(t, dir, SourceConfig{Once: true}, Position{}), 1000))
	var got strings.Builder
	var pos Position
	for step := 0; step < 100; step++ {
		s := openTest(t, dir, SourceConfig{Once: true}, pos)
		recs, err := s.Read(context.Background(), nil, 13)
		if err != nil {
			t.Fatal(err)
		}
		got.WriteString(summary(recs))
		pos = s.Position()
		if s.Exhausted() {
			break
		}
	}
	if got.String() != full {
		t.Errorf("reading in restarts of 13: got\n%s\nwant\n%s", got.String(), full)
	}
}
