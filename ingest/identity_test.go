package ingest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
)

// idLines returns n NDJSON lines with unique ids, from id first on.
func idLines(first, n int) string {
	var b strings.Builder
	for i := first; i < first+n; i++ {
		fmt.Fprintf(&b, `{"event_time":"2026-01-01T09:00:00Z","id":%d,"pad":"some text to make lines longer"}`+"\n", i)
	}
	return b.String()
}

// gzipFile compresses name into name+".gz" and removes name, as gzip(1)
// (and logrotate's compress) does.
func gzipFile(t *testing.T, name string) {
	t.Helper()
	data, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	zw.Write(data)
	zw.Close()
	writeFile(t, name+".gz", b.String())
	if err := os.Remove(name); err != nil {
		t.Fatal(err)
	}
}

func zstdBytes(t *testing.T, data string) string {
	t.Helper()
	var b bytes.Buffer
	zw, err := zstd.NewWriter(&b)
	if err != nil {
		t.Fatal(err)
	}
	zw.Write([]byte(data))
	zw.Close()
	return b.String()
}

func rename(t *testing.T, from, to string) {
	t.Helper()
	if err := os.Rename(from, to); err != nil {
		t.Fatal(err)
	}
}

// TestIdentityCompressedRotation is logrotate's compress + delaycompress:
// app.log -> app.log.1, then app.log.1 -> app.log.2 -> app.log.2.gz. The
// compressed file holds lines already read: it adds nothing (issue 31:
// 20,755 rows for 12,000 lines).
func TestIdentityCompressedRotation(t *testing.T) {
	dir := t.TempDir()
	name := filepath.Join(dir, "app.log")
	writeFile(t, name, idLines(0, 40))
	d := tailer(t, dir, SourceConfig{})
	if got := len(readAll(t, d, 1000)); got != 40 {
		t.Fatalf("first read: got %d records, want 40", got)
	}
	rename(t, name, name+".1")
	writeFile(t, name, idLines(40, 5))
	if got := rescanRead(t, d); strings.Count(got, "\n") != 5 {
		t.Fatalf("after rotation 1: got\n%s\nwant the 5 new lines", got)
	}
	// Rotation 2, as logrotate does it: shift, rename, then compress.
	rename(t, name+".1", name+".2")
	rename(t, name, name+".1")
	writeFile(t, name, idLines(45, 3))
	gzipFile(t, name+".2")
	got := rescanRead(t, d)
	if n := strings.Count(got, "\n"); n != 3 {
		t.Fatalf("after rotation 2 with compression: got %d records, want the 3 new lines:\n%s", n, got)
	}
	// A third: app.log.1 -> app.log.2.gz while app.log.2.gz -> app.log.3.gz.
	rename(t, name+".2.gz", name+".3.gz")
	rename(t, name+".1", name+".2")
	rename(t, name, name+".1")
	writeFile(t, name, idLines(48, 2))
	gzipFile(t, name+".2")
	if got := rescanRead(t, d); strings.Count(got, "\n") != 2 {
		t.Fatalf("after rotation 3: got\n%s\nwant the 2 new lines", got)
	}
}

// ids returns the "id" values of the records in a summary, in order.
func ids(t *testing.T, sum string) []int {
	t.Helper()
	var out []int
	for _, l := range strings.Split(strings.TrimSpace(sum), "\n") {
		if l == "" {
			continue
		}
		i := strings.Index(l, `"id":`)
		if i < 0 {
			t.Fatalf("no id in %q", l)
		}
		var n int
		fmt.Sscanf(l[i+5:], "%d", &n)
		out = append(out, n)
	}
	return out
}

// wantIDs checks that the records of a summary are ids first..first+n-1,
// each once, in any order (files with equal event times are read in path
// order).
func wantIDs(t *testing.T, what, sum string, first, n int) {
	t.Helper()
	got := ids(t, sum)
	slices.Sort(got)
	var want []int
	for i := first; i < first+n; i++ {
		want = append(want, i)
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("%s: got ids %v, want %v\n%s", what, got, want, sum)
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	data, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, to, string(data))
}

