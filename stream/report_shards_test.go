package stream

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"tidemark"
	"tidemark/ingest"
	"tidemark/stream/engine"
)

// TestProgressOnSharedLake: a stream alone on its lake prints and reports as
// before (no "shards", no "shard_partial"); a second stream on the same lake
// says in its progress lines that it is one of 2 shards, the combined
// watermark and how many merged windows it committed against its own
// partials, and marks its --print lines as partials.
func TestProgressOnSharedLake(t *testing.T) {
	lakeDir := t.TempDir()
	base := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	host := func(h int) string {
		dir := t.TempDir()
		var b strings.Builder
		for i := range 600 { // 10 minutes, one event a second, the same pages
			fmt.Fprintf(&b, `{"event_time":%q,"page":"/p%d","value":%d}`+"\n", base.Add(time.Duration(i)*time.Second).Format(time.RFC3339Nano), i%2, h)
		}
		if err := os.WriteFile(filepath.Join(dir, "app.ndjson"), []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	spec, err := tidemark.NewWindowSpec(time.Minute, 0)
	if err != nil {
		t.Fatal(err)
	}
	run := func(name, src string) (printed, progress []string) {
		t.Helper()
		var out, prog bytes.Buffer
		cfg := RunnerConfig{
			Sources: []string{src}, Name: name, Lake: lakeDir,
			Decoder:      ingest.DecoderConfig{Keys: []string{"page"}, ValueField: "value", MaxFuture: -1},
			Engine:       engine.Config{Window: spec, Lateness: time.Minute},
			MaxBatchRows: 100, Once: true, Drain: true, Print: &out, Progress: &prog,
		}
		if _, err := Run(context.Background(), cfg); err != nil {
			t.Fatal(err)
		}
		return strings.Split(strings.TrimSpace(out.String()), "\n"), strings.Split(strings.TrimSpace(prog.String()), "\n")
	}
	printed, lines := run("host-0", host(0))
	for _, l := range append(printed, lines...) {
		if strings.Contains(l, "shard") {
			t.Fatalf("a stream alone on its lake mentions shards:\n%s", l)
		}
	}
	printed, lines = run("host-1", host(1))
	for _, l := range printed {
		if !strings.HasSuffix(l, `,"final":true,"shard_partial":true}`) {
			t.Errorf("--print on a shared lake: %s, want it marked as this shard's partial", l)
		}
	}
	var partials, merged, withOthers int
	for _, l := range lines {
		var p progress
		if err := json.Unmarshal([]byte(l), &p); err != nil {
			t.Fatal(err)
		}
		if p.Emitted == 0 {
			if p.Shards != nil {
				t.Errorf("batch %d emitted nothing but reports a merge: %s", p.BatchID, l)
			}
			continue
		}
		sh := p.Shards
		if sh == nil || sh.Count != 2 || sh.Active != 2 || sh.Partials != p.Emitted || sh.Merged != p.Emitted || sh.Watermark == "" {
			t.Fatalf("batch %d: shards %+v, want one of 2 active shards with a combined watermark, merging its %d partials: %s", p.BatchID, sh, p.Emitted, l)
		}
		partials += sh.Partials
		merged += sh.Merged
		withOthers += sh.WithOthers
	}
	// host-0 emitted every window of the 10 minutes with both pages first:
	// each of host-1's windows merges with its partial.
	if partials != 20 || merged != 20 || withOthers != 20 {
		t.Errorf("host-1: %d partials, %d merged, %d with host-0's; want 20 each", partials, merged, withOthers)
	}
}
