package ingest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"tidemark"
)

// interleaved writes files whose events interleave: file i holds events at
// i, files+i, 2*files+i, ... seconds, so aligned reading visits every file
// once per round. It returns the records, sorted, as summary lines.
func interleaved(t *testing.T, dir string, files, lines int) []string {
	t.Helper()
	base := time.Date(2026, 1, 1, 9, 0, 0, 0, time.UTC)
	var all []string
	for i := range files {
		var b strings.Builder
		name := fmt.Sprintf("f%04d.log", i)
		for k := range lines {
			line := fmt.Sprintf(`{"event_time":%q}`, base.Add(time.Duration(k*files+i)*time.Second).Format(time.RFC3339))
			all = append(all, fmt.Sprintf("%s@%d:%s", name, b.Len(), line))
			b.WriteString(line + "\n")
		}
		writeFile(t, filepath.Join(dir, name), b.String())
	}
	slices.Sort(all)
	return all
}

// A source over many files holds at most maxOpen of them open, reopening
// the others at their position, and reads the same records in the same
// order as without the cap, each once.
func TestDirOpenFilesCapped(t *testing.T) {
	const files, lines, limit = 200, 5, 8
	if _, err := os.ReadDir("/proc/self/fd"); err != nil {
		t.Skip("no /proc/self/fd to count descriptors")
	}
	for _, once := range []bool{true, false} {
		dir := t.TempDir()
		events := interleaved(t, dir, files, lines)
		read := func(cap, batch int) []string {
			d := openTest(t, dir, SourceConfig{Once: once, PollOnly: true}, Position{}).(*DirSource)
			d.maxOpen = cap
			before := len(fds(t))
			var got []string
			for range files * lines {
				recs, err := d.Read(context.Background(), nil, batch)
				if err != nil {
					t.Fatal(err)
				}
				if open := len(compactOpened(slices.Clone(d.opened))); open > cap {
					t.Fatalf("cap %d: %d readers open", cap, open)
				}
				if grew := len(fds(t)) - before; grew > cap {
					t.Fatalf("cap %d: %d more descriptors open", cap, grew)
				}
				for _, r := range recs {
					got = append(got, fmt.Sprintf("%s@%d:%s", r.File, r.Offset, r.Payload))
				}
				if len(recs) == 0 {
					break
				}
			}
			return got
		}
		for _, batch := range []int{7, 1000} {
			capped, free := read(limit, batch), read(files*2, batch)
			if i := firstDiff(capped, free); i >= 0 {
				t.Errorf("once=%v batch %d: with the cap, records differ from record %d on (%d with, %d without)", once, batch, i, len(capped), len(free))
			}
			slices.Sort(capped)
			if !slices.Equal(capped, events) {
				t.Errorf("once=%v batch %d: got %d records, want each of the %d once", once, batch, len(capped), len(events))
			}
		}
	}
}

func fds(t *testing.T) []os.DirEntry {
	t.Helper()
	es, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return es
}

// A backlog of files each covering its own hour: the first Read takes the
// earliest file's records, not a line from every file (which made a lake
// partition per file of the first batch), and the watermark frontier is
// held by what was read, the unread files standing at their first event.
func TestDirPeekFirstBatch(t *testing.T) {
	dir := t.TempDir()
	base := time.Date(2025, 12, 20, 0, 0, 0, 0, time.UTC)
	for h := range 50 {
		var b strings.Builder
		for m := range 20 {
			fmt.Fprintf(&b, `{"event_time":%q}`+"\n", base.Add(time.Duration(h)*time.Hour+time.Duration(m)*time.Minute).Format(time.RFC3339))
		}
		writeFile(t, filepath.Join(dir, fmt.Sprintf("h%02d.log", 49-h)), b.String()) // path order against time order
	}
	s := openTest(t, dir, SourceConfig{Once: true}, Position{})
	recs, err := s.Read(context.Background(), nil, 10)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		if r.File != "h49.log" {
			t.Fatalf("first batch:\n%s\nwant the first 10 lines of h49.log (hour 0)", summary(recs))
		}
	}
	p := s.Position()
	if f, held := p.Frontier(); !held || f != base.Add(9*time.Minute).UnixMicro() {
		t.Errorf("frontier %s (held %v), want 00:09, the last event read", tidemark.FormatTime(f), held)
	}
	for _, f := range p.Files {
		if f.Path == "h00.log" && (!f.HasNext || f.Next != base.Add(49*time.Hour).UnixMicro() || f.Offset != 0) {
			t.Errorf("h00.log: %+v, want unread, next at hour 49", f)
		}
	}
}

// firstDiff returns the first index where a and b differ, -1 if equal.
func firstDiff(a, b []string) int {
	for i := range max(len(a), len(b)) {
		if i >= len(a) || i >= len(b) || a[i] != b[i] {
			return i
		}
	}
	return -1
}
