package ingest

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"
	"github.com/minio/minio-go/v7"

	"tidemark"
	"tidemark/lake/store"
	"tidemark/lake/store/storetest"
)

// s3Clock is an injected wall clock the tests move by hand.
type s3Clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *s3Clock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *s3Clock) set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = t
}

func (c *s3Clock) add(d time.Duration) { c.set(c.now().Add(d)) }

// s3Fix is a bucket on a fresh server, reached by the source through the
// AWS environment (the credential chain and $AWS_ENDPOINT_URL) as in
// production.
type s3Fix struct {
	srv    *storetest.Server
	c      *minio.Client
	bucket string
	clock  *s3Clock
}

func newS3Fix(t testing.TB) *s3Fix {
	t.Helper()
	srv := storetest.StartVersity(t)
	for k, v := range map[string]string{
		"AWS_ACCESS_KEY_ID": srv.AccessKey, "AWS_SECRET_ACCESS_KEY": srv.SecretKey, "AWS_SESSION_TOKEN": "",
		"AWS_ENDPOINT_URL": srv.Endpoint, "AWS_ENDPOINT_URL_S3": "", "AWS_REGION": srv.Region,
	} {
		t.Setenv(k, v)
	}
	// An hour ahead of the server: every object has settled unless a test
	// sets the clock back.
	return &s3Fix{srv: srv, c: srv.Client(t), bucket: srv.Bucket(t), clock: &s3Clock{t: time.Now().Add(time.Hour)}}
}

func (f *s3Fix) put(t *testing.T, key string, data []byte) minio.ObjectInfo {
	t.Helper()
	ctx := context.Background()
	if _, err := f.c.PutObject(ctx, f.bucket, key, bytes.NewReader(data), int64(len(data)), minio.PutObjectOptions{}); err != nil {
		t.Fatalf("put %s: %v", key, err)
	}
	info, err := f.c.StatObject(ctx, f.bucket, key, minio.StatObjectOptions{})
	if err != nil {
		t.Fatalf("stat %s: %v", key, err)
	}
	return info
}

func (f *s3Fix) spec(prefix string) string { return "s3://" + f.bucket + "/" + prefix }