// TestIdentityCopyTruncate is logrotate's copytruncate: the copy app.log.1
// holds what was read and what was written since; only the latter is read,
// and the truncated app.log restarts at 0. Lines written between the last
// read and the copy are read from the copy. Whether the copy is seen
// before or after the truncation does not matter.
func TestIdentityCopyTruncate(t *testing.T) {
	for _, seeCopyFirst := range []bool{false, true} {
		t.Run(fmt.Sprint("copy seen first=", seeCopyFirst), func(t *testing.T) {
			dir := t.TempDir()
			name := filepath.Join(dir, "app.log")
			writeFile(t, name, idLines(0, 30))
			d := tailer(t, dir, SourceConfig{})
			wantIDs(t, "first read", rescanRead(t, d), 0, 30)
			appendFile(t, name, idLines(30, 5)) // written, not read yet
			copyFile(t, name, name+".1")
			var got string
			if seeCopyFirst {
				got = rescanRead(t, d)
			}
			if err := os.Truncate(name, 0); err != nil {
				t.Fatal(err)
			}
			appendFile(t, name, idLines(35, 2))
			got += rescanRead(t, d)
			got += rescanRead(t, d)
			wantIDs(t, "after copytruncate", got, 30, 7)
			// The next copytruncate: the same again.
			appendFile(t, name, idLines(37, 1))
			copyFile(t, name, name+".1")
			if err := os.Truncate(name, 0); err != nil {
				t.Fatal(err)
			}
			appendFile(t, name, idLines(38, 1))
			wantIDs(t, "second copytruncate", rescanRead(t, d)+rescanRead(t, d), 37, 2)
		})
	}
}

// TestIdentityRestoredCopy is `cp -a` of a source directory to a new
// place (new inodes, same names), resumed from the old one's Position:
// nothing is read twice, lines written after the copy are read once.
func TestIdentityRestoredCopy(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "src")
	writeFile(t, filepath.Join(dir, "a.log"), idLines(0, 40))
	writeFile(t, filepath.Join(dir, "b.log"), idLines(100, 2)) // shorter than a fingerprint
	gz := filepath.Join(dir, "old", "a.log.2")
	writeFile(t, gz, idLines(200, 20))
	gzipFile(t, gz)
	d := tailer(t, dir, SourceConfig{})
	if n := len(ids(t, rescanRead(t, d))); n != 62 {
		t.Fatalf("first read: got %d records, want 62", n)
	}
	appendFile(t, filepath.Join(dir, "a.log"), idLines(40, 3)) // not read before the copy
	pos := d.Position()
	raw, err := json.Marshal(pos) // as the checkpoint stores it
	if err != nil {
		t.Fatal(err)
	}
	d.Close()
	dir2 := filepath.Join(root, "restored")
	if out, err := exec.Command("cp", "-a", dir, dir2).CombinedOutput(); err != nil {
		t.Fatalf("cp -a: %v: %s", err, out)
	}
	appendFile(t, filepath.Join(dir2, "b.log"), idLines(102, 1))
	var resume Position
	if err := json.Unmarshal(raw, &resume); err != nil {
		t.Fatal(err)
	}
	r := openTest(t, dir2, SourceConfig{PollOnly: true}, resume).(*DirSource)
	got := summary(readAll(t, r, 1000))
	if fmt.Sprint(ids(t, got)) != "[40 41 42 102]" {
		t.Errorf("restored copy: got\n%s\nwant ids 40-42 and 102", got)
	}
	// The identities carried over: the same file_id for the same file.
	for i, p := range r.Position().Files {
		if p.ID != pos.Files[i].ID || p.Path != pos.Files[i].Path {
			t.Errorf("file %d: got %s %s, want %s %s", i, p.Path, p.ID, pos.Files[i].Path, pos.Files[i].ID)
		}
	}
}

