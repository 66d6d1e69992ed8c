// Package storetest checks that a store.Store behaves as the lake needs,
// the way testing/fstest checks an fs.FS: Run is the suite every backend
// must pass, and StartVersity starts a real S3-compatible server to run it
// against.
package storetest

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"strings"
	"sync"
	"testing"

	"tidemark/lake/store"
)

// LargeSize is the size of the large-object case: above 16 MiB, the
// default S3 part size, so it goes as a multipart upload.
const LargeSize = 17<<20 + 7

// Run runs the conformance suite. newStore must return an empty store,
// a fresh one per call; Run calls it once per subtest.
func Run(t *testing.T, newStore func(t *testing.T) store.Store) {
	tests := []struct {
		name string
		fn   func(t *testing.T, s store.Store)
	}{
		{"PutOpen", testPutOpen},
		{"Overwrite", testOverwrite},
		{"OverwriteAtomic", testOverwriteAtomic},
		{"PutShortReader", testPutShortReader},
		{"PutIfAbsent", testPutIfAbsent},
		{"PutIfAbsentRace", testPutIfAbsentRace},
		{"OpenMissing", testOpenMissing},
		{"InvalidKeys", testInvalidKeys},
		{"List", testList},
		{"Delete", testDelete},
		{"ReaderAt", testReaderAt},
		{"Large", testLarge},
		{"OddKeys", testOddKeys},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.fn(t, newStore(t))
		})
	}
}

func put(t *testing.T, s store.Store, key, data string) {
	t.Helper()
	if err := s.Put(t.Context(), key, strings.NewReader(data), int64(len(data))); err != nil {
		t.Fatalf("put %s: %v", key, err)
	}
}

func read(t *testing.T, s store.Store, key string) string {
	t.Helper()
	b, err := store.ReadAll(t.Context(), s, key)
	if err != nil {
		t.Fatalf("read %s: %v", key, err)
	}
	return string(b)
}

func testPutOpen(t *testing.T, s store.Store) {
	for _, data := range []string{"", "x", "hello, lake\n", strings.Repeat("abc", 10000)} {
		key := fmt.Sprintf("t/obj-%d.json", len(data))
		put(t, s, key, data)
		r, err := s.Open(t.Context(), key)
		if err != nil {
			t.Fatalf("open %s: %v", key, err)
		}
		if got, want := r.Size(), int64(len(data)); got != want {
			t.Errorf("size of %s: got %d, want %d", key, got, want)
		}
		if err := r.Close(); err != nil {
			t.Errorf("close %s: %v", key, err)
		}
		if got := read(t, s, key); got != data {
			t.Errorf("read %s: got %d bytes, want %d", key, len(got), len(data))
		}
	}
	// Unknown size.
	if err := s.Put(t.Context(), "t/unknown", onlyReader{strings.NewReader("no size")}, -1); err != nil {
		t.Fatalf("put unknown size: %v", err)
	}
	if got, want := read(t, s, "t/unknown"), "no size"; got != want {
		t.Errorf("unknown size: got %q, want %q", got, want)
	}
}

// onlyReader hides every method but Read (no Seek, no ReaderAt, no WriteTo).
type onlyReader struct{ r io.Reader }

func (o onlyReader) Read(p []byte) (int, error) { return o.r.Read(p) }

func testOverwrite(t *testing.T, s store.Store) {
	put(t, s, "k", "first version, longer")
	put(t, s, "k", "second")
	if got, want := read(t, s, "k"), "second"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	infos, err := s.List(t.Context(), "")
	if err != nil {
		t.Fatal(err)
	}
	if len(infos) != 1 || infos[0].Key != "k" || infos[0].Size != 6 {
		t.Errorf("list after overwrite: got %+v, want one object k of size 6", infos)
	}
}

