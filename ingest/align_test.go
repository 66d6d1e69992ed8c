package ingest

import (
	"bytes"
	"compress/gzip"
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"tidemark"
)

// at is 2026-01-01T09:<mm:ss> in µs, the time of ev(mmss).
func at(t *testing.T, mmss string) int64 {
	t.Helper()
	x, err := time.Parse(time.RFC3339, "2026-01-01T09:"+mmss+"Z")
	if err != nil {
		t.Fatal(err)
	}
	return x.UnixMicro()
}

func appendTo(t *testing.T, name, data string) {
	t.Helper()
	f, err := os.OpenFile(name, os.O_APPEND|os.O_WRONLY|os.O_CREATE, 0o644)
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

// Which files of a live directory hold the source's watermark back, on an
// injected clock: a live file read to its end holds it with its newest
// event until it has had no line for IdleTimeout; a file with unread data
// holds it (at MinTime before its first event); a file rotated away or
// compressed stops once read to its end.
func TestFrontierLiveFiles(t *testing.T) {
	dir := t.TempDir()
	now := fixedNow
	cfg := SourceConfig{Clock: func() time.Time { return now }, PollOnly: true, Rescan: time.Hour, IdleTimeout: time.Minute}
	s := openTest(t, dir, cfg, Position{})
	d := s.(*DirSource)
	ctx := context.Background()
	a, b := filepath.Join(dir, "a.log"), filepath.Join(dir, "b.log")
	read := func() string {
		t.Helper()
		if err := d.Rescan(ctx); err != nil {
			t.Fatal(err)
		}
		recs, err := s.Read(ctx, nil, 100)
		if err != nil {
			t.Fatal(err)
		}
		return summary(recs)
	}
	frontier := func(step string, want int64, wantHeld bool) {
		t.Helper()
		got, held := s.Position().Frontier()
		if held != wantHeld || held && got != want {
			t.Errorf("%s: frontier %s (held %v), want %s (held %v)", step, tidemark.FormatTime(got), held, tidemark.FormatTime(want), wantHeld)
		}
	}

	frontier("empty directory", 0, false)
	appendTo(t, a, ev("01:00")+"\n"+ev("02:00")+"\n")
	appendTo(t, b, ev("05:00")+"\n")
	if err := d.Rescan(ctx); err != nil {
		t.Fatal(err)
	}
	frontier("unread files, no event yet", tidemark.MinTime, true)
	if got, want := read(), "a.log@0:"+ev("01:00")+"\na.log@38:"+ev("02:00")+"\nb.log@0:"+ev("05:00")+"\n"; got != want {
		t.Errorf("aligned read: got\n%s\nwant\n%s", got, want)
	}
	frontier("both live, read to their end", at(t, "02:00"), true)

	now = now.Add(30 * time.Second)
	appendTo(t, b, ev("06:00")+"\n")
	read()
	frontier("a not idle yet", at(t, "02:00"), true)
	now = now.Add(31 * time.Second) // a: 61 s without a line; b: 31 s
	frontier("a idle", at(t, "06:00"), true)
	appendTo(t, a, ev("07:00")+"\n")
	if err := d.Rescan(ctx); err != nil {
		t.Fatal(err)
	}
	frontier("a grew, not read yet", at(t, "02:00"), true)
	read()
	frontier("a read again", at(t, "06:00"), true)

	// Rotation: a.log renamed away stops holding once read to its end;
	// the new a.log holds before its first event.
	if err := os.Rename(a, a+".1"); err != nil {
		t.Fatal(err)
	}
	now = now.Add(10 * time.Second)
	appendTo(t, b, ev("08:00")+"\n")
	read()
	frontier("a.log.1 rotated away", at(t, "08:00"), true)
	appendTo(t, a, "not json\n")
	read()
	frontier("new a.log with only a bad line", at(t, "08:00"), true)

	// A compressed file is immutable: read to its end, it does not hold.
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write([]byte(ev("00:30") + "\n"))
	zw.Close()
	writeFile(t, filepath.Join(dir, "old.log.gz"), gz.String())
	if err := d.Rescan(ctx); err != nil {
		t.Fatal(err)
	}
	frontier("unread compressed file", tidemark.MinTime, true)
	read()
	frontier("compressed file read to its end", at(t, "08:00"), true)

	// Everything idle: nothing holds; a line brings its file back.
	now = now.Add(2 * time.Minute)
	frontier("all idle", 0, false)
	appendTo(t, b, ev("09:00")+"\n")
	read()
	frontier("b active again", at(t, "09:00"), true)
}

// Without an idle timeout a live file holds the watermark for good; under
// Once every file stops holding once read to its end.
func TestFrontierNoIdleAndOnce(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "a.log"), ev("01:00")+"\n")
	writeFile(t, filepath.Join(dir, "b.log"), ev("03:00")+"\n"+ev("04:00")+"\n")
	now := fixedNow
	live := openTest(t, dir, SourceConfig{Clock: func() time.Time { return now }, PollOnly: true}, Position{})
	if _, err := live.Read(context.Background(), nil, 100); err != nil {
		t.Fatal(err)
	}
	now = now.Add(1000 * time.Hour)
	if got, held := live.Position().Frontier(); !held || got != at(t, "01:00") {
		t.Errorf("live, no idle timeout: frontier %s (held %v), want a.log's 09:01", tidemark.FormatTime(got), held)
	}
	once := openTest(t, dir, SourceConfig{Once: true}, Position{})
	recs, err := once.Read(context.Background(), nil, 2)
	if err != nil {
		t.Fatal(err)
	}
	if got, held := once.Position().Frontier(); len(recs) != 2 || !held || got != at(t, "03:00") {
		t.Errorf("once, b.log half read: frontier %s (held %v), want b.log's 09:03", tidemark.FormatTime(got), held)
	}
	if _, err := once.Read(context.Background(), nil, 100); err != nil {
		t.Fatal(err)
	}
	if got, held := once.Position().Frontier(); held {
		t.Errorf("once, all read: frontier %s held, want none", tidemark.FormatTime(got))
	}
	// The position carries the per-file progress: a source reopened from
	// it resumes the alignment where it was.
	p := once.Position()
	if p.Files[0].Max != at(t, "01:00") || !p.Files[0].HasMax || p.Files[1].Max != at(t, "04:00") {
		t.Errorf("position lacks per-file event time: %+v", p.Files)
	}
}