func (f *s3Fix) open(t testing.TB, prefix string, cfg SourceConfig, opt s3Options, resume Position) *s3Source {
	t.Helper()
	cfg.Clock = f.clock.now
	s, err := openS3With(t.Context(), f.spec(prefix), cfg, opt, resume)
	if err != nil {
		t.Fatalf("open %s: %v", f.spec(prefix), err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// s3Drain reads batches of max until a Read returns nothing.
func s3Drain(t *testing.T, s *s3Source, max int) []tidemark.Record {
	t.Helper()
	var all []tidemark.Record
	for range 1 << 20 {
		got, err := s.Read(t.Context(), nil, max)
		if err != nil {
			t.Fatalf("read: %v", err)
		}
		if len(got) == 0 {
			return all
		}
		if len(got) > max {
			t.Fatalf("read returned %d records, want at most %d", len(got), max)
		}
		all = append(all, got...)
	}
	t.Fatal("read never ran dry")
	return nil
}

// s3Render lists records as "file@offset payload" lines.
func s3Render(recs []tidemark.Record) string {
	var b strings.Builder
	for _, r := range recs {
		fmt.Fprintf(&b, "%s@%d %s\n", r.File, r.Offset, r.Payload)
	}
	return b.String()
}

// s3Lines makes n NDJSON lines with distinct payloads and the records they
// should become in object file, with offsets.
func s3Lines(file, tag string, n int) (data []byte, want string) {
	var buf, w bytes.Buffer
	for i := range n {
		line := fmt.Sprintf(`{"event_time":"2026-01-01T10:%02d:%02dZ","tag":"%s","i":%d}`, i/60%60, i%60, tag, i)
		fmt.Fprintf(&w, "%s@%d %s\n", file, buf.Len(), line)
		buf.WriteString(line + "\n")
	}
	return buf.Bytes(), w.String()
}

// s3Pick concatenates the wanted lines of s3Lines objects in the order
// given: picks are "object index, line index" pairs.
func s3Pick(wants []string, picks ...[2]int) string {
	var b strings.Builder
	for _, p := range picks {
		b.WriteString(strings.SplitAfter(wants[p[0]], "\n")[p[1]])
	}
	return b.String()
}

func s3Gzip(t *testing.T, data []byte) []byte {
	var b bytes.Buffer
	z := gzip.NewWriter(&b)
	z.Write(data)
	if err := z.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func s3Zstd(t *testing.T, data []byte) []byte {
	z, err := zstd.NewWriter(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer z.Close()
	return z.EncodeAll(data, nil)
}

func s3Positions(p Position) string {
	var b strings.Builder
	for _, f := range p.Files {
		fmt.Fprintf(&b, "%s off=%d done=%v; ", f.Path, f.Offset, f.Done)
	}
	return b.String()
}

func TestS3KeyOrderEachOnce(t *testing.T) {
	f := newS3Fix(t)
	b, wantB := s3Lines("b.ndjson", "b", 3)
	a, wantA := s3Lines("a.ndjson", "a", 2)
	c, wantC := s3Lines("sub/c.ndjson", "c", 2)
	f.put(t, "in/b.ndjson", b)
	f.put(t, "in/sub/c.ndjson", c)
	f.put(t, "in/a.ndjson", a)
	f.put(t, "in/.hidden", []byte(`{"x":1}`+"\n"))
	f.put(t, "input-other/x.ndjson", a) // shares the prefix string, not the directory
	s := f.open(t, "in", SourceConfig{}, s3Options{}, Position{})

	// Event-time aligned: every object is peeked (all start at 10:00:00)
	// and waits its turn there; the one read goes on while its time ties
	// the next one's (ties in key order) and stops at the record that
	// passes it.
	want := s3Pick([]string{wantA, wantB, wantC}, [2]int{0, 0}, [2]int{0, 1}, [2]int{1, 0}, [2]int{1, 1}, [2]int{2, 0}, [2]int{2, 1}, [2]int{1, 2})
	if got := s3Render(s3Drain(t, s, 2)); got != want {
		t.Errorf("first pass: got\n%s\nwant\n%s", got, want)
	}
	for range 3 { // repeated polls find nothing new
		f.clock.add(DefaultRescan)
		if got := s3Drain(t, s, 100); len(got) != 0 {
			t.Errorf("poll read again: got %v, want nothing", s3Render(got))
		}
	}
	want = fmt.Sprintf("a.ndjson off=%d done=true; b.ndjson off=%d done=true; sub/c.ndjson off=%d done=true; ", len(a), len(b), len(c))
	if got := s3Positions(s.Position()); got != want {
		t.Errorf("position: got %s, want %s", got, want)
	}
	for _, fp := range s.Position().Files {
		if fp.ETag == "" {
			t.Errorf("position of %s has no ETag", fp.Path)
		}
	}
	if s.Name() != f.spec("in") {
		t.Errorf("name: got %q, want %q", s.Name(), f.spec("in"))
	}
}

func TestS3NewObjectsBetweenPolls(t *testing.T) {
	f := newS3Fix(t)
	m, wantM := s3Lines("m.ndjson", "m", 2)
	f.put(t, "m.ndjson", m)
	s := f.open(t, "", SourceConfig{}, s3Options{}, Position{})
	if got := s3Render(s3Drain(t, s, 10)); got != wantM {
		t.Fatalf("first: got\n%s\nwant\n%s", got, wantM)
	}

	// Nothing new: Wait returns at its timeout, with nothing to read.
	if err := s.Wait(t.Context(), time.Millisecond); err != nil {
		t.Fatalf("wait: %v", err)
	}
	if got := s3Drain(t, s, 10); len(got) != 0 {
		t.Fatalf("read before the next poll: got %s, want nothing", s3Render(got))
	}

	// Uploaded between polls, one sorting before what was read: the next
	// poll lists only the keys after m.ndjson and finds z, Wait returns at
	// once; the full listing finds a.
	a, wantA := s3Lines("a.ndjson", "a", 2)
	z, wantZ := s3Lines("z.ndjson", "z", 2)
	f.put(t, "z.ndjson", z)
	f.put(t, "a.ndjson", a)
	if got := s3Drain(t, s, 10); len(got) != 0 {
		t.Fatalf("read before the poll is due: got %s, want nothing", s3Render(got))
	}
	f.clock.add(DefaultRescan)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	if err := s.Wait(ctx, time.Hour); err != nil {
		t.Fatalf("wait: %v", err)
	}
	if got := s3Render(s3Drain(t, s, 10)); got != wantZ {
		t.Errorf("after poll: got\n%s\nwant\n%s", got, wantZ)
	}
	f.clock.add(s3FullListing * DefaultRescan)
	if got := s3Render(s3Drain(t, s, 10)); got != wantA {
		t.Errorf("after the full listing: got\n%s\nwant\n%s", got, wantA)
	}
}

// A poll lists only the keys after the last one tracked; a key that sorts
// earlier is found by the full listing, every s3FullListing Rescans.
func TestS3PollListsOnlyNew(t *testing.T) {
	f := newS3Fix(t)
	for i := range 20 {
		data, _ := s3Lines("", "k", 1)
		f.put(t, fmt.Sprintf("k%03d.ndjson", i), data)
	}
	s := f.open(t, "", SourceConfig{}, s3Options{}, Position{})
	if s.listed != 20 {
		t.Errorf("open listed %d keys, want all 20", s.listed)
	}
	if got := len(s3Drain(t, s, 100)); got != 20 {
		t.Fatalf("read %d records, want 20", got)
	}
	steps := []struct {
		put    string
		after  time.Duration
		listed int
		read   int
	}{
		{"", DefaultRescan, 0, 0},                  // idle: an empty listing
		{"k020.ndjson", DefaultRescan, 1, 1},       // new at the end
		{"a.ndjson", DefaultRescan, 0, 0},          // sorts earlier: not listed yet
		{"", s3FullListing * DefaultRescan, 22, 1}, // the full listing finds it
		{"k021.ndjson", DefaultRescan, 1, 1},       // and polls go on from the end
	}
	for i, st := range steps {
		if st.put != "" {
			data, _ := s3Lines("", "x", 1)
			f.put(t, st.put, data)
		}
		f.clock.add(st.after)
		got := len(s3Drain(t, s, 100))
		if s.listed != st.listed || got != st.read {
			t.Errorf("step %d (%q): listed %d keys and read %d records, want %d and %d", i, st.put, s.listed, got, st.listed, st.read)
		}
	}
}

// An S3 backlog holds at most maxOpen GET bodies at once, and reads the
// same records in the same order as without the cap.
func TestS3OpenBodiesCapped(t *testing.T) {
	f := newS3Fix(t)
	const objects, lines, limit = 60, 4, 4
	for i := range objects {
		var b strings.Builder
		for k := range lines {
			fmt.Fprintf(&b, `{"event_time":"2026-01-01T10:%02d:%02dZ","i":%d}`+"\n", (k*objects+i)/60, (k*objects+i)%60, i)
		}
		f.put(t, fmt.Sprintf("o%03d.ndjson", i), []byte(b.String()))
	}
	read := func(cap int) string {
		s := f.open(t, "", SourceConfig{Once: true}, s3Options{}, Position{})
		s.maxOpen = cap
		var all []tidemark.Record
		for !s.Exhausted() {
			recs, err := s.Read(t.Context(), nil, 7)
			if err != nil {
				t.Fatal(err)
			}
			open := 0
			for _, o := range s.objects {
				if o.r != nil {
					open++
				}
			}
			if open > cap {
				t.Fatalf("cap %d: %d bodies open", cap, open)
			}
			all = append(all, recs...)
		}
		if len(all) != objects*lines {
			t.Fatalf("cap %d: read %d records, want %d", cap, len(all), objects*lines)
		}
		return s3Render(all)
	}
	if capped, free := read(limit), read(objects*2); capped != free {
		t.Errorf("with the cap the records differ:\n%s\nwithout:\n%s", capped, free)
	}
}

func TestS3OverwrittenKeyIsNewObject(t *testing.T) {
	f := newS3Fix(t)
	v1, want1 := s3Lines("k.ndjson", "v1", 3)
	v2, want2 := s3Lines("k.ndjson", "v2", 4)
	info1 := f.put(t, "k.ndjson", v1)
	s := f.open(t, "", SourceConfig{}, s3Options{}, Position{})
	if got := s3Render(s3Drain(t, s, 10)); got != want1 {
		t.Fatalf("v1: got\n%s\nwant\n%s", got, want1)
	}
	info2 := f.put(t, "k.ndjson", v2)
	if info1.ETag == info2.ETag {
		t.Fatalf("overwrite kept ETag %s", info1.ETag)
	}
	f.clock.add(s3FullListing * DefaultRescan) // overwrites are found by the full listing
	if got := s3Render(s3Drain(t, s, 10)); got != want2 {
		t.Errorf("v2: got\n%s\nwant\n%s", got, want2)
	}
	p := s.Position()
	if len(p.Files) != 1 || p.Files[0].ETag != info2.ETag || !p.Files[0].Done {
		t.Errorf("position: got %+v, want k.ndjson done at ETag %s", p.Files, info2.ETag)
	}

	// After a restart from a checkpoint taken before the overwrite, the new
	// version is a new object too.
	s2 := f.open(t, "", SourceConfig{}, s3Options{}, Position{Files: []FilePosition{{Path: "k.ndjson", ETag: info1.ETag, Done: true}}})
	if got := s3Render(s3Drain(t, s2, 10)); got != want2 {
		t.Errorf("restart: got\n%s\nwant\n%s", got, want2)
	}
}

func TestS3ResumeMidObject(t *testing.T) {
	tests := []struct {
		name, key string
		format    string
		encode    func(*testing.T, []byte) []byte
	}{
		{"plain", "big.ndjson", FormatNDJSON, nil},
		{"gzip", "big.ndjson.gz", FormatNDJSON, s3Gzip},
		{"zstd", "big.ndjson.zst", FormatNDJSON, s3Zstd},
		{"csv", "big.csv", FormatCSV, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newS3Fix(t)
			data, want := s3Lines(tt.key, "r", 5000)
			if tt.format == FormatCSV {
				var b, w bytes.Buffer
				b.WriteString("event_time,i\n")
				for i := range 5000 {
					line := fmt.Sprintf("2026-01-01T10:00:%02dZ,%d", i%60, i)
					fmt.Fprintf(&w, "%s@%d %s\n", tt.key, b.Len(), line)
					b.WriteString(line + "\n")
				}
				data, want = b.Bytes(), w.String()
			}
			body := data
			if tt.encode != nil {
				body = tt.encode(t, data)
			}
			f.put(t, tt.key, body)
			cfg := SourceConfig{DecoderConfig: DecoderConfig{Format: tt.format, TimeField: "event_time"}}

			s := f.open(t, "", cfg, s3Options{}, Position{})
			var got []tidemark.Record
			for len(got) < 1234 { // well inside the object, past the first buffer
				recs, err := s.Read(t.Context(), nil, 7)
				if err != nil || len(recs) == 0 {
					t.Fatalf("read: %d records, %v", len(recs), err)
				}
				got = append(got, recs...)
			}
			pos := s.Position()
			s.Close() // the crash: nothing after the Position survives
			blob, err := json.Marshal(pos)
			if err != nil {
				t.Fatal(err)
			}
			var resume Position
			if err := json.Unmarshal(blob, &resume); err != nil {
				t.Fatal(err)
			}
			if len(resume.Files) != 1 || resume.Files[0].Done || resume.Files[0].Offset == 0 {
				t.Fatalf("position mid-object: got %s", blob)
			}
			s2 := f.open(t, "", cfg, s3Options{}, resume)
			got = append(got, s3Drain(t, s2, 1000)...)
			if g := s3Render(got); g != want {
				t.Errorf("resumed read differs from one read (%d records, want %d)", len(got), strings.Count(want, "\n"))
			}
			for _, r := range got {
				if r.Reason != tidemark.ReasonNone {
					t.Fatalf("record at %d quarantined: %s %s", r.Offset, r.Reason, r.Err)
				}
			}
		})
	}
}

func TestS3ChangedUnderReader(t *testing.T) {
	for _, partial := range []bool{false, true} {
		t.Run(fmt.Sprintf("partial=%v", partial), func(t *testing.T) {
			f := newS3Fix(t)
			v1, want1 := s3Lines("k.ndjson", "v1", 200)
			v2, want2 := s3Lines("k.ndjson", "v2", 50)
			f.put(t, "k.ndjson", v1)
			var log bytes.Buffer
			s := f.open(t, "", SourceConfig{Logger: slog.New(slog.NewTextHandler(&log, nil))}, s3Options{}, Position{})
			var got []tidemark.Record
			if partial {
				recs, err := s.Read(t.Context(), nil, 10)
				if err != nil || len(recs) != 10 {
					t.Fatalf("read: %d records, %v", len(recs), err)
				}
				got = recs
			}
			f.put(t, "k.ndjson", v2)
			if o := s.objects["k.ndjson"]; o != nil {
				o.close() // the connection drops: the next Read GETs again, pinned to v1's ETag
			}
			if recs := s3Drain(t, s, 100); len(recs) != 0 {
				t.Fatalf("read after the change: got %s, want nothing (412)", s3Render(recs))
			}
			if !strings.Contains(log.String(), "object changed while being read") {
				t.Errorf("log: got %q, want the 412 logged", log.String())
			}
			got = append(got, s3Drain(t, s, 100)...) // the 412 asked for a new listing
			want := want2
			if partial {
				want = strings.Join(strings.SplitAfter(want1, "\n")[:10], "") + want2
			}
			if g := s3Render(got); g != want {
				t.Errorf("got\n%s\nwant\n%s", g, want)
			}
		})
	}
}

func TestS3Settle(t *testing.T) {
	tests := []struct {
		name string
		opt  s3Options
		wait time.Duration
	}{
		{"default", s3Options{}, DefaultS3Settle},
		{"configured", s3Options{Settle: 10 * time.Second}, 10 * time.Second},
		{"none", s3Options{Settle: -1}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newS3Fix(t)
			data, want := s3Lines("k.ndjson", "k", 3)
			info := f.put(t, "k.ndjson", data)
			f.clock.set(info.LastModified.Add(tt.wait - time.Millisecond))
			s := f.open(t, "", SourceConfig{}, tt.opt, Position{})
			got := s3Drain(t, s, 10)
			if tt.wait > 0 {
				if len(got) != 0 || len(s.Position().Files) != 0 {
					t.Fatalf("unsettled object read: got %s (position %s), want nothing", s3Render(got), s3Positions(s.Position()))
				}
				// The poll is due when it settles, before the Rescan period.
				f.clock.set(info.LastModified.Add(tt.wait))
				ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
				defer cancel()
				if err := s.Wait(ctx, time.Hour); err != nil {
					t.Fatalf("wait: %v", err)
				}
				got = s3Drain(t, s, 10)
			}
			if g := s3Render(got); g != want {
				t.Errorf("settled: got\n%s\nwant\n%s", g, want)
			}
		})
	}
}

func TestS3FinalLineWithoutNewline(t *testing.T) {
	f := newS3Fix(t)
	f.put(t, "a.ndjson", []byte(`{"event_time":1}`+"\n"+`{"event_time":2}`))
	f.put(t, "b.ndjson.gz", s3Gzip(t, []byte(`{"event_time":3}`)))
	f.put(t, "c.ndjson", nil)
	s := f.open(t, "", SourceConfig{}, s3Options{}, Position{})
	want := "a.ndjson@0 {\"event_time\":1}\na.ndjson@17 {\"event_time\":2}\nb.ndjson.gz@0 {\"event_time\":3}\n" // aligned: b waits at its peeked time
	if got := s3Render(s3Drain(t, s, 10)); got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
	for _, fp := range s.Position().Files {
		if !fp.Done {
			t.Errorf("%s not done: %+v", fp.Path, fp)
		}
	}
}

func TestS3PositionListsLiveObjects(t *testing.T) {
	f := newS3Fix(t)
	a, _ := s3Lines("a.ndjson", "a", 2)
	f.put(t, "a.ndjson", a)
	f.put(t, "b.ndjson", a)
	s := f.open(t, "", SourceConfig{}, s3Options{}, Position{})
	s3Drain(t, s, 10)
	if err := f.c.RemoveObject(t.Context(), f.bucket, "a.ndjson", minio.RemoveObjectOptions{}); err != nil {
		t.Fatal(err)
	}
	f.clock.add(s3FullListing * DefaultRescan) // deletions are found by the full listing
	if got := s3Drain(t, s, 10); len(got) != 0 {
		t.Errorf("read after delete: got %s, want nothing", s3Render(got))
	}
	p := s.Position()
	if len(p.Files) != 1 || p.Files[0].Path != "b.ndjson" || !p.Files[0].Done {
		t.Errorf("position: got %s, want only b.ndjson, done", s3Positions(p))
	}
	// A restart from it reads nothing again.
	s2 := f.open(t, "", SourceConfig{}, s3Options{}, p)
	if got := s3Drain(t, s2, 10); len(got) != 0 {
		t.Errorf("restart read again: got %s, want nothing", s3Render(got))
	}
}

func TestS3Once(t *testing.T) {
	f := newS3Fix(t)
	data, want := s3Lines("a.ndjson", "a", 3)
	info := f.put(t, "a.ndjson", data)
	f.clock.set(info.LastModified) // unsettled, but --once takes what is there
	s := f.open(t, "", SourceConfig{Once: true}, s3Options{}, Position{})
	if s.Exhausted() {
		t.Fatal("exhausted before reading")
	}
	if got := s3Render(s3Drain(t, s, 10)); got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
	if !s.Exhausted() {
		t.Error("not exhausted after reading everything")
	}
	if err := s.Wait(t.Context(), time.Hour); err != nil {
		t.Errorf("wait with once: %v", err)
	}
}

func TestS3OpenErrors(t *testing.T) {
	f := newS3Fix(t)
	if _, err := openS3With(t.Context(), "s3://tm-no-such-bucket/x", SourceConfig{}, s3Options{}, Position{}); err == nil {
		t.Error("open of a missing bucket: got nil error")
	}
	t.Setenv("AWS_SECRET_ACCESS_KEY", "wrong")
	if _, err := openS3With(t.Context(), f.spec(""), SourceConfig{}, s3Options{S3: store.S3Config{Retries: 1}}, Position{}); err == nil {
		t.Error("open with a wrong secret: got nil error")
	}
}

// TestS3BoundedMemory reads a 50 MB object with small batches: the live
// heap stays far below the object's size.
func TestS3BoundedMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("50 MB upload")
	}
	f := newS3Fix(t)
	const size = 50 << 20
	line := []byte(`{"event_time":"2026-01-01T10:00:00Z","page":"/index.html","pad":"` + strings.Repeat("x", 40) + `"}` + "\n")
	lines := size / len(line)
	src := io.LimitReader(&s3Repeat{line: line}, int64(lines*len(line)))
	if _, err := f.c.PutObject(t.Context(), f.bucket, "big.ndjson", src, int64(lines*len(line)), minio.PutObjectOptions{PartSize: 5 << 20}); err != nil {
		t.Fatal(err)
	}
	s := f.open(t, "", SourceConfig{}, s3Options{}, Position{})
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	base, peak := ms.HeapAlloc, uint64(0)
	n, buf := 0, make([]tidemark.Record, 0, 256)
	for i := 0; ; i++ {
		recs, err := s.Read(t.Context(), buf[:0], 256)
		if err != nil {
			t.Fatal(err)
		}
		if len(recs) == 0 {
			break
		}
		n += len(recs)
		if i%200 == 0 {
			runtime.GC()
			runtime.ReadMemStats(&ms)
			peak = max(peak, ms.HeapAlloc)
		}
	}
	if n != lines {
		t.Errorf("records: got %d, want %d", n, lines)
	}
	grown := int64(peak) - int64(base)
	t.Logf("50 MB object: live heap %d KiB at start, peak %d KiB (+%d KiB)", base>>10, peak>>10, grown>>10)
	if grown > 8<<20 {
		t.Errorf("live heap grew by %d KiB reading a 50 MB object, want < 8 MiB", grown>>10)
	}
}

// s3Repeat repeats one line forever.
type s3Repeat struct {
	line []byte
	off  int
}

func (r *s3Repeat) Read(p []byte) (int, error) {
	n := 0
	for n < len(p) {
		c := copy(p[n:], r.line[r.off:])
		n += c
		r.off = (r.off + c) % len(r.line)
	}
	return n, nil
}

func TestParseS3Spec(t *testing.T) {
	tests := []struct {
		spec, bucket, prefix string
		ok                   bool
	}{
		{"s3://b", "b", "", true},
		{"s3://b/", "b", "", true},
		{"s3://b/logs", "b", "logs/", true},
		{"s3://b/logs/", "b", "logs/", true},
		{"s3://b//logs/2026", "b", "logs/2026/", true},
		{"s3://", "", "", false},
		{"s3:///x", "", "", false},
		{"/local/dir", "", "", false},
		{"s3://a b/x", "", "", false},
	}
	for _, tt := range tests {
		b, p, err := parseS3Spec(tt.spec)
		if (err == nil) != tt.ok || b != tt.bucket || p != tt.prefix {
			t.Errorf("parseS3Spec(%q): got %q, %q, %v, want %q, %q, ok=%v", tt.spec, b, p, err, tt.bucket, tt.prefix, tt.ok)
		}
	}
}

func FuzzParseS3Spec(f *testing.F) {
	for _, s := range []string{"s3://b/logs", "s3://b", "s3:///", "s3://b//x//", "x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, spec string) {
		b, p, err := parseS3Spec(spec)
		if err != nil {
			return
		}
		if b == "" || strings.Contains(b, "/") || p != "" && !strings.HasSuffix(p, "/") || strings.HasPrefix(p, "/") {
			t.Fatalf("parseS3Spec(%q) = %q, %q", spec, b, p)
		}
		b2, p2, err := parseS3Spec("s3://" + b + "/" + p)
		if err != nil || b2 != b || p2 != p {
			t.Fatalf("round trip of %q: got %q, %q, %v, want %q, %q", spec, b2, p2, err, b, p)
		}
	})
}

