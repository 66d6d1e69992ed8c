package stream

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"tidemark"
	"tidemark/ingest"
	"tidemark/lake"
	"tidemark/lake/store"
	"tidemark/stream/engine"
)

// A new stream whose first batch has JSON number `status` keys makes a
// BIGINT status column (remembered by the lake), prints "status":500
// unquoted on --print, and a later run quarantines a string status as
// bad_key instead of losing it or storing it as text.
func TestTypedKeysFromFirstBatch(t *testing.T) {
	dir := t.TempDir()
	lakeDir := filepath.Join(t.TempDir(), "lake")
	spec, err := tidemark.NewWindowSpec(time.Second, 0)
	if err != nil {
		t.Fatal(err)
	}
	base := time.Now().UTC().Add(-time.Hour).Truncate(time.Minute)
	for i := range 6 {
		status := []string{"200", "500", "500.0"}[i%3]
		appendLine(t, filepath.Join(dir, "a.ndjson"), fmt.Sprintf(`{"event_time":%q,"status":%s,"ok":%t,"value":1}`,
			base.Add(time.Duration(i)*time.Second).Format(time.RFC3339), status, i%2 == 0))
	}
	run := func() (*Summary, string) {
		t.Helper()
		var out bytes.Buffer
		cfg := RunnerConfig{
			Sources: []string{dir}, Lake: lakeDir,
			Decoder: ingest.DecoderConfig{Keys: []string{"status", "ok"}, ValueField: "value", MaxFuture: -1},
			Engine:  engine.Config{Window: spec, Lateness: time.Minute},
			Once:    true, Drain: true, Print: &out,
		}
		sum, err := Run(context.Background(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		return sum, out.String()
	}
	sum, printed := run()
	if sum.OK != 6 {
		t.Errorf("ok %d, want 6", sum.OK)
	}
	if !strings.Contains(printed, `"status":500,"ok":false`) || !strings.Contains(printed, `"status":200,"ok":true`) || strings.Contains(printed, `"500"`) {
		t.Errorf("--print does not show typed keys unquoted:\n%s", printed)
	}
	st, err := store.OpenDir(lakeDir)
	if err != nil {
		t.Fatal(err)
	}
	lk, err := lake.Open(context.Background(), st, lake.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if got := lk.Config().KeyTypes; len(got) != 2 || got[0] != lake.KeyLong || got[1] != lake.KeyBool {
		t.Fatalf("key types %v, want [long boolean]", got)
	}

	appendLine(t, filepath.Join(dir, "a.ndjson"), fmt.Sprintf(`{"event_time":%q,"status":"oops","ok":true,"value":1}`, base.Add(10*time.Second).Format(time.RFC3339)))
	appendLine(t, filepath.Join(dir, "a.ndjson"), fmt.Sprintf(`{"event_time":%q,"status":404,"ok":true,"value":1}`, base.Add(11*time.Second).Format(time.RFC3339)))
	appendLine(t, filepath.Join(dir, "a.ndjson"), fmt.Sprintf(`{"event_time":%q,"status":1.5,"ok":true,"value":1}`, base.Add(12*time.Second).Format(time.RFC3339)))
	sum, _ = run()
	if sum.Quarantined[tidemark.ReasonBadKey] != 2 || sum.Lines != 3 {
		t.Errorf("second run: lines %d, bad_key %d (%v), want 3 lines, 2 bad_key", sum.Lines, sum.Quarantined[tidemark.ReasonBadKey], sum.Quarantined)
	}
	// A new stream (another name, so another checkpoint) on this lake
	// takes its types: its first batch's string status is bad_key too.
	other := t.TempDir()
	appendLine(t, filepath.Join(other, "b.ndjson"), fmt.Sprintf(`{"event_time":%q,"status":"fine","ok":true,"value":1}`, base.Format(time.RFC3339)))
	appendLine(t, filepath.Join(other, "b.ndjson"), fmt.Sprintf(`{"event_time":%q,"status":201,"ok":false,"value":1}`, base.Format(time.RFC3339)))
	sum, err = Run(context.Background(), RunnerConfig{
		Sources: []string{other}, Lake: lakeDir, Name: "other",
		Decoder: ingest.DecoderConfig{Keys: []string{"status", "ok"}, ValueField: "value", MaxFuture: -1},
		Engine:  engine.Config{Window: spec, Lateness: time.Minute},
		Once:    true, Drain: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	if sum.Quarantined[tidemark.ReasonBadKey] != 1 || sum.OK+sum.Late != 1 {
		t.Errorf("a new stream on the typed lake: ok %d late %d quarantined %v, want 1 valid and 1 bad_key", sum.OK, sum.Late, sum.Quarantined)
	}
	var reasons []string
	if err := lk.ScanQuarantine(context.Background(), func(q lake.QuarantineRow) error {
		reasons = append(reasons, q.Reason+": "+q.Error)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(reasons) != 3 || !strings.Contains(reasons[0], "BIGINT") {
		t.Errorf("quarantine rows %q, want 3 bad_key naming BIGINT", reasons)
	}
}
