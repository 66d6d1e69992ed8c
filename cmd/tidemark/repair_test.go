package main

import (
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRepairCommand removes a raw_events file by hand from a lake the stream
// wrote: compact then fails naming the repair command; repair's dry run
// reports the lost file, its rows and event-time range and changes nothing;
// repair --commit removes the reference; compact and reconcile work again,
// and after reconcile window_results counts exactly the remaining raw rows.
func TestRepairCommand(t *testing.T) {
	lakeDir := t.TempDir()
	if _, stderr, code := run(t, "stream", "--source", "testdata/example", "--key", "page", "--value", "value",
		"--arrival-field", "arrival_time", "--window", "10m", "--lateness", "5m", "--max-batch-rows", "10",
		"--once", "--drain", "--lake", lakeDir, "--progress", "/dev/null"); code != 0 {
		t.Fatalf("stream: exit %d\n%s", code, stderr)
	}
	rawRows := func() int64 {
		t.Helper()
		out, stderr, code := run(t, "tables", "--lake", lakeDir, "--format", "json")
		if code != 0 {
			t.Fatalf("tables: %s", stderr)
		}
		for _, l := range lines(out) {
			var row map[string]any
			if err := json.Unmarshal([]byte(l), &row); err != nil {
				t.Fatalf("tables %q: %v", l, err)
			}
			if row["table"] == "raw_events" {
				n, _ := row["rows"].(float64)
				return int64(n)
			}
		}
		t.Fatalf("no raw_events in %s", out)
		return 0
	}
	before := rawRows()
	// The victim: a file of a partition with others, so compact has
	// something to merge with it.
	perDir := map[string][]string{}
	filepath.WalkDir(filepath.Join(lakeDir, "raw_events"), func(p string, d fs.DirEntry, err error) error {
		if err == nil && strings.HasSuffix(p, ".parquet") {
			perDir[filepath.Dir(p)] = append(perDir[filepath.Dir(p)], p)
		}
		return nil
	})
	var victim string
	for _, files := range perDir {
		if len(files) > 1 && victim == "" {
			victim = files[0]
		}
	}
	if victim == "" {
		t.Fatalf("no raw_events partition with two files: %v", perDir)
	}
	if err := os.Remove(victim); err != nil {
		t.Fatal(err)
	}

	_, stderr, code := run(t, "compact", "--lake", lakeDir, "--table", "raw_events")
	if code == 0 || !strings.Contains(stderr, "tidemark repair --table raw_events") {
		t.Errorf("compact of a table with a hole: exit %d, want an error naming the repair command:\n%s", code, stderr)
	}

	out, stderr, code := run(t, "repair", "--lake", lakeDir)
	if code != 0 {
		t.Fatalf("repair dry run: exit %d\n%s", code, stderr)
	}
	for _, want := range []string{"raw_events: 1 of", "(missing)", filepath.Base(victim), "event_time 2026-", "    lines from ", ", offsets ", "dry run: nothing changed", "quarantine:", "none missing"} {
		if !strings.Contains(out, want) {
			t.Errorf("repair dry run: want %q in\n%s", want, out)
		}
	}
	if got := rawRows(); got != before {
		t.Errorf("dry run changed raw_events: %d rows, want %d", got, before)
	}

	out, stderr, code = run(t, "repair", "--lake", lakeDir, "--table", "raw_events", "--commit", "--format", "json")
	if code != 0 {
		t.Fatalf("repair --commit: exit %d\n%s", code, stderr)
	}
	var rep struct {
		Lost []struct {
			Path  string
			Input *struct {
				MinOffset *int64 `json:"min_offset"`
				MinBatch  *int64 `json:"min_batch_id"`
			}
		} `json:"lost_files"`
		Rows    int64   `json:"lost_rows"`
		MinTime *string `json:"min_time"`
		Version *int64  `json:"version"`
		DryRun  bool    `json:"dry_run"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("repair json %q: %v", out, err)
	}
	if len(rep.Lost) != 1 || rep.Rows <= 0 || rep.MinTime == nil || rep.Version == nil || rep.DryRun ||
		rep.Lost[0].Input == nil || rep.Lost[0].Input.MinOffset == nil || rep.Lost[0].Input.MinBatch == nil {
		t.Errorf("repair --commit: got %s", out)
	}
	after := rawRows()
	if after != before-rep.Rows {
		t.Errorf("after repair: %d raw rows, want %d - %d lost", after, before, rep.Rows)
	}

	if _, stderr, code := run(t, "compact", "--lake", lakeDir); code != 0 {
		t.Errorf("compact after repair: exit %d\n%s", code, stderr)
	}
	out, stderr, code = run(t, "reconcile", "--lake", lakeDir, "--since", "87600h", "--format", "json")
	if code != 0 {
		t.Fatalf("reconcile after repair: exit %d\n%s", code, stderr)
	}
	var rec struct {
		Orphans int `json:"windows_orphaned"`
	}
	if err := json.Unmarshal([]byte(out), &rec); err != nil {
		t.Fatalf("reconcile report %q: %v", out, err)
	}
	// Every window with raw rows left equals its recomputation; windows
	// whose every row was lost have no raw rows to recompute from and are
	// reported by reconcile as orphaned (left as they were).
	counts := func(args ...string) map[string]int64 {
		t.Helper()
		out, stderr, code := run(t, append(args, "--lake", lakeDir, "--format", "json")...)
		if code != 0 {
			t.Fatalf("%s: %s", args[0], stderr)
		}
		m := map[string]int64{}
		for _, l := range lines(out) {
			var row struct {
				Start string `json:"window_start"`
				Page  string `json:"page"`
				Count int64  `json:"count"`
			}
			if err := json.Unmarshal([]byte(l), &row); err != nil {
				t.Fatal(err)
			}
			m[row.Start+" "+row.Page] = row.Count
		}
		return m
	}
	stored, exact := counts("windows"), counts("recompute")
	var sum int64
	orphans := 0
	for k, n := range stored {
		e, ok := exact[k]
		switch {
		case !ok:
			orphans++
		case e != n:
			t.Errorf("window %s: count %d after reconcile, recomputed %d", k, n, e)
		default:
			sum += n
		}
	}
	if sum != after || orphans != rec.Orphans {
		t.Errorf("after reconcile: windows with raw rows count %d rows (raw_events %d); %d windows without raw rows (reconcile says %d)", sum, after, orphans, rec.Orphans)
	}
	out, _, code = run(t, "repair", "--lake", lakeDir)
	if code != 0 || strings.Contains(out, "missing or damaged") {
		t.Errorf("second repair: exit %d\n%s", code, out)
	}
}

// TestVacuumRetentionFloor: a retention under 168h is refused with one line
// saying why and how to force it; forced, it runs.
func TestVacuumRetentionFloor(t *testing.T) {
	lakeDir := t.TempDir()
	if _, stderr, code := run(t, "stream", "--source", "testdata/example", "--key", "page", "--value", "value",
		"--arrival-field", "arrival_time", "--window", "10m", "--once", "--lake", lakeDir, "--progress", "/dev/null"); code != 0 {
		t.Fatalf("stream: exit %d\n%s", code, stderr)
	}
	_, stderr, code := run(t, "vacuum", "--lake", lakeDir, "--retain", "1h")
	if code == 0 || len(lines(stderr)) != 1 || !strings.Contains(stderr, "168h") || !strings.Contains(stderr, "--force") {
		t.Errorf("vacuum --retain 1h: exit %d, want one line naming 168h and --force:\n%s", code, stderr)
	}
	out, stderr, code := run(t, "vacuum", "--lake", lakeDir, "--retain", "0s", "--force")
	if code != 0 || !strings.Contains(out, "deleted 0 files") {
		t.Errorf("vacuum --retain 0s --force: exit %d\n%s%s", code, out, stderr)
	}
}
