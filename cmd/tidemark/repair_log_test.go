package main

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// TestRepairDamagedLog truncates the newest raw_events commit of a lake the
// stream wrote and garbles window_results' _last_checkpoint: commands that
// read raw_events stop with a precise message; repair's dry run names the
// version that would be lost and changes nothing; repair --commit sets it
// aside under _delta_log/_damaged/, and reconcile and windows work again.
func TestRepairDamagedLog(t *testing.T) {
	if testing.Short() {
		t.Skip("full tier: runs the binary")
	}
	lakeDir := t.TempDir()
	if _, stderr, code := run(t, "stream", "--source", "testdata/example", "--key", "page", "--value", "value",
		"--arrival-field", "arrival_time", "--window", "10m", "--lateness", "5m", "--max-batch-rows", "10",
		"--once", "--drain", "--lake", lakeDir, "--progress", "/dev/null"); code != 0 {
		t.Fatalf("stream: exit %d\n%s", code, stderr)
	}
	logDir := filepath.Join(lakeDir, "raw_events", "_delta_log")
	commits, _ := filepath.Glob(filepath.Join(logDir, "*.json"))
	sort.Strings(commits)
	newest := commits[len(commits)-1]
	var version int
	fmt.Sscanf(filepath.Base(newest), "%d.json", &version)
	if err := os.Truncate(newest, 40); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(lakeDir, "window_results", "_delta_log", "_last_checkpoint"), []byte(`{"vers`), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, stderr, code := run(t, "reconcile", "--lake", lakeDir); code == 0 || !strings.Contains(stderr, filepath.Base(newest)) {
		t.Errorf("reconcile on a damaged log: exit %d, want an error naming %s:\n%s", code, filepath.Base(newest), stderr)
	}

	out, stderr, code := run(t, "repair", "--lake", lakeDir)
	if code != 0 {
		t.Fatalf("repair dry run: exit %d\n%s", code, stderr)
	}
	for _, want := range []string{
		fmt.Sprintf("raw_events: log damaged; readable up to version %d of %d", version-1, version),
		fmt.Sprintf("versions [%d] would be set aside and LOST (unreadable: [%d])", version, version),
		"what the unreadable versions held is unknown",
		"window_results: log damaged", "_last_checkpoint unreadable",
		"dry run: nothing changed",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("repair dry run: want %q in\n%s", want, out)
		}
	}
	if _, err := os.Stat(newest); err != nil {
		t.Errorf("dry run moved the damaged commit: %v", err)
	}

	out, stderr, code = run(t, "repair", "--lake", lakeDir, "--commit")
	if code != 0 {
		t.Fatalf("repair --commit: exit %d\n%s\n%s", code, out, stderr)
	}
	aside, _ := filepath.Glob(filepath.Join(logDir, "_damaged", "*"+filepath.Base(newest)))
	if _, err := os.Stat(newest); err == nil || len(aside) != 1 {
		t.Errorf("repair --commit: damaged commit still in the log (%v) or not set aside (%v)", err, aside)
	}
	if _, stderr, code := run(t, "reconcile", "--lake", lakeDir); code != 0 {
		t.Errorf("reconcile after repair: exit %d\n%s", code, stderr)
	}
	if _, stderr, code := run(t, "windows", "--lake", lakeDir); code != 0 {
		t.Errorf("windows after repair: exit %d\n%s", code, stderr)
	}
	out, _, _ = run(t, "repair", "--lake", lakeDir)
	if strings.Contains(out, "log damaged") {
		t.Errorf("second repair still finds damage:\n%s", out)
	}
}
