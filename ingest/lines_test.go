package ingest

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// linesInput writes files whose event times interleave in runs of random
// length (so aligned reading switches files at every scale, from one line
// to thousands), with bad, blank and too-long lines among them.
func linesInput(t *testing.T, dir string, format string, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 1))
	base := time.Date(2026, 1, 1, 9, 0, 0, 0, time.UTC)
	for f := 0; f < 3; f++ {
		var b strings.Builder
		if format == FormatCSV {
			b.WriteString("event_time,page\n")
		}
		at := base
		for i := 0; i < 6000; i++ {
			if rng.IntN(500) == 0 {
				at = at.Add(time.Duration(rng.IntN(4000)) * time.Second) // a jump: long runs in one file
			}
			at = at.Add(time.Duration(rng.IntN(3000)) * time.Millisecond)
			ts := at.Format(time.RFC3339Nano)
			switch r := rng.IntN(200); {
			case r == 0:
				b.WriteString("not json\n")
			case r == 1:
				b.WriteString("\n")
			case r == 2:
				b.WriteString(strings.Repeat("x", 300) + "\n")
			case format == FormatCSV:
				fmt.Fprintf(&b, "%s,/p%d\n", ts, i%7)
			default:
				fmt.Fprintf(&b, `{"event_time":%q,"page":"/p%d"}`+"\n", ts, i%7)
			}
		}
		writeFile(t, filepath.Join(dir, fmt.Sprintf("f%d.log", f)), b.String())
	}
}

// readTrace reads a source in Reads of random size and renders every
// record and the Position after each Read.
func readTrace(t *testing.T, dir string, cfg SourceConfig, seed uint64) []string {
	t.Helper()
	s := openTest(t, dir, cfg, Position{})
	rng := rand.New(rand.NewPCG(seed, 2))
	var out []string
	for i := 0; ; i++ {
		if i > 100000 {
			t.Fatal("source never exhausted")
		}
		recs, err := s.Read(context.Background(), nil, 1+rng.IntN(3000))
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range recs {
			out = append(out, fmt.Sprintf("%s@%d %q t=%d k=%s %s %s", r.File, r.Offset, r.Payload, r.EventTime, r.Key, r.Reason, r.Err))
		}
		pos, err := json.Marshal(s.Position())
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, string(pos))
		if len(recs) == 0 && s.Exhausted() {
			return out
		}
	}
}

// Cutting lines a chunk at a time and decoding them on several cores gives
// the records, order and positions of reading one line at a time with one
// decoder.
func TestChunkedReadingMatchesLineByLine(t *testing.T) {
	for _, format := range []string{FormatNDJSON, FormatCSV} {
		for seed := uint64(1); seed <= 3; seed++ {
			t.Run(fmt.Sprintf("%s/%d", format, seed), func(t *testing.T) {
				dir := t.TempDir()
				linesInput(t, dir, format, seed)
				cfg := SourceConfig{Once: true, DecoderConfig: DecoderConfig{Format: format, Keys: []string{"page"}, MaxLineBytes: 200}}
				chunked := readTrace(t, dir, cfg, seed)

				first, most, workers := firstChunk, maxChunk, decodeWorkers
				firstChunk, maxChunk, decodeWorkers = 1, 1, func() int { return 1 }
				defer func() { firstChunk, maxChunk, decodeWorkers = first, most, workers }()
				lineByLine := readTrace(t, dir, cfg, seed)

				var records int
				for _, l := range lineByLine {
					if !strings.HasPrefix(l, "{") {
						records++
					}
				}
				if records != 3*6000 {
					t.Fatalf("line by line: got %d records, want %d", records, 3*6000)
				}
				if len(chunked) != len(lineByLine) {
					t.Fatalf("chunked: %d lines of trace, line by line %d", len(chunked), len(lineByLine))
				}
				for i := range chunked {
					if chunked[i] != lineByLine[i] {
						t.Fatalf("trace line %d: chunked %s, line by line %s", i, chunked[i], lineByLine[i])
					}
				}
			})
		}
	}
}

// After every Read, the source's scratch of cut lines holds no payload: a
// stale one would keep another file's read buffer alive for as long as the
// scratch lives (one buffer per file of an aligned read, ~7 MB of live heap
// over 50 files in BenchmarkLongRunMemory), and every file's lines ahead
// are its own copies.
func TestScratchHoldsNoPayloads(t *testing.T) {
	dir := t.TempDir()
	linesInput(t, dir, FormatNDJSON, 1)
	s := openTest(t, dir, SourceConfig{Once: true, DecoderConfig: DecoderConfig{Format: FormatNDJSON, Keys: []string{"page"}, MaxLineBytes: 200}}, Position{})
	d, ok := s.(*DirSource)
	if !ok {
		t.Fatalf("got a %T, want a *DirSource", s)
	}
	rng := rand.New(rand.NewPCG(1, 3))
	var records int
	for i := 0; ; i++ {
		if i > 100000 {
			t.Fatal("source never exhausted")
		}
		recs, err := s.Read(context.Background(), nil, 1+rng.IntN(3000))
		if err != nil {
			t.Fatal(err)
		}
		records += len(recs)
		for j, l := range d.scratch[:cap(d.scratch)] {
			if l.payload != nil {
				t.Fatalf("read %d: scratch line %d still holds payload %q", i, j, l.payload)
			}
		}
		if len(recs) == 0 && s.Exhausted() {
			break
		}
	}
	if records != 3*6000 {
		t.Errorf("got %d records, want %d", records, 3*6000)
	}
}
