package lateness

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"encoding/xml"
	"errors"
	"flag"
	"io"
	"os"
	"slices"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite testdata/sample.svg")

func keysOf(m map[string]any) string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return strings.Join(ks, ",")
}

func TestJSONShape(t *testing.T) {
	d := makeLake(t, genConfig{n: 1_000, sources: []string{"s1", "s2"}, lateness: 10 * usSecond, seed: 7, maxBatch: 50})
	rep := run(t, d, Config{By: BySource})
	var buf bytes.Buffer
	if err := rep.WriteJSON(&buf); err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(buf.Bytes(), &doc); err != nil {
		t.Fatalf("decode %s: %v", buf.String(), err)
	}
	if got, want := keysOf(doc), "groups"; got != want {
		t.Errorf("top-level keys: got %s, want %s", got, want)
	}
	groups, _ := doc["groups"].([]any)
	if len(groups) != 2 {
		t.Fatalf("got %d groups, want 2", len(groups))
	}
	pct := "max,min,p50,p90,p95,p99,p999"
	for _, gv := range groups {
		g := gv.(map[string]any)
		if got, want := keysOf(g), "arrival_lag_s,bad_timestamps,buckets,disorder_s,group,keys_per_window,recommended_drop_fraction,recommended_lateness_s,rows,what_if"; got != want {
			t.Errorf("group keys: got %s, want %s", got, want)
		}
		for _, k := range []string{"arrival_lag_s", "disorder_s"} {
			if got := keysOf(g[k].(map[string]any)); got != pct {
				t.Errorf("%s keys: got %s, want %s", k, got, pct)
			}
		}
		if got, want := keysOf(g["buckets"].(map[string]any)), "10m_1h,1m_10m,ge_1h,lt_1m"; got != want {
			t.Errorf("bucket keys: got %s, want %s", got, want)
		}
		wi := g["what_if"].([]any)
		if len(wi) < 5 {
			t.Errorf("what_if has %d rows, want at least 5", len(wi))
		}
		for _, w := range wi {
			if got, want := keysOf(w.(map[string]any)), "dropped_event_rule,dropped_window_rule,final_wait_s,lateness_s,open_windows_per_key,state_bytes,state_rows"; got != want {
				t.Errorf("what_if keys: got %s, want %s", got, want)
			}
		}
		for _, k := range []string{"rows", "recommended_lateness_s", "recommended_drop_fraction"} {
			if _, ok := g[k].(float64); !ok {
				t.Errorf("%s: got %T, want a number", k, g[k])
			}
		}
	}
	var empty bytes.Buffer
	if err := (&Report{Groups: []Group{}}).WriteJSON(&empty); err != nil {
		t.Fatal(err)
	}
	if got, want := strings.Join(strings.Fields(empty.String()), ""), `{"groups":[]}`; got != want {
		t.Errorf("empty report: got %s, want %s", got, want)
	}
}

func TestCSVAndTable(t *testing.T) {
	d := makeLake(t, genConfig{n: 1_000, sources: []string{"s1", "s2", "s3"}, lateness: 10 * usSecond, seed: 8, maxBatch: 50})
	rep := run(t, d, Config{By: BySource})
	var buf bytes.Buffer
	if err := rep.WriteCSV(&buf); err != nil {
		t.Fatal(err)
	}
	recs, err := csv.NewReader(&buf).ReadAll()
	if err != nil {
		t.Fatalf("read csv: %v", err)
	}
	if len(recs) != 1+len(rep.Groups) {
		t.Fatalf("got %d csv rows, want header + %d", len(recs), len(rep.Groups))
	}
	head := strings.Join(recs[0], ",")
	for _, want := range []string{"group,rows,arrival_lag_min_s", "disorder_p999_s", "lt_1m,1m_10m,10m_1h,ge_1h,recommended_lateness_s,recommended_drop_fraction",
		"dropped_event_rule_10s,dropped_window_rule_10s", "dropped_window_rule_1h", "dropped_event_rule_recommended,dropped_window_rule_recommended"} {
		if !strings.Contains(head, want) {
			t.Errorf("csv header %s: missing %s", head, want)
		}
	}
	for i, r := range recs[1:] {
		if len(r) != len(recs[0]) {
			t.Errorf("csv row %d has %d fields, header %d", i, len(r), len(recs[0]))
		}
		if r[0] != rep.Groups[i].Group {
			t.Errorf("csv row %d: group %s, want %s", i, r[0], rep.Groups[i].Group)
		}
	}
	buf.Reset()
	if err := rep.WriteTable(&buf); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"group s1:", "arrival lag", "disorder", "p99.9", "late by (disorder)", "recommended --lateness", "(recommended)"} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, buf.String())
		}
	}
	if testing.Verbose() {
		t.Log("\n" + buf.String())
	}
}

// TestPlot checks the SVG is well-formed XML with its parts and equals the
// golden testdata/sample.svg; -update rewrites it (look at it:
// rsvg-convert it to PNG).
func TestPlot(t *testing.T) {
	d := makeLake(t, genConfig{n: 20_000, sources: []string{"s1"}, lateness: 30 * usSecond, seed: 9, maxBatch: 400})
	rep := run(t, d, Config{})
	var buf bytes.Buffer
	if err := rep.WritePlot(&buf); err != nil {
		t.Fatal(err)
	}
	dec := xml.NewDecoder(bytes.NewReader(buf.Bytes()))
	for {
		_, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("plot is not well-formed XML: %v", err)
		}
	}
	for _, want := range []string{"disorder", "arrival lag", "recommended --lateness", ">1s<", ">1m<", ">1h<", "share of rows later than x", "<path"} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("plot lacks %q", want)
		}
	}
	const golden = "testdata/sample.svg"
	if *update {
		if err := os.WriteFile(golden, buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(buf.Bytes(), want) {
		// Kept after the test (not t.TempDir) so it can be looked at.
		f, err := os.CreateTemp("", "sample-*.svg")
		if err != nil {
			t.Fatal(err)
		}
		_, err = f.Write(buf.Bytes())
		if err := errors.Join(err, f.Close()); err != nil {
			t.Fatal(err)
		}
		t.Errorf("plot differs from %s; this run's is %s (look at both; if the change is meant, rerun with -update)", golden, f.Name())
	}
}