// The source takes every setting of lake/store's S3 client set-up: here
// an endpoint without a scheme made plain HTTP by Insecure, path-style
// buckets and static credentials, with no AWS variable set.
func TestS3ClientSettings(t *testing.T) {
	f := newS3Fix(t)
	f.put(t, "k.ndjson", []byte(`{"event_time":"2026-01-01T10:00:00Z"}`+"\n"))
	for _, k := range []string{"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_ENDPOINT_URL", "AWS_REGION"} {
		t.Setenv(k, "")
	}
	opt := s3Options{S3: store.S3Config{
		Endpoint:  strings.TrimPrefix(f.srv.Endpoint, "http://"),
		Insecure:  true,
		PathStyle: "path",
		Region:    f.srv.Region,
		AccessKey: f.srv.AccessKey,
		SecretKey: f.srv.SecretKey,
		Timeout:   time.Minute,
	}}
	s := f.open(t, "", SourceConfig{}, opt, Position{})
	if got := s3Drain(t, s, 10); len(got) != 1 {
		t.Fatalf("read %d records, want 1", len(got))
	}
	opt.S3.PathStyle = "sideways"
	if _, err := openS3With(t.Context(), f.spec(""), SourceConfig{}, opt, Position{}); err == nil || !strings.Contains(err.Error(), "path style") {
		t.Errorf("bad path style: got %v, want the store's error", err)
	}
}