// TestIdentityCollisions: files that start alike are told apart by the
// bytes after the start, up to 1 KiB; a short file keeps its identity as
// it grows past the fingerprint.
func TestIdentityCollisions(t *testing.T) {
	t.Run("identical first lines", func(t *testing.T) {
		dir := t.TempDir()
		first := `{"event_time":"2026-01-01T09:00:00Z","id":-1}` + "\n"
		writeFile(t, filepath.Join(dir, "a.log"), first+idLines(0, 2))
		writeFile(t, filepath.Join(dir, "b.log"), first+idLines(10, 3))
		d := tailer(t, dir, SourceConfig{})
		if got := rescanRead(t, d); strings.Count(got, "\n") != 7 {
			t.Errorf("two files with the same first line: got\n%s\nwant 7 records", got)
		}
		// A third, after a is gone: its first line is a's, then it differs.
		os.Remove(filepath.Join(dir, "a.log"))
		rescanRead(t, d)
		writeFile(t, filepath.Join(dir, "c.log"), first+idLines(20, 5))
		if got := rescanRead(t, d); strings.Count(got, "\n") != 6 {
			t.Errorf("a file starting as a gone one: got\n%s\nwant 6 records", got)
		}
		ps := d.Position().Files
		if len(ps) != 2 || ps[0].ID == ps[1].ID {
			t.Errorf("got positions %+v, want two identities", ps)
		}
	})
	t.Run("CSV headers", func(t *testing.T) {
		dir := t.TempDir()
		header := "event_time,page\n"
		for i, f := range []string{"a.csv", "b.csv", "c.csv"} {
			writeFile(t, filepath.Join(dir, f), header+fmt.Sprintf("2026-01-01T09:00:0%dZ,/p%d\n", i, i))
		}
		writeFile(t, filepath.Join(dir, "d.csv"), header) // no record yet
		d := tailer(t, dir, SourceConfig{DecoderConfig: DecoderConfig{Format: FormatCSV}})
		if got := rescanRead(t, d); strings.Count(got, "\n") != 3 {
			t.Errorf("CSV files sharing a header: got\n%s\nwant 3 records", got)
		}
		appendFile(t, filepath.Join(dir, "d.csv"), "2026-01-01T09:00:00Z,/p0\n") // a's first record too
		appendFile(t, filepath.Join(dir, "d.csv"), "2026-01-01T09:00:09Z,/p9\n")
		if got := rescanRead(t, d); strings.Count(got, "\n") != 2 {
			t.Errorf("a CSV file starting as another: got\n%s\nwant its 2 records", got)
		}
	})
	t.Run("short file grows", func(t *testing.T) {
		dir := t.TempDir()
		name := filepath.Join(dir, "app.log")
		writeFile(t, name, idLines(0, 1))
		d := tailer(t, dir, SourceConfig{})
		wantIDs(t, "short", rescanRead(t, d), 0, 1)
		id := d.Position().Files[0].ID
		for i := 1; i < 30; i++ {
			appendFile(t, name, idLines(i, 1))
			wantIDs(t, "grown", rescanRead(t, d), i, 1)
		}
		p := d.Position().Files[0]
		if p.ID != id || p.HashLen != fingerprintBytes {
			t.Errorf("got id %s over %d bytes, want %s (unchanged) over %d", p.ID, p.HashLen, id, fingerprintBytes)
		}
		rename(t, name, name+".1")
		gzipFile(t, name+".1")
		if got := rescanRead(t, d); got != "" {
			t.Errorf("compressed rotation of a file that grew: got\n%s\nwant nothing", got)
		}
	})
	t.Run("short copy being made", func(t *testing.T) {
		for _, goneFirst := range []bool{false, true} {
			dir := t.TempDir()
			name := filepath.Join(dir, "app.log")
			data := idLines(0, 30)
			writeFile(t, name, data)
			d := tailer(t, dir, SourceConfig{})
			rescanRead(t, d)
			if goneFirst {
				rename(t, name, filepath.Join(dir, ".hidden")) // out of the source
				rescanRead(t, d)
			}
			writeFile(t, name+".1", data[:100]) // a copy, 100 bytes in
			if got := rescanRead(t, d); got != "" {
				t.Errorf("gone first=%v: a copy being made: got\n%s\nwant nothing", goneFirst, got)
			}
			writeFile(t, name+".1", data)
			if got := rescanRead(t, d); got != "" {
				t.Errorf("gone first=%v: the copy made: got\n%s\nwant nothing", goneFirst, got)
			}
		}
	})
}

