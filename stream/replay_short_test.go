package stream

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"tidemark/lake"
	"tidemark/lake/store"
)

// TestReplayAfterCopytruncate: a batch logged but not committed when the
// process died, whose last lines were then truncated away before a restart
// (copytruncate copied the file, the writer appended, the stream read the
// new lines, the truncation dropped them: they are in no file). The restart
// replays what is still there, names the loss, and goes on; every line
// still in a file lands in raw_events exactly once. Before, the restart
// failed with "the input changed under the checkpoint", every time.
func TestReplayAfterCopytruncate(t *testing.T) {
	dir, lakeDir := t.TempDir(), t.TempDir()
	line := func(i int) string {
		return fmt.Sprintf(`{"event_time":"2026-01-01T00:00:%02d.%03dZ","page":"/u%d","value":1}`+"\n", i/100, i%100, i)
	}
	lines := func(from, to int) string {
		var b strings.Builder
		for i := from; i < to; i++ {
			b.WriteString(line(i))
		}
		return b.String()
	}
	write := func(name, data string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var logs bytes.Buffer
	run := func() error {
		cfg := runnerConfig(t, dir, lakeDir)
		cfg.Engine.Lateness = time.Minute
		cfg.MaxBatchRows = 100
		cfg.Once = true
		cfg.Logger = slog.New(slog.NewTextHandler(&logs, nil))
		_, err := Run(context.Background(), cfg)
		return err
	}
	write("app.log", lines(0, 200))
	if err := run(); err != nil {
		t.Fatal(err)
	}
	// The process dies after logging batch 1 (lines 100-199) and before
	// committing it: its commit entry is gone.
	ck := filepath.Join(lakeDir, "_checkpoints", "stream")
	commit := filepath.Join(ck, batchKey("commits", 1))
	if err := os.Remove(commit); err != nil {
		t.Fatal(err)
	}
	// copytruncate: the copy holds lines 0-149 (150-199 came after it and
	// were truncated away); the live file starts again with new lines.
	write("app.log.1", lines(0, 150))
	write("app.log", lines(1000, 1050))
	if err := run(); err != nil {
		t.Fatalf("restart after copytruncate: %v", err)
	}
	if !strings.Contains(logs.String(), "lost=50") || !strings.Contains(logs.String(), "app.log") {
		t.Errorf("the restart does not name the 50 lost lines and their file:\n%s", logs.String())
	}
	st, err := store.Open(context.Background(), lakeDir, store.S3Config{})
	if err != nil {
		t.Fatal(err)
	}
	lk, err := lake.Open(context.Background(), st, lake.Config{})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	err = lk.ScanRaw(context.Background(), lake.RawQuery{Columns: []string{lake.ColKey}}, func(b lake.RawBatch) error {
		for i := range b.N {
			seen[b.Key[i].String()]++
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var bad []string
	for _, i := range append(seq(0, 150), seq(1000, 1050)...) {
		if n := seen[fmt.Sprintf("/u%d", i)]; n != 1 {
			bad = append(bad, fmt.Sprintf("/u%d×%d", i, n))
		}
	}
	if len(bad) > 0 {
		t.Errorf("lines still in a file, not in raw_events exactly once: %d, e.g. %v", len(bad), bad[:min(5, len(bad))])
	}
	for k, n := range seen {
		if n > 1 {
			t.Errorf("%s in raw_events %d times", k, n)
		}
	}
}

func seq(from, to int) []int {
	s := make([]int, 0, to-from)
	for i := from; i < to; i++ {
		s = append(s, i)
	}
	return s
}