func TestExactReader(t *testing.T) {
	tests := []struct {
		data    string
		left    int64
		want    string
		wantErr error
	}{
		{"abcdef", 6, "abcdef", nil},
		{"abcdef", 4, "abcd", nil},
		{"abc", 6, "abc", io.ErrUnexpectedEOF},
	}
	for _, tt := range tests {
		got, err := io.ReadAll(&exactReader{r: strings.NewReader(tt.data), left: tt.left})
		if string(got) != tt.want || err != tt.wantErr {
			t.Errorf("exactReader(%q, %d): got %q, %v, want %q, %v", tt.data, tt.left, got, err, tt.want, tt.wantErr)
		}
	}
}

// BenchmarkS3Read reads a 20 MB NDJSON object from a local versitygw,
// decoding every record, in batches of 4096.
func BenchmarkS3Read(b *testing.B) {
	f := newS3Fix(b)
	line := []byte(`{"event_time":"2026-01-01T10:00:00Z","page":"/index.html","value":1.5}` + "\n")
	lines := (20 << 20) / len(line)
	size := int64(lines * len(line))
	if _, err := f.c.PutObject(b.Context(), f.bucket, "big.ndjson", io.LimitReader(&s3Repeat{line: line}, size), size, minio.PutObjectOptions{PartSize: 5 << 20}); err != nil {
		b.Fatal(err)
	}
	cfg := SourceConfig{DecoderConfig: DecoderConfig{Keys: []string{"page"}, ValueField: "value"}, Once: true}
	b.SetBytes(size)
	b.ReportAllocs()
	buf := make([]tidemark.Record, 0, 4096)
	for b.Loop() {
		s := f.open(b, "", cfg, s3Options{}, Position{})
		n := 0
		for !s.Exhausted() {
			recs, err := s.Read(b.Context(), buf[:0], 4096)
			if err != nil {
				b.Fatal(err)
			}
			n += len(recs)
		}
		if n != lines {
			b.Fatalf("records: got %d, want %d", n, lines)
		}
		s.Close()
	}
	b.ReportMetric(float64(lines)*float64(b.N)/b.Elapsed().Seconds(), "records/s")
}

