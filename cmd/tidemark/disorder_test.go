package main

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestLatenessReportAcrossFiles: the lateness report of a lake loaded from
// 8 files each holding an hour equals the report of the same events from
// one file: disorder percentiles, recommended budget and the what-if drops.
// Before, the 8-file lake reported hours of disorder (read-ahead counted
// as disorder) and its what-if replay dropped most rows at the budget the
// one-file lake drops none at.
func TestLatenessReportAcrossFiles(t *testing.T) {
	if testing.Short() {
		t.Skip("full tier: runs the binary")
	}
	rng := rand.New(rand.NewPCG(3, 1))
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	one, eight := t.TempDir(), t.TempDir()
	var all strings.Builder
	for h := range 8 {
		var b strings.Builder
		at := base.Add(time.Duration(h)*time.Hour + 10*time.Second)
		for i := range 2000 {
			at = at.Add(time.Duration(8+rng.IntN(300)) * time.Millisecond)
			ev := at
			if rng.IntN(10) == 0 {
				ev = at.Add(-time.Duration(rng.IntN(5000)) * time.Millisecond)
			}
			fmt.Fprintf(&b, `{"event_time":%q,"page":"/p%d","value":1}`+"\n", ev.Format(time.RFC3339Nano), i%5)
		}
		all.WriteString(b.String())
		if err := os.WriteFile(filepath.Join(eight, fmt.Sprintf("hour-%02d.ndjson", h)), []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(one, "all.ndjson"), []byte(all.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	report := func(src string) string {
		lakeDir := t.TempDir()
		if _, stderr, code := run(t, "stream", "--once", "--source", src, "--window", "1m", "--key", "page", "--max-batch-rows", "1000", "--lake", lakeDir); code != 0 {
			t.Fatalf("stream %s: exit %d\n%s", src, code, stderr)
		}
		out, stderr, code := run(t, "lateness", "--lake", lakeDir, "--format", "json", "--bad-after", "100000h")
		if code != 0 {
			t.Fatalf("lateness: exit %d\n%s", code, stderr)
		}
		return out
	}
	// Arrival times are the read clock of each run: drop what depends on them.
	clock := regexp.MustCompile(`(?s)"arrival_lag_s": \{.*?\},|"final_wait_s": [0-9.e+]+,`)
	want, got := clock.ReplaceAllString(report(one), ""), clock.ReplaceAllString(report(eight), "")
	if got != want {
		t.Errorf("the report of 8 hour-files differs from one file's:\n8 files:\n%s\none file:\n%s", got, want)
	}
	if !strings.Contains(want, `"recommended_lateness_s": 5`) {
		t.Errorf("one file: want a recommended lateness of 5 s:\n%s", want)
	}
}
