package stream

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestProgressCheckpointBytes: each progress line's checkpoint_bytes is
// exactly what its batch wrote to the checkpoint (write-ahead entry, state
// file, commit entry), and a resumed run continues the state chain with
// changelogs, reporting the same windows as one uninterrupted run.
func TestProgressCheckpointBytes(t *testing.T) {
	dir := t.TempDir()
	var lines []string
	for i := range 400 {
		lines = append(lines, fmt.Sprintf(`{"event_time":"2026-01-01T00:00:%02d.%03dZ","page":"/u%d","value":1}`, i/40, i%1000, i))
	}
	write := func(part string, from, to int) {
		var b bytes.Buffer
		for _, l := range lines[from:to] {
			b.WriteString(l + "\n")
		}
		if err := os.WriteFile(filepath.Join(dir, part), b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	run := func(lakeDir string) []progress {
		cfg := runnerConfig(t, dir, lakeDir)
		cfg.Engine.Lateness = time.Minute // everything stays open
		cfg.MaxBatchRows = 10
		cfg.Once = true
		var out bytes.Buffer
		cfg.Progress = &out
		if _, err := Run(context.Background(), cfg); err != nil {
			t.Fatal(err)
		}
		var ps []progress
		dec := json.NewDecoder(&out)
		for dec.More() {
			var p progress
			if err := dec.Decode(&p); err != nil {
				t.Fatal(err)
			}
			ps = append(ps, p)
		}
		return ps
	}
	lakeDir := t.TempDir()
	write("a.ndjson", 0, 200)
	first := run(lakeDir)
	ck := filepath.Join(lakeDir, "_checkpoints", "stream")
	last := first[len(first)-1]
	size := func(rel string) int64 {
		fi, err := os.Stat(filepath.Join(ck, rel))
		if err != nil {
			t.Fatal(err)
		}
		return fi.Size()
	}
	id := last.BatchID
	stateFile := fmt.Sprintf("state/%020d.changelog", id)
	if _, err := os.Stat(filepath.Join(ck, stateFile)); err != nil {
		stateFile = fmt.Sprintf("state/%020d.snapshot", id)
	}
	want := size(fmt.Sprintf("offsets/%020d.json", id)) + size(stateFile) + size(fmt.Sprintf("commits/%020d.json", id))
	if last.CkptBytes != want {
		t.Errorf("batch %d reported checkpoint_bytes %d, its files hold %d", id, last.CkptBytes, want)
	}
	// Resume with more input: the chain continues (changelogs, small
	// against the state), and the state matches one uninterrupted run.
	write("b.ndjson", 200, 400)
	second := run(lakeDir)
	whole := run(t.TempDir())
	got, wantLast := second[len(second)-1], whole[len(whole)-1]
	if got.StateRows != wantLast.StateRows || got.StateRows != 400 {
		t.Errorf("resumed run ends with %d state rows, an uninterrupted one with %d; want 400", got.StateRows, wantLast.StateRows)
	}
	changelogs := 0
	for _, p := range second {
		if p.CkptBytes <= 0 {
			t.Errorf("batch %d reported no checkpoint bytes", p.BatchID)
		}
		if _, err := os.Stat(filepath.Join(ck, fmt.Sprintf("state/%020d.changelog", p.BatchID))); err == nil {
			changelogs++
		}
	}
	if changelogs == 0 {
		t.Error("the resumed run wrote no changelogs")
	}
}