func TestS3CorruptObjectSkipped(t *testing.T) {
	f := newS3Fix(t)
	f.put(t, "a.ndjson.gz", []byte("this is not gzip\n"))
	b, wantB := s3Lines("b.ndjson", "b", 2)
	f.put(t, "b.ndjson", b)
	var log bytes.Buffer
	s := f.open(t, "", SourceConfig{Logger: slog.New(slog.NewTextHandler(&log, nil))}, s3Options{}, Position{})
	var got []tidemark.Record
	for i := range maxS3ReadFails {
		// b is read while a is retried with backoff, but a holds the
		// source's watermark (it has unread data) until it is given up.
		recs := s3Drain(t, s, 10)
		got = append(got, recs...)
		p := s.Position()
		if fr, held := p.Frontier(); !p.Files[0].Done && (!held || fr != tidemark.MinTime) {
			t.Errorf("attempt %d: frontier %d (held %v), want a.ndjson.gz to hold it at MinTime", i+1, fr, held)
		}
		f.clock.add(time.Second)
	}
	if _, held := s.Position().Frontier(); held {
		t.Errorf("frontier still held after a.ndjson.gz was given up and b read to its end")
	}
	if g := s3Render(got); g != wantB {
		t.Errorf("got\n%s\nwant\n%s", g, wantB)
	}
	if p := s.Position(); len(p.Files) != 2 || !p.Files[0].Done {
		t.Errorf("position: got %s, want a.ndjson.gz done", s3Positions(p))
	}
	if !strings.Contains(log.String(), "skipping the rest of the object") {
		t.Errorf("log: got %q, want the skip logged", log.String())
	}
}

