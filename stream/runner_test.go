package stream

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"tidemark"
	"tidemark/ingest"
	"tidemark/stream/engine"
)

// runnerConfig is a small stream over dir into lakeDir.
func runnerConfig(t testing.TB, dir, lakeDir string) RunnerConfig {
	t.Helper()
	spec, err := tidemark.NewWindowSpec(time.Second, 0)
	if err != nil {
		t.Fatal(err)
	}
	return RunnerConfig{
		Sources: []string{dir},
		Decoder: ingest.DecoderConfig{Keys: []string{"page"}, ValueField: "value"},
		Engine:  engine.Config{Window: spec},
		Lake:    lakeDir,
		Rescan:  time.Second,
	}
}

func appendLine(t testing.TB, path, line string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(line + "\n"); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// printed timestamps every window line the stream prints.
type printed struct {
	lines chan string
}

// newPrinted returns the writer to give the stream as Print; the reading
// goroutine ends when the test does.
func newPrinted(t testing.TB) (*printed, io.Writer) {
	pr, pw := io.Pipe()
	p := &printed{lines: make(chan string, 1024)}
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			select {
			case p.lines <- sc.Text():
			case <-stop:
				return
			}
		}
	}()
	t.Cleanup(func() {
		close(stop)
		pw.Close()
		<-done
	})
	return p, pw
}

func freeAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// The metrics endpoint serves the watermark and drop counters while the
// stream runs, and the stream stops cleanly when its context ends.
func TestRunnerMetricsAndCleanStop(t *testing.T) {
	dir, lakeDir := t.TempDir(), t.TempDir()
	cfg := runnerConfig(t, dir, lakeDir)
	cfg.MetricsAddr = freeAddr(t)
	p, w := newPrinted(t)
	cfg.Print = w
	path := filepath.Join(dir, "events.ndjson")
	appendLine(t, path, `{"event_time":"2026-01-01T00:00:00.5Z","page":"/a","value":1}`)
	appendLine(t, path, `{"event_time":"2026-01-01T00:00:01.5Z","page":"/a","value":2}`)

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	var sum *Summary
	go func() {
		var err error
		sum, err = Run(ctx, cfg)
		done <- err
	}()
	// The first window closes when the second line's batch ends.
	select {
	case line := <-p.lines:
		if !strings.Contains(line, `"window_start":"2026-01-01T00:00:00Z"`) || !strings.Contains(line, `"count":1`) {
			t.Errorf("first window: %s", line)
		}
	case err := <-done:
		t.Fatalf("stream ended early: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("no window within 30 s")
	}
	// Now [0s,1s) is closed: a row for it is late. A bad line is
	// quarantined, and a newer event closes [1s,2s).
	appendLine(t, path, `{"event_time":"2026-01-01T00:00:00.2Z","page":"/a","value":3}`)
	appendLine(t, path, `not json`)
	appendLine(t, path, `{"event_time":"2026-01-01T00:00:03Z","page":"/a","value":4}`)
	<-p.lines
	resp, err := http.Get("http://" + cfg.MetricsAddr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{
		"tidemark_watermark_seconds 1.767225603e+09",
		"tidemark_rows_dropped_by_watermark_total 1",
		`tidemark_quarantined_rows_total{reason="malformed"} 1`,
		"tidemark_max_event_time_seconds 1.767225603e+09",
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics lacks %q:\n%s", want, body)
		}
	}
	// Every batch writes at least its write-ahead and commit entries.
	if m := regexp.MustCompile(`(?m)^tidemark_checkpoint_bytes_total (\S+)$`).FindSubmatch(body); m == nil {
		t.Errorf("/metrics lacks tidemark_checkpoint_bytes_total:\n%s", body)
	} else if v, err := strconv.ParseFloat(string(m[1]), 64); err != nil || v < 100 {
		t.Errorf("tidemark_checkpoint_bytes_total %s, want the bytes of at least two batches' entries", m[1])
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("stop: %v", err)
	}
	if sum.Lines != 5 || sum.OK != 3 || sum.Late != 1 || sum.QuarantinedTotal() != 1 {
		t.Errorf("summary: %s", sum.Accounting())
	}
	if _, err := http.Get("http://" + cfg.MetricsAddr + "/metrics"); err == nil {
		t.Error("metrics endpoint still serving after the stream stopped")
	}
}

// BenchmarkFreshness measures, per window, the time from appending the line
// that closes it to the window being committed to the lake (the stream
// prints a window right after its lake commit). Target (SPEC §8): under 1 s.
func BenchmarkFreshness(b *testing.B) {
	dir, lakeDir := b.TempDir(), b.TempDir()
	cfg := runnerConfig(b, dir, lakeDir)
	p, w := newPrinted(b)
	cfg.Print = w
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := Run(ctx, cfg)
		done <- err
	}()
	path := filepath.Join(dir, "events.ndjson")
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i <= b.N; i++ {
		t0 := time.Now()
		appendLine(b, path, fmt.Sprintf(`{"event_time":%q,"page":"/a","value":1}`, base.Add(time.Duration(i)*time.Second).Format(time.RFC3339)))
		if i == 0 {
			continue // the first line closes nothing
		}
		select {
		case <-p.lines:
			lat = append(lat, time.Since(t0))
		case err := <-done:
			b.Fatalf("stream ended: %v", err)
		case <-time.After(30 * time.Second):
			b.Fatal("no window within 30 s")
		}
	}
	b.StopTimer()
	cancel()
	<-done
	sortDurations(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
}

func sortDurations(d []time.Duration) {
	for i := 1; i < len(d); i++ {
		for j := i; j > 0 && d[j] < d[j-1]; j-- {
			d[j], d[j-1] = d[j-1], d[j]
		}
	}
}

// Run validates its config before it opens anything: each bad field gets
// a *tidemark.ConfigError naming it (cmd/tidemark phrases it with its flag, see
// TestStreamConfigErrorsNameFlags there), and no lake is made.
func TestRunnerConfigValidate(t *testing.T) {
	lakeDir := filepath.Join(t.TempDir(), "lake")
	good := runnerConfig(t, t.TempDir(), lakeDir)
	tests := []struct {
		name string
		edit func(*RunnerConfig)
		want string
	}{
		{"no source", func(c *RunnerConfig) { c.Sources = nil }, "Sources is required"},
		{"no window", func(c *RunnerConfig) { c.Engine.Window = tidemark.WindowSpec{} }, "Engine.Window.Size is required"},
		{"negative lateness", func(c *RunnerConfig) { c.Engine.Lateness = -time.Second }, "Engine.Lateness must not be negative, got -1s"},
		{"negative idle timeout", func(c *RunnerConfig) { c.Engine.IdleTimeout = -time.Second }, "Engine.IdleTimeout must not be negative"},
		{"negative batch rows", func(c *RunnerConfig) { c.MaxBatchRows = -1 }, "MaxBatchRows must be at least 1"},
		{"drain without once", func(c *RunnerConfig) { c.Drain = true }, "Drain needs Once"},
		{"budget of no source", func(c *RunnerConfig) { c.Engine.SourceLateness = map[string]time.Duration{"nope": time.Second} }, `"nope" is not one of the Sources values`},
		{"key in tidemark's namespace", func(c *RunnerConfig) { c.Decoder.Keys = []string{"_tm_count"} }, `--key "_tm_count": column names starting with "_tm_" are tidemark's own`},
		{"unknown format", func(c *RunnerConfig) { c.Decoder.Format = "xml" }, `unknown format "xml"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := good
			tc.edit(&cfg)
			_, err := Run(context.Background(), cfg)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error saying %q", err, tc.want)
			}
			if ce := (*tidemark.ConfigError)(nil); errors.As(err, &ce) && strings.Contains(ce.Error(), "--") {
				t.Fatalf("%v: a ConfigError must name fields, not flags", err)
			}
			if _, err := os.Stat(lakeDir); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("the lake was opened before validation: %v", err)
			}
		})
	}
	if err := good.Validate(); err != nil {
		t.Fatalf("the good config: %v", err)
	}
}
