package stream

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A new stream whose first batch shows a mistake stops before the lake has
// a table; the same stream with the fix then commits every line. With
// NoFirstBatchCheck the mistaken batch is committed (to quarantine).
func TestFirstBatchCheckStopsBeforeTheLake(t *testing.T) {
	dir := t.TempDir()
	now := time.Now().UTC().Add(-time.Hour)
	for i := range 10 {
		appendLine(t, filepath.Join(dir, "a.ndjson"), fmt.Sprintf(`{"ts":%q,"page":"/a","value":1}`, now.Add(time.Duration(i)*time.Second).Format(time.RFC3339)))
	}
	lakeDir := filepath.Join(t.TempDir(), "lake")
	cfg := runnerConfig(t, dir, lakeDir)
	cfg.Once = true
	_, err := Run(context.Background(), cfg)
	var fb *FirstBatchError
	if !errors.As(err, &fb) {
		t.Fatalf("got %v, want a FirstBatchError", err)
	}
	if !strings.Contains(err.Error(), "--time-field ts") {
		t.Errorf("error %q lacks the fix", err)
	}
	if _, err := os.Stat(filepath.Join(lakeDir, "raw_events")); !os.IsNotExist(err) {
		t.Errorf("raw_events exists after the mistake (stat: %v)", err)
	}

	off := cfg
	off.NoFirstBatchCheck = true
	off.Lake = filepath.Join(t.TempDir(), "lake")
	sum, err := Run(context.Background(), off)
	if err != nil {
		t.Fatalf("without the check: %v", err)
	}
	if got := sum.Quarantined["missing_time"]; got != 10 {
		t.Errorf("without the check: quarantined missing_time %d, want 10", got)
	}

	cfg.Decoder.TimeField = "ts"
	sum, err = Run(context.Background(), cfg)
	if err != nil {
		t.Fatalf("with the fix: %v", err)
	}
	if sum.OK != 10 {
		t.Errorf("with the fix: ok %d, want 10", sum.OK)
	}
}

// An empty new stream still makes its lake (the check waits for a batch
// that never comes).
func TestFirstBatchCheckEmptyInputMakesTheLake(t *testing.T) {
	lakeDir := filepath.Join(t.TempDir(), "lake")
	cfg := runnerConfig(t, t.TempDir(), lakeDir)
	cfg.Once = true
	if _, err := Run(context.Background(), cfg); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(lakeDir, "raw_events", "_delta_log")); err != nil {
		t.Errorf("no raw_events table after an empty run: %v", err)
	}
}

// The missing-field warning is logged when the set changes, and while it
// persists at most every missingEvery; the status page shows the field.
func TestWarnMissingIsRateLimited(t *testing.T) {
	var buf strings.Builder
	r := &runner{cfg: RunnerConfig{Logger: slog.New(slog.NewTextHandler(&buf, nil))}}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	steps := []struct {
		fields []string
		at     time.Duration
		logged bool
	}{
		{[]string{"pth"}, 0, true},
		{[]string{"pth"}, time.Minute, false},
		{[]string{"pth", "v"}, 2 * time.Minute, true},
		{[]string{"pth", "v"}, 3 * time.Minute, false},
		{[]string{"pth", "v"}, 2*time.Minute + missingEvery, true},
		{nil, 13 * time.Minute, false},
		{[]string{"pth", "v"}, 14 * time.Minute, true},
	}
	for i, s := range steps {
		before := strings.Count(buf.String(), "\n")
		r.warnMissing(int64(i), s.fields, t0.Add(s.at))
		if got := strings.Count(buf.String(), "\n") > before; got != s.logged {
			t.Errorf("step %d (%v at %s): logged %v, want %v", i, s.fields, s.at, got, s.logged)
		}
	}
	if !strings.Contains(string(statusPage), "missing_fields") {
		t.Error("the status page does not show missing_fields")
	}
}
