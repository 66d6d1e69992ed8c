package stream

import (
	"context"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

var updateScreenshot = flag.Bool("update-screenshot", false, "save the status page screenshot to ../docs/status-page.png")

// chromium finds headless Chromium; without it the browser test skips,
// unless TIDEMARK_REQUIRE_BROWSER=1 (scripts/test.sh installs it and sets
// that), when it fails.
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("TIDEMARK_REQUIRE_BROWSER") == "1" {
		t.Fatal("no chromium on PATH and TIDEMARK_REQUIRE_BROWSER=1 (apt-get install chromium)")
	}
	t.Skip("no chromium on PATH (set TIDEMARK_REQUIRE_BROWSER=1 to fail instead)")
	return ""
}

// runChromium runs headless Chromium on url with extra flags; the virtual
// time budget lets the page's script fetch /api/progress and draw before
// Chromium dumps or shoots it.
func runChromium(t *testing.T, bin, url string, extra ...string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	args := append([]string{"--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--no-first-run",
		"--user-data-dir=" + t.TempDir(), "--virtual-time-budget=5000"}, extra...)
	cmd := exec.CommandContext(ctx, bin, append(args, url)...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("chromium %s: %v\n%s", strings.Join(extra, " "), err, stderr.String())
	}
	return out
}