func TestS3WaitCancelled(t *testing.T) {
	f := newS3Fix(t)
	s := f.open(t, "", SourceConfig{}, s3Options{}, Position{})
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := s.Wait(ctx, time.Hour); err != context.Canceled {
		t.Errorf("wait: got %v, want %v", err, context.Canceled)
	}
}

func TestS3ViaOpen(t *testing.T) {
	f := newS3Fix(t)
	data, want := s3Lines("x/a.ndjson", "a", 2)
	f.put(t, "in/x/a.ndjson", data)
	src, err := Open(t.Context(), f.spec("in"), SourceConfig{Clock: f.clock.now}, Position{})
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	defer src.Close()
	s, ok := src.(*s3Source)
	if !ok {
		t.Fatalf("open returned %T, want *s3Source", src)
	}
	if got := s3Render(s3Drain(t, s, 10)); got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
}

// BenchmarkS3Poll50k measures one poll of a prefix holding 50,000 objects:
// a full listing (Open's, and the periodic backstop) and the poll that
// lists only what is new (nothing, here).
func BenchmarkS3Poll50k(b *testing.B) {
	const n = 50000
	f := newS3Fix(b)
	var wg sync.WaitGroup
	keys := make(chan int)
	for range 16 {
		wg.Go(func() {
			for i := range keys {
				data := []byte(fmt.Sprintf(`{"event_time":"2026-01-01T10:00:00Z","i":%d}`+"\n", i))
				if _, err := f.c.PutObject(b.Context(), f.bucket, fmt.Sprintf("2026/01/01/%06d.ndjson", i), bytes.NewReader(data), int64(len(data)), minio.PutObjectOptions{}); err != nil {
					b.Error(err)
				}
			}
		})
	}
	for i := range n {
		keys <- i
	}
	close(keys)
	wg.Wait()
	s := f.open(b, "", SourceConfig{}, s3Options{}, Position{})
	if s.listed != n {
		b.Fatalf("listed %d, want %d", s.listed, n)
	}
	for _, full := range []bool{true, false} {
		name := "new-only"
		if full {
			name = "full"
		}
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				if full {
					s.lastFull = time.Time{}
				}
				if err := s.poll(b.Context(), nil); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(s.listed), "keys/poll")
		})
	}
}

