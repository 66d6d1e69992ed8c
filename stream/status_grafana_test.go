package stream

import (
	"encoding/json"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"tidemark/stream/engine"
)

// TestGrafanaDashboard: scripts/grafana/tidemark-stream.json is valid JSON,
// queries only metrics the stream serves, and shows every one of them (the
// same panels as the status page, from Prometheus).
func TestGrafanaDashboard(t *testing.T) {
	b, err := os.ReadFile("../scripts/grafana/tidemark-stream.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(b, &dash); err != nil {
		t.Fatalf("dashboard: %v", err)
	}
	m := newMetrics(RunnerConfig{Name: "s", Clock: time.Now})
	m.observe(progress{InputRows: map[string]int64{"a": 1}, Quarantined: map[string]int64{}}, engine.BatchResult{}, []engine.SourceMark{{Name: "a", HasEventTime: true, HasWatermark: true}})
	fams, err := m.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	served := map[string]bool{}
	for _, f := range fams {
		served[f.GetName()] = true
	}
	used := map[string]bool{}
	var titles []string
	metric := regexp.MustCompile(`tidemark_[a-z_]+`)
	for _, p := range dash.Panels {
		titles = append(titles, p.Title)
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			for _, name := range metric.FindAllString(tg.Expr, -1) {
				for _, suf := range []string{"_bucket", "_sum", "_count"} {
					if base := strings.TrimSuffix(name, suf); base != name && served[base] {
						name = base
					}
				}
				if !served[name] {
					t.Errorf("panel %q queries %s, which the stream does not serve", p.Title, name)
				}
				used[name] = true
			}
		}
	}
	var missing []string
	for name := range served {
		if !used[name] {
			missing = append(missing, name)
		}
	}
	slices.Sort(missing)
	if len(missing) > 0 {
		t.Errorf("no panel shows %v", missing)
	}
	for _, want := range []string{"Watermark and max event time", "Input rows per second, per source", "Rows dropped by the watermark, per batch",
		"Quarantine by reason", "Open windows and state bytes", "Batch duration", "Idle sources", "Where the stream writes"} {
		if !slices.Contains(titles, want) {
			t.Errorf("no panel %q", want)
		}
	}
}