// testOverwriteAtomic overwrites a key with objects of different sizes and
// bytes while others read: every read sees one whole version (or, on a
// backend that pins versions, fails with store.ErrChanged).
func testOverwriteAtomic(t *testing.T, s store.Store) {
	versions := []string{strings.Repeat("a", 1000), strings.Repeat("b", 70000), strings.Repeat("c", 10)}
	put(t, s, "atomic", versions[0])
	const writes, readers = 20, 3
	var wg sync.WaitGroup
	done := make(chan struct{})
	errs := make(chan error, readers+1)
	wg.Go(func() {
		defer close(done)
		for i := range writes {
			v := versions[i%len(versions)]
			if err := s.Put(t.Context(), "atomic", strings.NewReader(v), int64(len(v))); err != nil {
				errs <- err
				return
			}
		}
	})
	for range readers {
		wg.Go(func() {
			for {
				select {
				case <-done:
					return
				default:
				}
				b, err := store.ReadAll(t.Context(), s, "atomic")
				if errors.Is(err, store.ErrChanged) {
					continue
				}
				if err != nil {
					errs <- err
					return
				}
				if !oneVersion(string(b), versions) {
					errs <- fmt.Errorf("read a mix: %d bytes starting %q", len(b), b[:min(len(b), 10)])
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func oneVersion(b string, versions []string) bool {
	for _, v := range versions {
		if b == v {
			return true
		}
	}
	return false
}

// testPutShortReader: a reader shorter than the declared size fails the
// Put and leaves no object behind.
func testPutShortReader(t *testing.T, s store.Store) {
	err := s.Put(t.Context(), "short", strings.NewReader("abc"), 10)
	if err == nil {
		t.Fatal("put with 3 of 10 bytes: got nil error, want one")
	}
	if _, err := s.Open(t.Context(), "short"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("open after failed put: got %v, want fs.ErrNotExist", err)
	}
}

func testPutIfAbsent(t *testing.T, s store.Store) {
	ctx := t.Context()
	key := "_delta_log/00000000000000000000.json"
	if err := s.PutIfAbsent(ctx, key, []byte("first")); err != nil {
		t.Fatalf("first put-if-absent: %v", err)
	}
	err := s.PutIfAbsent(ctx, key, []byte("second"))
	if !errors.Is(err, store.ErrExists) || !errors.Is(err, fs.ErrExist) {
		t.Fatalf("second put-if-absent: got %v, want ErrExists matching fs.ErrExist", err)
	}
	if got, want := read(t, s, key), "first"; got != want {
		t.Errorf("after lost put-if-absent: got %q, want %q", got, want)
	}
	// After a plain Put, the key is taken too.
	put(t, s, "plain", "x")
	if err := s.PutIfAbsent(ctx, "plain", []byte("y")); !errors.Is(err, store.ErrExists) {
		t.Errorf("put-if-absent over put: got %v, want ErrExists", err)
	}
	// After a Delete, it is free again.
	if err := s.Delete(ctx, "plain"); err != nil {
		t.Fatal(err)
	}
	if err := s.PutIfAbsent(ctx, "plain", []byte("z")); err != nil {
		t.Errorf("put-if-absent after delete: %v", err)
	}
	if err := s.PutIfAbsent(ctx, "empty", nil); err != nil {
		t.Errorf("put-if-absent empty: %v", err)
	}
}

// testPutIfAbsentRace: of N goroutines racing for each key, exactly one
// wins, the others see ErrExists, and the object is the winner's.
func testPutIfAbsentRace(t *testing.T, s store.Store) {
	const racers, rounds = 8, 5
	for round := range rounds {
		key := fmt.Sprintf("_delta_log/%020d.json", round)
		var wg sync.WaitGroup
		results := make([]error, racers)
		for i := range racers {
			wg.Go(func() {
				results[i] = s.PutIfAbsent(t.Context(), key, []byte(fmt.Sprintf("writer %d", i)))
			})
		}
		wg.Wait()
		winner := -1
		for i, err := range results {
			switch {
			case err == nil && winner >= 0:
				t.Errorf("round %d: writers %d and %d both won", round, winner, i)
			case err == nil:
				winner = i
			case !errors.Is(err, store.ErrExists):
				t.Errorf("round %d writer %d: got %v, want nil or ErrExists", round, i, err)
			}
		}
		if winner < 0 {
			t.Fatalf("round %d: no writer won", round)
		}
		if got, want := read(t, s, key), fmt.Sprintf("writer %d", winner); got != want {
			t.Errorf("round %d: object holds %q, want the winner's %q", round, got, want)
		}
	}
}

func testOpenMissing(t *testing.T, s store.Store) {
	put(t, s, "dir/file", "x")
	for _, key := range []string{"nope", "dir/nope", "nope/deeper/x", "dir", "dir/file/below"} {
		_, err := s.Open(t.Context(), key)
		if !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("open %q: got %v, want fs.ErrNotExist", key, err)
		}
		var pe *fs.PathError
		if !errors.As(err, &pe) {
			t.Errorf("open %q: got %T, want *fs.PathError", key, err)
		}
	}
}

func testInvalidKeys(t *testing.T, s store.Store) {
	ctx := t.Context()
	for _, key := range []string{"", ".", "/abs", "a/../b", "../up", "a//b", "a/", "./a", "a/./b", ".tidemark-tmp/x", "back\\slash", "nul\x00"} {
		if err := s.Put(ctx, key, strings.NewReader("x"), 1); !errors.Is(err, fs.ErrInvalid) {
			t.Errorf("put %q: got %v, want fs.ErrInvalid", key, err)
		}
		if err := s.PutIfAbsent(ctx, key, []byte("x")); !errors.Is(err, fs.ErrInvalid) {
			t.Errorf("put-if-absent %q: got %v, want fs.ErrInvalid", key, err)
		}
		if _, err := s.Open(ctx, key); !errors.Is(err, fs.ErrInvalid) {
			t.Errorf("open %q: got %v, want fs.ErrInvalid", key, err)
		}
		if err := s.Delete(ctx, key); !errors.Is(err, fs.ErrInvalid) {
			t.Errorf("delete %q: got %v, want fs.ErrInvalid", key, err)
		}
	}
	for _, prefix := range []string{"../", "a/../", "/abs"} {
		if _, err := s.List(ctx, prefix); !errors.Is(err, fs.ErrInvalid) {
			t.Errorf("list %q: got %v, want fs.ErrInvalid", prefix, err)
		}
	}
}

func testList(t *testing.T, s store.Store) {
	keys := []string{
		"raw_events/event_date=2026-01-01/event_hour=03/part-b.zstd.parquet",
		"raw_events/event_date=2026-01-01/event_hour=03/part-a.zstd.parquet",
		"raw_events/event_date=2026-01-02/event_hour=00/part-c.zstd.parquet",
		"raw_events/_delta_log/00000000000000000000.json",
		"raw_events_old/x",
		"quarantine/ingest_date=2026-01-01/part-d.zstd.parquet",
		"top",
	}
	for i, k := range keys {
		put(t, s, k, strings.Repeat("x", i))
	}
	tests := []struct {
		prefix string
		want   []string
	}{
		{"", []string{
			"quarantine/ingest_date=2026-01-01/part-d.zstd.parquet",
			"raw_events/_delta_log/00000000000000000000.json",
			"raw_events/event_date=2026-01-01/event_hour=03/part-a.zstd.parquet",
			"raw_events/event_date=2026-01-01/event_hour=03/part-b.zstd.parquet",
			"raw_events/event_date=2026-01-02/event_hour=00/part-c.zstd.parquet",
			"raw_events_old/x",
			"top",
		}},
		{"raw_events/", []string{
			"raw_events/_delta_log/00000000000000000000.json",
			"raw_events/event_date=2026-01-01/event_hour=03/part-a.zstd.parquet",
			"raw_events/event_date=2026-01-01/event_hour=03/part-b.zstd.parquet",
			"raw_events/event_date=2026-01-02/event_hour=00/part-c.zstd.parquet",
		}},
		{"raw_events", []string{ // not a directory boundary
			"raw_events/_delta_log/00000000000000000000.json",
			"raw_events/event_date=2026-01-01/event_hour=03/part-a.zstd.parquet",
			"raw_events/event_date=2026-01-01/event_hour=03/part-b.zstd.parquet",
			"raw_events/event_date=2026-01-02/event_hour=00/part-c.zstd.parquet",
			"raw_events_old/x",
		}},
		{"raw_events/event_date=2026-01-0", []string{
			"raw_events/event_date=2026-01-01/event_hour=03/part-a.zstd.parquet",
			"raw_events/event_date=2026-01-01/event_hour=03/part-b.zstd.parquet",
			"raw_events/event_date=2026-01-02/event_hour=00/part-c.zstd.parquet",
		}},
		{"raw_events/event_date=2026-01-01/event_hour=03/part-a", []string{
			"raw_events/event_date=2026-01-01/event_hour=03/part-a.zstd.parquet",
		}},
		{"t", []string{"top"}},
		{"top", []string{"top"}},
		{"top/", nil},
		{"missing/", nil},
		{"missing/deeper/x", nil},
	}
	for _, tt := range tests {
		infos, err := s.List(t.Context(), tt.prefix)
		if err != nil {
			t.Errorf("list %q: %v", tt.prefix, err)
			continue
		}
		var got []string
		for _, in := range infos {
			got = append(got, in.Key)
		}
		if fmt.Sprint(got) != fmt.Sprint(tt.want) {
			t.Errorf("list %q:\ngot  %q\nwant %q", tt.prefix, got, tt.want)
		}
	}
	infos, err := s.List(t.Context(), "top")
	if err != nil || len(infos) != 1 {
		t.Fatalf("list top: got %v, %v", infos, err)
	}
	if got, want := infos[0].Size, int64(len(keys)-1); got != want {
		t.Errorf("size of top: got %d, want %d", got, want)
	}
	if infos[0].ModTime.IsZero() {
		t.Error("mod time of top: got zero")
	}
}

func testDelete(t *testing.T, s store.Store) {
	ctx := t.Context()
	put(t, s, "d/a", "1")
	put(t, s, "d/b", "2")
	if err := s.Delete(ctx, "d/a"); err != nil {
		t.Fatalf("delete: %v", err)
	}
	if _, err := s.Open(ctx, "d/a"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("open deleted: got %v, want fs.ErrNotExist", err)
	}
	for _, key := range []string{"d/a", "never", "no/such/dir/x", "d/b/below"} {
		if err := s.Delete(ctx, key); err != nil {
			t.Errorf("delete missing %q: got %v, want nil", key, err)
		}
	}
	infos, err := s.List(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(infos) != 1 || infos[0].Key != "d/b" {
		t.Errorf("list after delete: got %+v, want only d/b", infos)
	}
}

func testReaderAt(t *testing.T, s store.Store) {
	data := make([]byte, 1000)
	for i := range data {
		data[i] = byte(i * 7)
	}
	put(t, s, "ra", string(data))
	r, err := s.Open(t.Context(), "ra")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	tests := []struct {
		off     int64
		n       int
		wantN   int
		wantEOF bool
	}{
		{0, 10, 10, false},
		{500, 100, 100, false},
		{990, 10, 10, false}, // ends exactly at EOF: io.EOF allowed, not required
		{995, 10, 5, true},
		{1000, 1, 0, true},
		{5000, 1, 0, true},
		{0, 1000, 1000, false},
		{0, 2000, 1000, true},
		{3, 0, 0, false},
	}
	for _, tt := range tests {
		p := make([]byte, tt.n)
		n, err := r.ReadAt(p, tt.off)
		if n != tt.wantN {
			t.Errorf("ReadAt(%d bytes, off %d): got n=%d, want %d", tt.n, tt.off, n, tt.wantN)
		}
		switch {
		case tt.wantEOF && err != io.EOF:
			t.Errorf("ReadAt(%d bytes, off %d): got err %v, want io.EOF", tt.n, tt.off, err)
		case !tt.wantEOF && err != nil && !(err == io.EOF && tt.off+int64(tt.n) == 1000):
			t.Errorf("ReadAt(%d bytes, off %d): got err %v, want nil", tt.n, tt.off, err)
		}
		if n > 0 && !bytes.Equal(p[:n], data[tt.off:tt.off+int64(n)]) {
			t.Errorf("ReadAt(%d bytes, off %d): wrong bytes", tt.n, tt.off)
		}
	}
	// Concurrent ReadAt on one Reader.
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			p := make([]byte, 100)
			off := int64(i * 100)
			if n, err := r.ReadAt(p, off); n != 100 || (err != nil && err != io.EOF) || !bytes.Equal(p, data[off:off+100]) {
				t.Errorf("concurrent ReadAt off %d: n=%d err=%v", off, n, err)
			}
		})
	}
	wg.Wait()
}

func testLarge(t *testing.T, s store.Store) {
	data := make([]byte, LargeSize)
	for i := range data {
		data[i] = byte(i ^ i>>11)
	}
	want := sha256.Sum256(data)
	cases := []struct {
		name string
		r    io.Reader
		size int64
	}{
		{"known", bytes.NewReader(data), int64(len(data))},
		{"unknown", onlyReader{bytes.NewReader(data)}, -1},
		{"known-stream", onlyReader{bytes.NewReader(data)}, int64(len(data))},
	}
	for _, c := range cases {
		key := "large/" + c.name
		if err := s.Put(t.Context(), key, c.r, c.size); err != nil {
			t.Fatalf("put %s: %v", key, err)
		}
		b, err := store.ReadAll(t.Context(), s, key)
		if err != nil {
			t.Fatalf("read %s: %v", key, err)
		}
		if got := sha256.Sum256(b); got != want || len(b) != len(data) {
			t.Errorf("%s: got %d bytes sha %x, want %d bytes sha %x", key, len(b), got[:4], len(data), want[:4])
		}
	}
}

// testOddKeys: Hive partition values hold '=', spaces, '%', '+' and
// non-ASCII; each key must round-trip through put, list, open and delete.
func testOddKeys(t *testing.T, s store.Store) {
	ctx := t.Context()
	keys := []string{
		"event_date=2026-01-01/event_hour=03/part-x.zstd.parquet",
		"page=a b/part 1.zstd.parquet",
		"pct/100%.txt",
		"pct/%41%2F%zz.txt",
		"plus/a+b=c&d?e#f.txt",
		"unicode/città=Zürich/日本.txt",
		"quote/it's \"q\".txt",
	}
	for i, k := range keys {
		put(t, s, k, fmt.Sprint(i))
	}
	infos, err := s.List(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for _, in := range infos {
		got[in.Key] = true
	}
	for i, k := range keys {
		if !got[k] {
			t.Errorf("list: missing %q (got %d keys)", k, len(infos))
		}
		if data := read(t, s, k); data != fmt.Sprint(i) {
			t.Errorf("read %q: got %q, want %q", k, data, fmt.Sprint(i))
		}
		if err := s.PutIfAbsent(ctx, k, []byte("again")); !errors.Is(err, store.ErrExists) {
			t.Errorf("put-if-absent %q: got %v, want ErrExists", k, err)
		}
		if err := s.Delete(ctx, k); err != nil {
			t.Errorf("delete %q: %v", k, err)
		}
		if _, err := s.Open(ctx, k); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("open deleted %q: got %v, want fs.ErrNotExist", k, err)
		}
	}
}