// An S3 backlog of objects each covering its own hour, keyed against time
// order: every object not read yet is peeked, so the first Read takes the
// earliest object's records, not one record from every object (which made
// one small lake file per object's hour in the first commit), the frontier
// is held by what was read, and the unread objects stand at their first
// valid event (through gzip, past lines that are not events). The peeked
// times survive a checkpoint round trip, and the whole backlog reads in
// the order one object holding the same events would give.
func TestS3PeekFirstBatch(t *testing.T) {
	f := newS3Fix(t)
	base := time.Date(2025, 12, 20, 0, 0, 0, 0, time.UTC)
	const hours, lines = 12, 20
	var oneFile []string // every valid event, in event-time order
	for h := range hours {
		var b strings.Builder
		if h%3 == 1 {
			b.WriteString("not json\n{\"no_time\":1}\n") // peek looks past them
		}
		for m := range lines {
			at := base.Add(time.Duration(h)*time.Hour + time.Duration(m)*time.Minute).Format(time.RFC3339)
			fmt.Fprintf(&b, `{"event_time":%q}`+"\n", at)
			oneFile = append(oneFile, at)
		}
		key, data := fmt.Sprintf("h%02d.ndjson", hours-1-h), []byte(b.String()) // key order against time order
		if h%2 == 1 {
			key, data = key+".gz", s3Gzip(t, data)
		}
		f.put(t, key, data)
	}
	cfg := SourceConfig{Once: true}
	s := f.open(t, "", cfg, s3Options{}, Position{})
	recs, err := s.Read(t.Context(), nil, 10)
	if err != nil {
		t.Fatal(err)
	}
	first := fmt.Sprintf("h%02d.ndjson", hours-1)
	for _, r := range recs {
		if r.File != first {
			t.Fatalf("first batch:\n%s\nwant the first 10 lines of %s (hour 0)", s3Render(recs), first)
		}
	}
	if len(recs) != 10 {
		t.Fatalf("first batch: %d records, want 10", len(recs))
	}
	p := s.Position()
	if at, held := p.Frontier(); !held || at != base.Add(9*time.Minute).UnixMicro() {
		t.Errorf("frontier %s (held %v), want 00:09, the last event read", tidemark.FormatTime(at), held)
	}
	for _, fp := range p.Files {
		if fp.Path == first {
			continue
		}
		var h int
		fmt.Sscanf(fp.Path, "h%02d", &h)
		if want := base.Add(time.Duration(hours-1-h) * time.Hour).UnixMicro(); !fp.HasNext || fp.Next != want || fp.Offset != 0 || fp.HasMax {
			t.Errorf("%s: next %s (has %v) offset %d has_max %v, want unread, next at hour %d",
				fp.Path, tidemark.FormatTime(fp.Next), fp.HasNext, fp.Offset, fp.HasMax, hours-1-h)
		}
	}
	// No GET body stays open for a peek.
	for _, o := range s.objects {
		if o.r != nil && o.pos.Path != first {
			t.Errorf("%s: body open after its peek", o.pos.Path)
		}
	}

	// A restart from the checkpointed position reads the rest; all of it
	// together is the one-object order.
	blob, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	var resume Position
	if err := json.Unmarshal(blob, &resume); err != nil {
		t.Fatal(err)
	}
	s2 := f.open(t, "", cfg, s3Options{}, resume)
	recs = append(recs, s3Drain(t, s2, 7)...)
	var got []string
	for _, r := range recs {
		if r.Valid() {
			got = append(got, tidemark.FormatTime(r.EventTime))
		}
	}
	var want []string
	for _, at := range oneFile {
		tm, _ := time.Parse(time.RFC3339, at)
		want = append(want, tidemark.FormatTime(tm.UnixMicro()))
	}
	if i := firstDiff(got, want); i >= 0 {
		t.Errorf("valid events differ from the one-object order at %d (got %d, want %d events)", i, len(got), len(want))
	}
	if n, bad := len(recs), hours/3*2; n != hours*lines+bad {
		t.Errorf("read %d records, want %d (%d events + %d invalid lines)", n, hours*lines+bad, hours*lines, bad)
	}
}
