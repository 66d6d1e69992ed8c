package main

import (
	"encoding/json"
	"strings"
	"testing"
)

// The three jobs end to end on the bundled example, as a user runs them: a
// stream with a small lateness budget drops late rows; reconcile corrects
// exactly the windows they touched, so window_results ends equal to a run
// that dropped nothing; a second reconcile changes nothing; the lateness
// report sees every row and recommends a budget that would have kept them.
func TestStreamReconcileLateness(t *testing.T) {
	lakeDir := t.TempDir()
	stream := func(lake, lateness string) {
		t.Helper()
		_, stderr, code := run(t, "stream", "--source", "testdata/example", "--key", "page", "--value", "value",
			"--arrival-field", "arrival_time", "--window", "10m", "--lateness", lateness, "--max-batch-rows", "10",
			"--once", "--drain", "--lake", lake, "--progress", "/dev/null")
		if code != 0 {
			t.Fatalf("stream: exit %d\n%s", code, stderr)
		}
	}
	stream(lakeDir, "5m")

	out, stderr, code := run(t, "reconcile", "--lake", lakeDir, "--format", "json")
	if code != 0 {
		t.Fatalf("reconcile: exit %d\n%s", code, stderr)
	}
	var rep struct {
		Corrected int `json:"windows_corrected"`
		Inserted  int `json:"windows_inserted"`
		Absorbed  int `json:"late_rows_absorbed"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("reconcile report %q: %v", out, err)
	}
	if rep.Absorbed != 3 || rep.Corrected+rep.Inserted == 0 {
		t.Errorf("first reconcile: %s", out)
	}
	out, _, code = run(t, "reconcile", "--lake", lakeDir, "--format", "json")
	if code != 0 || !strings.Contains(out, `"windows_corrected":0`) || !strings.Contains(out, `"windows_inserted":0`) {
		t.Errorf("second reconcile changed something: %s", out)
	}

	// The reference: the same input with a budget that drops nothing.
	refDir := t.TempDir()
	stream(refDir, "10h")
	values := func(lake string) string {
		t.Helper()
		csv, stderr, code := run(t, "windows", "--lake", lake, "--format", "csv")
		if code != 0 {
			t.Fatalf("windows: %s", stderr)
		}
		var rows []string
		for _, l := range lines(csv) {
			f := strings.Split(l, ",")
			rows = append(rows, strings.Join(f[:7], ",")) // window, page, count, sum, min, max
		}
		return strings.Join(rows, "\n")
	}
	if got, want := values(lakeDir), values(refDir); got != want {
		t.Errorf("window_results after reconcile:\n%s\nwant (nothing dropped):\n%s", got, want)
	}

	out, stderr, code = run(t, "lateness", "--lake", lakeDir, "--format", "json")
	if code != 0 {
		t.Fatalf("lateness: exit %d\n%s", code, stderr)
	}
	var lat struct {
		Groups []struct {
			Rows        int     `json:"rows"`
			Recommended float64 `json:"recommended_lateness_s"`
			WhatIf      []struct {
				Lateness float64 `json:"lateness_s"`
				Window   int     `json:"dropped_window_rule"`
			} `json:"what_if"`
		} `json:"groups"`
	}
	if err := json.Unmarshal([]byte(out), &lat); err != nil {
		t.Fatalf("lateness report: %v\n%s", err, out)
	}
	if len(lat.Groups) != 1 || lat.Groups[0].Rows != 60 {
		t.Fatalf("lateness groups: %s", out)
	}
	for _, w := range lat.Groups[0].WhatIf {
		if w.Lateness == 300 && w.Window != 3 {
			t.Errorf("what-if at 5m drops %d rows under the window rule; the stream dropped 3", w.Window)
		}
		if w.Lateness == lat.Groups[0].Recommended && w.Window != 0 {
			t.Errorf("the recommended budget %gs still drops %d rows", w.Lateness, w.Window)
		}
	}
}