// TestStatusPageInBrowser opens the status page of a running stream in
// headless Chromium and checks that the script drew the charts and that
// the figures are those of the last progress line; it saves a screenshot
// (with -update-screenshot into docs/, for the README).
func TestStatusPageInBrowser(t *testing.T) {
	if testing.Short() {
		t.Skip("full tier: runs a stream and headless Chromium")
	}
	bin := chromium(t)
	addr, log, stop := statusStream(t)
	defer stop()
	dom := string(runChromium(t, bin, "http://"+addr+"/", "--dump-dom"))
	// The page shows the batch it last fetched (data-batch on <body>);
	// compare with that batch's progress line.
	lines, _ := log.snapshot()
	m := regexp.MustCompile(`<body data-batch="(\d+)"`).FindStringSubmatch(dom)
	if m == nil {
		t.Fatalf("the page drew no batch:\n%s", dom)
	}
	shown, _ := strconv.ParseInt(m[1], 10, 64)
	var last progress
	n := 0
	for i, p := range lines {
		if p.BatchID == shown {
			last, n = p, i+1
		}
	}
	if n == 0 {
		t.Fatalf("the page shows batch %d, not among the %d progress lines", shown, len(lines))
	}
	if n < len(lines) {
		t.Logf("the stream wrote %d more lines after the page's fetch", len(lines)-n)
	}
	lines = lines[:n]

	text := func(id string) string {
		m := regexp.MustCompile(`id="` + id + `"[^>]*>([^<]*)<`).FindStringSubmatch(dom)
		if m == nil {
			t.Errorf("page has no #%s", id)
			return ""
		}
		return m[1]
	}
	for _, c := range []struct{ id, want string }{
		{"fig-watermark", last.EventTime.Watermark},
		{"fig-max", last.EventTime.Max},
		{"fig-batch", strconv.FormatInt(last.BatchID, 10)},
		{"fig-state-rows", strconv.Itoa(last.StateRows)},
		{"fig-dropped", strconv.FormatInt(last.Dropped, 10)},
		{"fig-idle", "1 (" + statusSourceName(t, last, true) + ")"},
		{"fig-gap", "2s"},
		{"state", "watermark moving"},
	} {
		if got := text(c.id); got != c.want {
			t.Errorf("#%s shows %q, want %q (from the last progress line)", c.id, got, c.want)
		}
	}
	// The chart: one polyline per series, each with a point per batch that
	// has the value.
	withWM := 0
	for _, p := range lines {
		if p.EventTime.Watermark != "" {
			withWM++
		}
	}
	polyline := func(series string) int {
		m := regexp.MustCompile(`<polyline class="series" data-series="`+regexp.QuoteMeta(series)+`" data-points="(\d+)"`).FindAllStringSubmatch(dom, -1)
		if len(m) == 0 {
			t.Errorf("chart has no %q line", series)
			return 0
		}
		n, _ := strconv.Atoi(m[0][1])
		return n
	}
	if got := polyline("watermark"); got != withWM {
		t.Errorf("watermark line has %d points, want %d (batches with a watermark)", got, withWM)
	}
	for name := range last.Sources {
		polyline(name + " max event time")
		polyline(name + " watermark")
	}
	for _, want := range []string{"malformed", "2026-01-01T00:00:24Z", "idle: not holding the watermark back", "[2026-01-01T00:00:21Z, 2026-01-01T00:00:22Z)"} {
		if !strings.Contains(dom, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	if e := text("error"); e != "" {
		t.Errorf("the page shows an error: %s", e)
	}

	shot := filepath.Join(t.TempDir(), "status.png")
	runChromium(t, bin, "http://"+addr+"/", "--window-size=1280,1650", "--screenshot="+shot)
	png, err := os.ReadFile(shot)
	if err != nil || len(png) < 10_000 || string(png[1:4]) != "PNG" {
		t.Fatalf("screenshot: %d bytes, %v", len(png), err)
	}
	if *updateScreenshot {
		if err := os.WriteFile("../docs/status-page.png", png, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("screenshot: %s (%d bytes)", shot, len(png))
}

// statusSourceName returns the name of the (only) source whose idleness is idle.
func statusSourceName(t *testing.T, p progress, idle bool) string {
	t.Helper()
	var out []string
	for name, s := range p.Sources {
		if s.Idle == idle {
			out = append(out, name)
		}
	}
	if len(out) != 1 {
		t.Fatalf("want one source with idle=%v, got %v", idle, out)
	}
	return out[0]
}

// TestStatusPageUnreadable: a progress line whose sources skip unreadable
// paths shows their count and each path named in the line (and how many
// more a source skips than it names), with its error, since when it
// fails, how many tries and when it is tried next; without any the box is
// hidden.
func TestStatusPageUnreadable(t *testing.T) {
	lines := statusLines(3, func(int) int64 { return 0 })
	lines[2].Unreadable = map[string]unreadableProgress{
		"web": {Count: 2, Paths: []string{"/var/log/app/secret.log", "/var/log/app/private/"}, Details: []unreadablePath{
			{Path: "/var/log/app/secret.log", Error: "open /var/log/app/secret.log: permission denied", Since: "2026-01-01T10:00:00Z", Tries: 3, NextRetry: "2026-01-01T10:00:07Z"},
			{Path: "/var/log/app/private/", Dir: true, Error: "open /var/log/app/private: permission denied", Since: "2026-01-01T10:00:01Z", Tries: 1, NextRetry: "2026-01-01T10:00:02Z"},
		}},
		"mobile": {Count: 25, Paths: []string{"/var/log/m/a.log"}},
	}
	dom := pageOf(t, chartInfo, lines)
	m := regexp.MustCompile(`(?s)<div id="unreadable" class="alert" data-count="(\d+)">(.*?)</ul></div>`).FindStringSubmatch(dom)
	if m == nil {
		t.Fatalf("no unreadable paths box in the page:\n%s", dom)
	}
	if m[1] != "27" {
		t.Errorf("data-count = %s, want 27", m[1])
	}
	for _, want := range []string{"27 unreadable paths skipped",
		"<li class=\"unreadable-path\" data-source=\"web\">/var/log/app/secret.log (source web)<div class=\"unreadable-detail\">open /var/log/app/secret.log: permission denied; failing since 2026-01-01T10:00:00Z, 3 tries; next retry 2026-01-01T10:00:07Z</div></li>",
		"<li class=\"unreadable-path\" data-source=\"web\">/var/log/app/private/ (source web)<div class=\"unreadable-detail\">directory: open /var/log/app/private: permission denied; failing since 2026-01-01T10:00:01Z, 1 try; next retry 2026-01-01T10:00:02Z</div></li>",
		"<li class=\"unreadable-path\" data-source=\"mobile\">/var/log/m/a.log (source mobile)</li>",
		"and 24 more of source mobile"} {
		if !strings.Contains(m[2], want) {
			t.Errorf("the unreadable box %q lacks %q", m[2], want)
		}
	}
	dom = pageOf(t, chartInfo, lines[:2])
	if !regexp.MustCompile(`<div id="unreadable" class="alert" hidden="" data-count="0"></div>`).MatchString(dom) {
		t.Errorf("no unreadable paths, yet the box shows or is missing:\n%s", dom)
	}
}