// A batch replayed from its start position with Limit at its logged end
// reads the same records in the same order, however the Reads are cut,
// even when the files grew since and a new file appeared.
func TestLimitReplaysTheSameOrder(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "a.log"), ev("01:00")+"\n"+ev("03:00")+"\n"+ev("05:00")+"\n"+ev("07:00")+"\n")
	writeFile(t, filepath.Join(dir, "b.log"), ev("02:00")+"\n"+ev("02:30")+"\n"+ev("06:00")+"\n")
	writeFile(t, filepath.Join(dir, "c.log"), "bad\n"+ev("04:00")+"\n")
	cfg := SourceConfig{Clock: fixedClock, PollOnly: true}
	s := openTest(t, dir, cfg, Position{})
	first, err := s.Read(context.Background(), nil, 2)
	if err != nil {
		t.Fatal(err)
	}
	start := s.Position()
	batch, err := s.Read(context.Background(), nil, 6)
	if err != nil {
		t.Fatal(err)
	}
	end := s.Position()
	if len(first) != 2 || len(batch) != 6 {
		t.Fatalf("read %d then %d records, want 2 and 6", len(first), len(batch))
	}
	appendTo(t, filepath.Join(dir, "b.log"), ev("02:40")+"\n") // grew after the batch
	writeFile(t, filepath.Join(dir, "0new.log"), ev("00:10")+"\n")
	for _, chunk := range []int{1, 4, 100} {
		r := openTest(t, dir, cfg, start)
		r.(Limiter).Limit(end)
		var got []tidemark.Record
		for {
			recs, err := r.Read(context.Background(), nil, chunk)
			if err != nil {
				t.Fatal(err)
			}
			if len(recs) == 0 {
				break
			}
			got = append(got, recs...)
		}
		if summary(got) != summary(batch) {
			t.Errorf("chunks of %d: got\n%s\nwant\n%s", chunk, summary(got), summary(batch))
		}
	}
}

// A file that vanished (or cannot be opened) after Open does not stall a
// --once run, and does not hold the watermark of a live one.
func TestUnreadableFileDoesNotHold(t *testing.T) {
	for _, once := range []bool{true, false} {
		dir := t.TempDir()
		writeFile(t, filepath.Join(dir, "a.log"), ev("01:00")+"\n")
		writeFile(t, filepath.Join(dir, "b.log"), ev("02:00")+"\n")
		s := openTest(t, dir, SourceConfig{Once: once, PollOnly: true, Clock: fixedClock}, Position{})
		if err := os.Remove(filepath.Join(dir, "a.log")); err != nil {
			t.Fatal(err)
		}
		var got []tidemark.Record
		for range 10 {
			recs, err := s.Read(context.Background(), nil, 100)
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, recs...)
		}
		if len(got) != 1 || got[0].File != "b.log" {
			t.Errorf("once=%v: got\n%s\nwant b.log's line", once, summary(got))
		}
		if once && !s.Exhausted() {
			t.Errorf("once: not exhausted with a.log gone")
		}
		if f, held := s.Position().Frontier(); once && held || !once && (!held || f != at(t, "02:00")) {
			t.Errorf("once=%v: frontier %s held %v, want b.log alone (none under once)", once, tidemark.FormatTime(f), held)
		}
	}
}
