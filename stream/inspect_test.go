package stream

import (
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"time"

	"tidemark"
	"tidemark/lake/store"
	"tidemark/stream/engine"
)

func openCheckpoint(t *testing.T, dir string) store.Store {
	t.Helper()
	st, err := store.Open(context.Background(), dir, store.S3Config{})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// TestInspect reads back what a --once run left in its checkpoint: the last
// batch, the watermark, each source's files and maximum, the open windows;
// then a batch logged but not committed shows as pending.
func TestInspect(t *testing.T) {
	dirA, dirB, lakeDir := t.TempDir(), t.TempDir(), t.TempDir()
	cfg := runnerConfig(t, dirA, lakeDir)
	cfg.Sources = append(cfg.Sources, dirB)
	cfg.Once = true
	cfg.Engine.SourceLateness = map[string]time.Duration{dirB: time.Second} // b's own budget: 1 s
	appendLine(t, filepath.Join(dirA, "a.ndjson"), `{"event_time":"2026-01-01T00:00:00.5Z","page":"/a","value":1}`)
	appendLine(t, filepath.Join(dirA, "a.ndjson"), `{"event_time":"2026-01-01T00:00:02.5Z","page":"/b","value":1}`)
	appendLine(t, filepath.Join(dirB, "b.ndjson"), `{"event_time":"2026-01-01T00:00:01.5Z","page":"/a","value":1}`)
	sum, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	// A second run with a batch of its own, so the watermark has moved.
	appendLine(t, filepath.Join(dirB, "b.ndjson"), `{"event_time":"2026-01-01T00:00:03.5Z","page":"/a","value":1}`)
	if _, err := Run(context.Background(), cfg); err != nil {
		t.Fatal(err)
	}
	ck := openCheckpoint(t, filepath.Join(lakeDir, "_checkpoints", "stream"))
	st, err := Inspect(context.Background(), ck)
	if err != nil {
		t.Fatal(err)
	}
	if st.StreamID == "" || st.Checkpoint != ck.String() {
		t.Errorf("id %q, checkpoint %q", st.StreamID, st.Checkpoint)
	}
	if st.Committed == nil || st.Committed.BatchID != sum.Batches || st.Committed.ReadTime.IsZero() {
		t.Fatalf("committed %+v, want batch %d with its read time", st.Committed, sum.Batches)
	}
	if st.Pending != nil {
		t.Errorf("pending %+v after a clean run", st.Pending)
	}
	if _, err := os.Stat("/proc/locks"); err == nil && (!st.Lock.Known || st.Lock.Held) {
		t.Errorf("lock %+v after the stream stopped", st.Lock)
	}
	// W = min(max a 00:02.5, max b 00:03.5 − b's 1 s) after the second run.
	if want := time.Date(2026, 1, 1, 0, 0, 2, 5e8, time.UTC); st.Watermark == nil || !st.Watermark.Equal(want) {
		t.Errorf("watermark %v, want %v", st.Watermark, want)
	}
	if len(st.Sources) != 2 || st.Sources[0].Name != dirA || st.Sources[1].Name != dirB {
		t.Fatalf("sources %+v", st.Sources)
	}
	a := st.Sources[0]
	if a.MaxEventTime == nil || !a.MaxEventTime.Equal(time.Date(2026, 1, 1, 0, 0, 2, 5e8, time.UTC)) || a.LastSeen == nil {
		t.Errorf("source a: max %v, last seen %v", a.MaxEventTime, a.LastSeen)
	}
	// Each source's watermark with its own budget: a 00:02.5 − 0, b 00:03.5 − 1 s.
	for i, want := range []time.Time{time.Date(2026, 1, 1, 0, 0, 2, 5e8, time.UTC), time.Date(2026, 1, 1, 0, 0, 2, 5e8, time.UTC)} {
		if w := st.Sources[i].Watermark; w == nil || !w.Equal(want) {
			t.Errorf("source %s: watermark %v, want %v", st.Sources[i].Name, w, want)
		}
	}
	if len(a.Files) != 1 || a.Files[0].Path != "a.ndjson" || a.Files[0].Offset != 2*62 {
		t.Errorf("source a files %+v, want a.ndjson at 124 (two lines)", a.Files)
	}
	// Open: [2s,3s) /b and [3s,4s) /a.
	if st.OpenWindows != 2 || st.StateRows != 2 || st.StateBytes <= 0 || st.EncodedStateBytes <= 0 {
		t.Errorf("open %d windows, %d rows, %d bytes (%d encoded)", st.OpenWindows, st.StateRows, st.StateBytes, st.EncodedStateBytes)
	}
	if st.OpenFrom == nil || !st.OpenFrom.Equal(time.Date(2026, 1, 1, 0, 0, 2, 0, time.UTC)) ||
		st.OpenTo == nil || !st.OpenTo.Equal(time.Date(2026, 1, 1, 0, 0, 4, 0, time.UTC)) {
		t.Errorf("open from %v to %v", st.OpenFrom, st.OpenTo)
	}

	// A write-ahead record without its commit: what kill -9 mid-batch leaves.
	c := &checkpoint{st: ck}
	next := st.Committed.BatchID + 1
	if err := c.write(context.Background(), batchKey("offsets", next), offsetsEntry{BatchID: next, ReadTime: 1, Rows: 3, SourceRows: map[string]int{dirA: 3}}); err != nil {
		t.Fatal(err)
	}
	st2, err := Inspect(context.Background(), ck)
	if err != nil {
		t.Fatal(err)
	}
	if st2.Pending == nil || st2.Pending.BatchID != next || st2.Pending.Rows != 3 || st2.Committed.BatchID != next-1 {
		t.Errorf("pending %+v, committed %+v", st2.Pending, st2.Committed)
	}
}

// TestInspectMissing: a location without a checkpoint says so.
func TestInspectMissing(t *testing.T) {
	_, err := Inspect(context.Background(), openCheckpoint(t, t.TempDir()))
	if !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("got %v, want an error matching fs.ErrNotExist", err)
	}
}

// FuzzInspect: whatever a checkpoint's commit record holds (a damaged
// file, a foreign one), Inspect returns an error or a status, never panics.
func FuzzInspect(f *testing.F) {
	good, _ := (&engine.State{Window: tidemark.WindowSpec{Size: 1e6, Slide: 1e6}, HasWatermark: true, Watermark: 5,
		Sources: []engine.SourceState{{Name: "s", HasEventTime: true, MaxEventTime: 9}},
		Open:    []tidemark.Result{{Window: tidemark.Window{Start: 1e6, End: 2e6}, Key: "k"}}}).MarshalBinary()
	seed, _ := json.Marshal(commitEntry{BatchID: 0, End: map[string]json.RawMessage{"s": json.RawMessage(`{"files":[{"path":"a","offset":3,"done":true}]}`)}, Engine: good})
	f.Add(seed)
	f.Add([]byte(`{"batch_id":0,"end":{"s":[1]},"engine":"AA=="}`))
	f.Add([]byte(`{`))
	f.Fuzz(func(t *testing.T, commit []byte) {
		dir := t.TempDir()
		st := openCheckpoint(t, dir)
		ctx := context.Background()
		if err := st.PutIfAbsent(ctx, "metadata.json", []byte(`{"id":"x"}`)); err != nil {
			t.Fatal(err)
		}
		if err := st.PutIfAbsent(ctx, batchKey("commits", 0), commit); err != nil {
			t.Fatal(err)
		}
		if s, err := Inspect(ctx, st); err == nil && s.StreamID != "x" {
			t.Errorf("id %q", s.StreamID)
		}
	})
}