// TestIdentityLegacyCheckpoint: a Position written before content identity
// (dev+inode and an FNV hash, no id) carries over: nothing is read again,
// and the file gets its identity.
func TestIdentityLegacyCheckpoint(t *testing.T) {
	dir := t.TempDir()
	name := filepath.Join(dir, "app.log")
	writeFile(t, name, idLines(0, 20))
	fi, err := os.Stat(name)
	if err != nil {
		t.Fatal(err)
	}
	dev, ino := fileID(fi)
	h, _ := legacyHash(name, fingerprintBytes)
	old := fmt.Sprintf(`{"files":[{"path":"app.log","dev":%d,"inode":%d,"hash":%q,"hash_len":%d,"offset":%d,"max_us":1767258000000000,"has_max":true}]}`,
		dev, ino, h, fingerprintBytes, fi.Size())
	var resume Position
	if err := json.Unmarshal([]byte(old), &resume); err != nil {
		t.Fatal(err)
	}
	appendFile(t, name, idLines(20, 2))
	d := openTest(t, dir, SourceConfig{PollOnly: true}, resume).(*DirSource)
	wantIDs(t, "resumed from an old checkpoint", summary(readAll(t, d, 100)), 20, 2)
	if p := d.Position().Files[0]; p.ID == "" {
		t.Errorf("got no identity after resuming, want one")
	}
	// Then a compressed rotation of it adds nothing.
	rename(t, name, name+".1")
	gzipFile(t, name+".1")
	if got := rescanRead(t, d); got != "" {
		t.Errorf("rotation after resuming an old checkpoint: got\n%s\nwant nothing", got)
	}
}

// TestIdentityZstdAndInodeReuse: a .zst rotation is recognised too, and a
// reused inode with new content is a new file.
func TestIdentityZstdAndInodeReuse(t *testing.T) {
	dir := t.TempDir()
	name := filepath.Join(dir, "app.log")
	data := idLines(0, 30)
	writeFile(t, name, data)
	d := tailer(t, dir, SourceConfig{})
	rescanRead(t, d)
	appendFile(t, name, idLines(30, 1))
	os.Remove(name)
	writeFile(t, name+".1.zst", zstdBytes(t, data+idLines(30, 1)))
	wantIDs(t, "zstd rotation", rescanRead(t, d), 30, 1)
	writeFile(t, name, idLines(50, 2))
	wantIDs(t, "new file", rescanRead(t, d), 50, 2)
	f, err := os.OpenFile(name, os.O_WRONLY|os.O_TRUNC, 0) // same inode, new content
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(idLines(60, 3))
	f.Close()
	wantIDs(t, "inode reused", rescanRead(t, d), 60, 3)
}

// TestIdentityLimitLegacy: a batch logged before content identity (its end
// position names files by inode) is replayed with the same bounds.
func TestIdentityLimitLegacy(t *testing.T) {
	dir := t.TempDir()
	name := filepath.Join(dir, "app.log")
	writeFile(t, name, idLines(0, 20))
	fi, err := os.Stat(name)
	if err != nil {
		t.Fatal(err)
	}
	dev, ino := fileID(fi)
	h, _ := legacyHash(name, fingerprintBytes)
	start := Position{Files: []FilePosition{{Path: "app.log", Dev: dev, Inode: ino, Hash: h, HashLen: fingerprintBytes}}}
	end := start
	end.Files = []FilePosition{start.Files[0]}
	end.Files[0].Offset = int64(len(idLines(0, 5)))
	d := openTest(t, dir, SourceConfig{PollOnly: true}, start).(*DirSource)
	d.Limit(end)
	wantIDs(t, "replay of a legacy batch", summary(readAll(t, d, 100)), 0, 5)
}

// TestIdentityManyMovedFiles: a moved source's files, given as gone (the
// stream does so for a source new to its checkpoint), are all matched at
// Open even past maxGone; then the gone list is cut to maxGone.
func TestIdentityManyMovedFiles(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "a")
	n := maxGone + 50
	for i := range n {
		writeFile(t, filepath.Join(dir, fmt.Sprintf("f%04d.log", i)), idLines(i*10, 2))
	}
	d := openTest(t, dir, SourceConfig{Once: true}, Position{}).(*DirSource)
	if got := len(readAll(t, d, 100000)); got != 2*n {
		t.Fatalf("first read: got %d records, want %d", got, 2*n)
	}
	pos := d.Position()
	moved := filepath.Join(root, "b")
	rename(t, dir, moved)
	writeFile(t, filepath.Join(root, "b", "new.log"), idLines(100000, 1))
	r := openTest(t, moved, SourceConfig{Once: true}, Position{Gone: append(pos.Files, FilePosition{Path: "x", ID: "gone-only", Hash: "h", HashLen: 1, Head: "h", Offset: 5})}).(*DirSource)
	wantIDs(t, "moved source", summary(readAll(t, r, 100000)), 100000, 1)
	if g := len(r.Position().Gone); g > maxGone {
		t.Errorf("got %d gone files, want at most %d", g, maxGone)
	}
}
