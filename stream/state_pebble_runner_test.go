package stream

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestRunnerPebbleDeterministic: the same input with the same clock through
// the memory store and the Pebble store writes byte-identical checkpoint
// state files and commit entries, batch by batch, and the same windows;
// the Pebble run's second start (the drain) reuses its database.
func TestRunnerPebbleDeterministic(t *testing.T) {
	in := t.TempDir()
	var lines []string
	for i := range 6200 {
		ts := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(i) * 3 * time.Millisecond)
		lines = append(lines, fmt.Sprintf(`{"event_time":%q,"page":"u%d","value":%d}`, ts.Format(time.RFC3339Nano), (i*7919)%2500, i%100))
	}
	if err := os.WriteFile(filepath.Join(in, "events.ndjson"), []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	clock := func() time.Time { return time.Date(2026, 1, 1, 1, 0, 0, 0, time.UTC) }
	run := func(lakeDir string, state StateOptions, drain bool) string {
		cfg := runnerConfig(t, in, lakeDir)
		cfg.Engine.Window.Size, cfg.Engine.Window.Slide = 10_000_000, 10_000_000 // 10 s
		cfg.MaxBatchRows, cfg.Once, cfg.Drain, cfg.State, cfg.Clock = 400, true, drain, state, clock
		var out bytes.Buffer
		cfg.Print = &out
		if _, err := Run(context.Background(), cfg); err != nil {
			t.Fatal(err)
		}
		return out.String()
	}
	memLake, pebLake := t.TempDir(), t.TempDir()
	peb := StateOptions{Store: StatePebble, Dir: filepath.Join(t.TempDir(), "state")}
	memOut := run(memLake, StateOptions{}, false)
	pebOut := run(pebLake, peb, false)
	if memOut != pebOut {
		t.Fatal("the stores emitted different windows")
	}
	changelogs := 0
	for _, dir := range []string{"state", "commits"} {
		want, got := readFiles(t, filepath.Join(memLake, "_checkpoints", "stream", dir)), readFiles(t, filepath.Join(pebLake, "_checkpoints", "stream", dir))
		if len(want) == 0 || !slices.Equal(sortedKeys(got), sortedKeys(want)) {
			t.Fatalf("checkpoint %s/: the memory store wrote %v, the Pebble store %v", dir, sortedKeys(want), sortedKeys(got))
		}
		for name, data := range want {
			if !bytes.Equal(got[name], data) {
				t.Fatalf("checkpoint %s/%s differs between the stores", dir, name)
			}
			if strings.HasSuffix(name, ".changelog") {
				changelogs++
			}
		}
	}
	if changelogs == 0 {
		t.Fatalf("no changelog in the chain (%v): the run does not test changelogs", sortedKeys(readFiles(t, filepath.Join(memLake, "_checkpoints", "stream", "state"))))
	}
	if memOut, pebOut = run(memLake, StateOptions{}, true), run(pebLake, peb, true); memOut != pebOut || memOut == "" {
		t.Fatalf("the drains emitted different windows (%d and %d bytes)", len(memOut), len(pebOut))
	}
	want := readFiles(t, filepath.Join(memLake, "_checkpoints", "stream", "state"))
	for name, data := range readFiles(t, filepath.Join(pebLake, "_checkpoints", "stream", "state")) {
		if !bytes.Equal(want[name], data) {
			t.Fatalf("after the drain, checkpoint state/%s differs between the stores", name)
		}
	}
}

func readFiles(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		data, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		out[e.Name()] = data
	}
	return out
}

func sortedKeys(m map[string][]byte) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}
