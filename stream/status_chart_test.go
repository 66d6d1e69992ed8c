package stream

import (
	"net"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// pageOf serves the status page over a status holding lines, as a running
// stream serves it, and returns the DOM headless Chromium drew from it.
func pageOf(t *testing.T, info StatusInfo, lines []progress) string {
	t.Helper()
	if testing.Short() {
		t.Skip("full tier: headless Chromium takes seconds")
	}
	bin := chromium(t)
	s := &status{info: info}
	for _, p := range lines {
		s.add(p, nil)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/api/progress", s.serveJSON)
	mux.HandleFunc("/", servePage)
	srv := httptest.NewServer(mux)
	defer srv.Close()
	return string(runChromium(t, bin, srv.URL+"/", "--dump-dom"))
}

// statusLines is n progress lines, a second apart, of two sources: web
// moves a second per batch, mobile stopped at 00:00:03.
func statusLines(n int, dropped func(i int) int64) []progress {
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	ts := func(d time.Duration) string { return base.Add(d).Format(time.RFC3339Nano) }
	var out []progress
	for i := range n {
		web := time.Duration(i+5) * time.Second
		out = append(out, progress{
			BatchID: int64(i), Timestamp: ts(time.Hour + time.Duration(i)*time.Second),
			InputRows: map[string]int64{"web": 10}, NumInputRows: 10, RowsPerSecond: 100,
			EventTime: eventTime{Min: ts(web - time.Second), Max: ts(web - time.Second), Avg: ts(web - time.Second), Watermark: ts(3 * time.Second)},
			Dropped:   dropped(i), Quarantined: map[string]int64{},
			Sources: map[string]sourceProgress{
				"web":    {MaxEventTime: ts(web), Watermark: ts(web - 2*time.Second)},
				"mobile": {MaxEventTime: ts(5 * time.Second), Watermark: ts(3 * time.Second)},
			},
			DurationMs: 10,
		})
	}
	return out
}

var chartInfo = StatusInfo{Name: "stream", Lake: "lake", Checkpoint: "ck", Sources: []string{"web", "mobile"},
	Window: "10s", Lateness: "2s", LateRule: "window", Policy: "min", Started: "2026-01-01T01:00:00Z", HistoryLimit: historyBatches}

// bars returns the bars of one chart: value, top and height.
func bars(t *testing.T, dom, chart string) (out [][3]float64, labels []string) {
	t.Helper()
	m := regexp.MustCompile(`(?s)<svg id="` + chart + `"[^>]*>(.*?)</svg>`).FindStringSubmatch(dom)
	if m == nil {
		t.Fatalf("no #%s in the page", chart)
	}
	for _, b := range regexp.MustCompile(`<rect class="bar" data-value="([^"]*)"[^>]* y="([^"]*)"[^>]* height="([^"]*)"`).FindAllStringSubmatch(m[1], -1) {
		var v [3]float64
		for i := range v {
			v[i], _ = strconv.ParseFloat(b[i+1], 64)
		}
		out = append(out, v)
	}
	for _, l := range regexp.MustCompile(`<text[^>]*text-anchor="end"[^>]*>([^<]*)</text>`).FindAllStringSubmatch(m[1], -1) {
		labels = append(labels, l[1])
	}
	return out, labels
}

// TestStatusChartNothingDropped: with no row dropped in any batch, the
// dropped-rows chart has no bar height and no axis below zero (it drew
// full-height bars down to -1 when every value was 0); with some drops, a
// 0 is a bar of no height on the zero line and the others rise from it.
func TestStatusChartNothingDropped(t *testing.T) {
	dom := pageOf(t, chartInfo, statusLines(12, func(int) int64 { return 0 }))
	got, labels := bars(t, dom, "chart-dropped")
	if len(got) != 12 {
		t.Fatalf("%d bars, want 12", len(got))
	}
	for _, b := range got {
		if b[2] != 0 {
			t.Errorf("a batch dropping %v rows has a bar %v high, want 0", b[0], b[2])
		}
	}
	for _, l := range labels {
		if strings.HasPrefix(l, "-") || strings.HasPrefix(l, "−") {
			t.Errorf("the y axis has a label %q below zero; labels %q", l, labels)
		}
	}

	dom = pageOf(t, chartInfo, statusLines(12, func(i int) int64 { return int64(i % 3) }))
	got, _ = bars(t, dom, "chart-dropped")
	var zeroTop float64
	for _, b := range got {
		if b[0] == 0 {
			if b[2] != 0 {
				t.Errorf("a batch dropping 0 rows has a bar %v high", b[2])
			}
			zeroTop = b[1]
		}
	}
	for _, b := range got {
		if b[0] > 0 && (b[2] <= 0 || b[1]+b[2] != zeroTop) {
			t.Errorf("a bar of %v rows spans %v..%v, want it to rise from the zero line at %v", b[0], b[1], b[1]+b[2], zeroTop)
		}
	}
}

// TestStatusBehindGlobalMax: "behind global max" is the newest event time
// any source has seen minus the source's: 0 for the source ahead, the gap
// for the one that stopped, never negative (it was the last batch's max
// minus the source's all-time max).
func TestStatusBehindGlobalMax(t *testing.T) {
	dom := pageOf(t, chartInfo, statusLines(12, func(int) int64 { return 0 }))
	m := regexp.MustCompile(`(?s)<table id="sources">.*?<tbody>(.*?)</tbody>`).FindStringSubmatch(dom)
	if m == nil {
		t.Fatalf("no sources table:\n%s", dom)
	}
	behind := map[string]string{}
	for _, r := range regexp.MustCompile(`<tr><td>([^<]*)</td><td>[^<]*</td><td>[^<]*</td><td>([^<]*)</td>`).FindAllStringSubmatch(m[1], -1) {
		behind[r[1]] = r[2]
	}
	// web's newest event: 00:00:16 (batch 11); mobile stopped at 00:00:05.
	if behind["web"] != "0" || behind["mobile"] != "11s" {
		t.Errorf("behind global max: got %v, want web 0, mobile 11s", behind)
	}
}

// TestStatusPageNamesStall: a progress line with a stall puts the holder
// in the badge and explains it (file, silence, the --idle-timeout that
// would release it); without one the explanation is hidden.
func TestStatusPageNamesStall(t *testing.T) {
	lines := statusLines(3, func(int) int64 { return 0 })
	lines[2].Stalled = &Stall{Source: "mobile", File: "day-01.log", Since: "2026-01-01T01:00:00Z", For: "12m0s", Silent: "12m5s",
		HeldAt: "2026-01-01T00:00:05Z", IdleTimeout: "0s", Release: "--idle-timeout 10m0s"}
	dom := pageOf(t, chartInfo, lines)
	m := regexp.MustCompile(`<div id="stall" class="alert"[^>]*>([^<]*)</div>`).FindStringSubmatch(dom)
	if m == nil {
		t.Fatalf("no stall explanation in the page")
	}
	for _, want := range []string{"file day-01.log of source mobile holds it", "no new line for 12m5s", "--idle-timeout 10m0s"} {
		if !strings.Contains(m[1], want) {
			t.Errorf("the stall explanation %q lacks %q", m[1], want)
		}
	}
	if !strings.Contains(dom, "watermark stalled 12m0s: held by day-01.log") {
		t.Errorf("the badge does not name the holder")
	}
	dom = pageOf(t, chartInfo, lines[:2])
	if !regexp.MustCompile(`<div id="stall" class="alert" hidden=""></div>`).MatchString(dom) {
		t.Errorf("no stall, yet the explanation shows")
	}
}

// TestMetricsFallback: with fallback an address in use is replaced by a
// free port of the same host; without it, the stream fails with the flag's
// name.
func TestMetricsFallback(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	m := newMetrics(RunnerConfig{Clock: time.Now})
	if _, err := m.serve(taken.Addr().String(), false); err == nil || !strings.Contains(err.Error(), "--metrics-addr") {
		t.Fatalf("an address in use without fallback: got %v, want an error naming --metrics-addr", err)
	}
	addr, err := m.serve(taken.Addr().String(), true)
	if err != nil {
		t.Fatalf("fallback: %v", err)
	}
	defer m.stop()
	if addr == taken.Addr().String() || !strings.HasPrefix(addr, "127.0.0.1:") {
		t.Errorf("fallback serves on %s, want another port of 127.0.0.1 than %s", addr, taken.Addr())
	}
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("GET /metrics on the fallback: %v %v", resp, err)
	}
	resp.Body.Close()
}
