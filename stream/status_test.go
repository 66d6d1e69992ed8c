package stream

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"tidemark"
)

// progressLog is the stream's Progress writer in a test: every line
// decoded, the total of input rows so far signalled.
type progressLog struct {
	mu    sync.Mutex
	buf   []byte
	lines []progress
	raw   []string
	rows  int64
	ch    chan int64 // total input rows after each line
}

func newProgressLog() *progressLog { return &progressLog{ch: make(chan int64, 4096)} }

func (l *progressLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf = append(l.buf, p...)
	for {
		i := strings.IndexByte(string(l.buf), '\n')
		if i < 0 {
			return len(p), nil
		}
		line := string(l.buf[:i])
		l.buf = l.buf[i+1:]
		var pr progress
		if err := json.Unmarshal([]byte(line), &pr); err != nil {
			return 0, fmt.Errorf("progress line %q: %w", line, err)
		}
		l.lines = append(l.lines, pr)
		l.raw = append(l.raw, line)
		l.rows += pr.NumInputRows
		select {
		case l.ch <- l.rows:
		default:
		}
	}
}

func (l *progressLog) snapshot() ([]progress, []string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]progress(nil), l.lines...), append([]string(nil), l.raw...)
}

// waitRows waits until the stream reported at least n input rows.
func (l *progressLog) waitRows(t *testing.T, n int64, done <-chan error) {
	t.Helper()
	timeout := time.After(60 * time.Second)
	for {
		select {
		case got := <-l.ch:
			if got >= n {
				return
			}
		case err := <-done:
			t.Fatalf("stream ended early: %v", err)
		case <-timeout:
			t.Fatalf("the stream did not report %d input rows within 60 s", n)
		}
	}
}

// statusStream runs a stream with two sources and --metrics-addr: source a
// gets events, a late row and a malformed line; source b goes quiet after
// its first lines, so on the stream's clock (one second per reading) it
// turns idle. It returns the address, the progress log, and stop.
func statusStream(t *testing.T) (addr string, log *progressLog, stop func()) {
	t.Helper()
	root, lakeDir := t.TempDir(), t.TempDir()
	dirA, dirB := filepath.Join(root, "web"), filepath.Join(root, "mobile")
	for _, d := range []string{dirA, dirB} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	cfg := runnerConfig(t, dirA, lakeDir)
	cfg.Sources = []string{dirA, dirB}
	cfg.Engine.Lateness = 2 * time.Second
	cfg.Engine.IdleTimeout = 5 * time.Second
	cfg.MetricsAddr = freeAddr(t)
	var tick atomic.Int64
	base := time.Date(2026, 1, 1, 1, 0, 0, 0, time.UTC)
	cfg.Clock = func() time.Time { return base.Add(time.Duration(tick.Add(1)) * time.Second) }
	log = newProgressLog()
	cfg.Progress = log
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := Run(ctx, cfg)
		done <- err
	}()
	a, b := filepath.Join(dirA, "a.ndjson"), filepath.Join(dirB, "b.ndjson")
	ev := func(sec float64, page string) string {
		return fmt.Sprintf(`{"event_time":%q,"page":%q,"value":1}`, time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(sec*1e9)).Format(time.RFC3339Nano), page)
	}
	var rows int64
	for i := range 5 {
		appendLine(t, a, ev(float64(i), "/a"))
		appendLine(t, b, ev(float64(i)+0.5, "/b"))
		rows += 2
		log.waitRows(t, rows, done)
	}
	for i := 5; i < 25; i++ {
		appendLine(t, a, ev(float64(i), "/a"))
		rows++
		if i == 12 {
			appendLine(t, a, ev(1, "/late"))
			appendLine(t, a, `not json`)
			rows += 2
		}
		log.waitRows(t, rows, done)
	}
	return cfg.MetricsAddr, log, func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("stop: %v", err)
		}
	}
}

func getJSON(t *testing.T, url string, v any) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("GET %s: %s: %s", url, resp.Status, body)
	}
	if err := json.Unmarshal(body, v); err != nil {
		t.Fatalf("GET %s: %v: %s", url, err, body)
	}
}

