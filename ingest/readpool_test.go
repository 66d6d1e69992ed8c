package ingest

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unsafe"

	"github.com/klauspost/compress/gzip"

	"tidemark"
)

// recycleInput writes three files (one gzip-compressed, one with lines over
// the limit) and returns every line by file and offset.
func recycleInput(t *testing.T, dir string) map[string]map[int64]string {
	t.Helper()
	want := map[string]map[int64]string{}
	for f, name := range []string{"a.ndjson", "b.ndjson", "c.ndjson.gz"} {
		var data []byte
		lines := map[int64]string{}
		for i := range 10000 {
			line := fmt.Sprintf(`{"event_time":"2026-01-01T09:%02d:%02dZ","page":"/f%d/%d","pad":%q}`, i/600%60, i/10%60, f, i, strings.Repeat("x", i%97))
			if f == 1 && i%1000 == 7 {
				line += strings.Repeat("y", 3000) // over the limit: its prefix is a copy
			}
			lines[int64(len(data))] = line
			data = append(append(data, line...), '\n')
		}
		want[name] = lines
		if strings.HasSuffix(name, ".gz") {
			var b bytes.Buffer
			zw := gzip.NewWriter(&b)
			zw.Write(data)
			zw.Close()
			data = b.Bytes()
		}
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return want
}

// checkPayloads compares each record's payload with the line it was read
// from, byte for byte.
func checkPayloads(t *testing.T, want map[string]map[int64]string, recs []tidemark.Record, what string) {
	t.Helper()
	for i := range recs {
		r := &recs[i]
		line, ok := want[r.File][r.Offset]
		if !ok {
			t.Fatalf("%s: record at %s:%d is not a line start", what, r.File, r.Offset)
		}
		if len(line) > 2048 {
			line = line[:2048]
		}
		if string(r.Payload) != line {
			t.Fatalf("%s: payload at %s:%d changed:\n got %.80q\nwant %.80q", what, r.File, r.Offset, r.Payload, line)
		}
	}
}

// The directory source reuses a read buffer only once every record that
// points into it is done with. Batches are read as the stream reads them:
// batch i+1 is read while batch i is still being processed (here: before
// it is checked), and batch i is recycled from another goroutine after its
// check. A buffer reused too early shows as a changed payload of batch i
// (or of an earlier batch, checked again at the end when kept), or as a
// race. The test also requires the buffers to be reused at all: a later
// batch's payload at the address of an earlier one's.
func TestDirRecyclesReadBuffersOnlyWhenDone(t *testing.T) {
	for _, recycle := range []bool{true, false} {
		t.Run(fmt.Sprintf("recycle=%v", recycle), func(t *testing.T) {
			defer func(n int) { onceBuffer = n }(onceBuffer)
			onceBuffer = 64 << 10 // a buffer or two per file and batch: many chances to reuse one too early
			dir := t.TempDir()
			want := recycleInput(t, dir)
			cfg := SourceConfig{Once: true, Clock: fixedClock, DecoderConfig: DecoderConfig{Keys: []string{"page"}, MaxLineBytes: 2048, MaxFuture: -1}}
			src, err := Open(context.Background(), dir, cfg, Position{})
			if err != nil {
				t.Fatal(err)
			}
			defer src.Close()
			var (
				all     [][]tidemark.Record
				seen    = map[uintptr]int{} // payload address -> batch
				reused  int
				pending func() // the recycle of the batch being processed
				prev    []tidemark.Record
			)
			for b := 0; !src.Exhausted(); b++ {
				recs, err := src.Read(context.Background(), nil, 3000)
				if err != nil {
					t.Fatal(err)
				}
				marks := Marks([]Source{src})
				// The previous batch is processed now, after this one
				// was read: its payloads must be intact.
				checkPayloads(t, want, prev, fmt.Sprintf("batch %d after batch %d was read", b-1, b))
				if pending != nil && recycle {
					done := make(chan struct{})
					go func() { pending(); close(done) }()
					<-done
				}
				reused += countReused(seen, recs, b)
				if !recycle {
					all = append(all, recs) // kept: nothing may overwrite them
				}
				prev, pending = recs, marks
			}
			checkPayloads(t, want, prev, "the last batch")
			for b, recs := range all {
				checkPayloads(t, want, recs, fmt.Sprintf("batch %d at the end", b))
			}
			switch {
			case recycle && reused == 0:
				t.Error("no read buffer was reused after Recycle")
			case !recycle && reused > 0:
				t.Errorf("%d payloads were read into memory of kept records without Recycle", reused)
			}
		})
	}
}

// countReused counts the payloads of batch b that start where a payload
// of an earlier batch started, and notes where b's start.
func countReused(seen map[uintptr]int, recs []tidemark.Record, b int) int {
	n := 0
	for i := range recs {
		if len(recs[i].Payload) == 0 {
			continue
		}
		p := uintptr(unsafe.Pointer(unsafe.SliceData(recs[i].Payload)))
		if at, ok := seen[p]; ok && at < b {
			n++
		}
		seen[p] = b
	}
	return n
}

// A tailing source recycles too: files that grow are read again into the
// buffers of the records done with, and what was read stays intact until
// it is recycled.
func TestDirRecyclesWhileTailing(t *testing.T) {
	defer func(n int) { tailBuffer = n }(tailBuffer)
	tailBuffer = 32 << 10
	dir := t.TempDir()
	name := filepath.Join(dir, "live.ndjson")
	writeFile(t, name, "")
	src, err := Open(context.Background(), dir, SourceConfig{PollOnly: true, Clock: fixedClock, DecoderConfig: DecoderConfig{MaxFuture: -1}}, Position{})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	want := map[string]map[int64]string{"live.ndjson": {}}
	var size int64
	var prev []tidemark.Record
	var pending func()
	seen, reused := map[uintptr]int{}, 0
	for round := range 40 {
		var chunk []byte
		for i := range 2000 {
			line := fmt.Sprintf(`{"event_time":"2026-01-01T09:00:00Z","round":%d,"i":%d,"pad":%q}`, round, i, strings.Repeat("z", (round+i)%53))
			want["live.ndjson"][size+int64(len(chunk))] = line
			chunk = append(append(chunk, line...), '\n')
		}
		appendFile(t, name, string(chunk))
		size += int64(len(chunk))
		if err := src.(*DirSource).Rescan(context.Background()); err != nil {
			t.Fatal(err)
		}
		recs, err := src.Read(context.Background(), nil, 2000)
		if err != nil {
			t.Fatal(err)
		}
		if len(recs) != 2000 {
			t.Fatalf("round %d: read %d records, want 2000", round, len(recs))
		}
		marks := Marks([]Source{src})
		reused += countReused(seen, recs, round)
		checkPayloads(t, want, prev, fmt.Sprintf("round %d after round %d was read", round-1, round))
		if pending != nil {
			pending()
		}
		prev, pending = recs, marks
	}
	checkPayloads(t, want, prev, "the last round")
	if reused == 0 {
		t.Error("no read buffer was reused after Recycle")
	}
}