// TestStatusJSONMatchesProgressLines: /api/progress holds exactly the
// progress lines the stream wrote, per-source figures included, and the
// page at / is self-contained.
func TestStatusJSONMatchesProgressLines(t *testing.T) {
	addr, log, stop := statusStream(t)
	defer stop()
	// The stream may write a line while we look (a batch of its own, say on
	// an idle timeout): the document must hold the lines written before the
	// request, and only lines written by the time it answered.
	before, _ := log.snapshot()
	var doc statusDoc
	getJSON(t, "http://"+addr+"/api/progress", &doc)
	lines, raw := log.snapshot()
	if n := len(doc.Progress); int(doc.Batches) != n || n < len(before) || n > len(lines) {
		t.Fatalf("/api/progress has %d batches (%d kept), the stream wrote %d..%d progress lines", doc.Batches, n, len(before), len(lines))
	}
	for i := range doc.Progress {
		got, _ := json.Marshal(doc.Progress[i])
		if string(got) != raw[i] {
			t.Errorf("batch %d:\n/api/progress %s\nprogress line %s", i, got, raw[i])
		}
	}
	last := doc.Progress[len(doc.Progress)-1]
	a, b := last.Sources[doc.Info.Sources[0]], last.Sources[doc.Info.Sources[1]]
	if a.MaxEventTime != "2026-01-01T00:00:24Z" || a.Watermark != "2026-01-01T00:00:22Z" || a.Idle {
		t.Errorf("source a: got %+v, want max 00:00:24, watermark 00:00:22 (lateness 2s), active", a)
	}
	if b.MaxEventTime != "2026-01-01T00:00:04.5Z" || b.Watermark != "2026-01-01T00:00:02.5Z" || !b.Idle {
		t.Errorf("source b: got %+v, want max 00:00:04.5, watermark 00:00:02.5, idle", b)
	}
	if last.EventTime.Watermark != "2026-01-01T00:00:22Z" {
		t.Errorf("global watermark %s, want source a's (b is idle)", last.EventTime.Watermark)
	}
	var dropped, quarantined int64
	for _, p := range doc.Progress {
		dropped += p.Dropped
		quarantined += p.Quarantined["malformed"]
	}
	if dropped != 1 || quarantined != 1 {
		t.Errorf("history: %d dropped, %d malformed; want 1 and 1", dropped, quarantined)
	}
	if len(doc.Windows) == 0 || doc.Windows[0].End != "2026-01-01T00:00:22Z" || !doc.Windows[0].Final {
		t.Errorf("last windows: got %+v, want the newest first, ending at the watermark", doc.Windows)
	}
	if doc.Info.Lake == "" || doc.Info.Checkpoint == "" || doc.Info.Lateness != "2s" || doc.Info.IdleTimeout != "5s" {
		t.Errorf("info: %+v", doc.Info)
	}

	resp, err := http.Get("http://" + addr + "/")
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/html") {
		t.Errorf("/: Content-Type %s", ct)
	}
	// Self-contained: nothing but /api/progress is fetched (the only URL in
	// it is the SVG namespace, an identifier).
	rest := strings.ReplaceAll(string(page), "http://www.w3.org/2000/svg", "")
	for _, bad := range []string{"http://", "https://", "//cdn", "<link", "src=", "@import", "url("} {
		if strings.Contains(rest, bad) {
			t.Errorf("page holds %q: it must work without a network", bad)
		}
	}
	if resp, err := http.Get("http://" + addr + "/nope"); err != nil || resp.StatusCode != 404 {
		t.Errorf("/nope: got %v %v, want 404", resp, err)
	} else {
		resp.Body.Close()
	}
}

// TestStatusHistoryIsBounded keeps the newest historyBatches lines, oldest
// first, and the newest historyWindows windows, newest first.
func TestStatusHistoryIsBounded(t *testing.T) {
	s := newStatus(RunnerConfig{Clock: time.Now})
	n := historyBatches + 37
	for i := range n {
		w := tidemark.Result{Window: tidemark.Window{Start: int64(i) * 1e6, End: int64(i+1) * 1e6}, Final: true}
		s.add(progress{BatchID: int64(i)}, []tidemark.Result{w})
	}
	d := s.doc()
	if d.Batches != int64(n) || len(d.Progress) != historyBatches {
		t.Fatalf("got %d batches, %d kept; want %d, %d", d.Batches, len(d.Progress), n, historyBatches)
	}
	for i, p := range d.Progress {
		if want := int64(n - historyBatches + i); p.BatchID != want {
			t.Fatalf("kept line %d is batch %d, want %d", i, p.BatchID, want)
		}
	}
	if len(d.Windows) != historyWindows || d.Windows[0].Batch != int64(n-1) || d.Windows[historyWindows-1].Batch != int64(n-historyWindows) {
		t.Errorf("windows: %d kept, first from batch %d; want %d, newest first", len(d.Windows), d.Windows[0].Batch, historyWindows)
	}
	if !reflect.DeepEqual(s.doc(), d) {
		t.Errorf("doc is not stable")
	}
}
