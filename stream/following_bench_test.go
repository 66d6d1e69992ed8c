package stream

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"tidemark"
	"tidemark/ingest"
	"tidemark/lake"
	"tidemark/lake/store"
	"tidemark/stream/engine"
)

// BenchmarkFollowingStream is a following stream as a user runs one, with
// the CLI's defaults (DefaultTrigger, auto compaction, daily vacuum): two
// files fed 2,000 lines/s between them, current event times, 10 s windows.
// Each b.N is one second of input. It reports the process's CPU seconds per
// million lines (what keeping up costs), commits per hour to raw_events,
// raw_events' active files at the end, and freshness: from appending the
// line that closes a window (the later of the two files' first lines past
// its end: the watermark is the minimum) to the window being printed,
// which happens right after its commit. Issue 33's targets: at most 10
// CPU-s per million lines, commits and files in the thousands a day, p99
// freshness under 1 s. TIDEMARK_BENCH_TRIGGER overrides the trigger (0:
// the low-latency path).
func BenchmarkFollowingStream(b *testing.B) {
	const rate = 2000
	dir, lakeDir := b.TempDir(), b.TempDir()
	spec, err := tidemark.NewWindowSpec(10*time.Second, 0)
	if err != nil {
		b.Fatal(err)
	}
	files := []string{filepath.Join(dir, "a.ndjson"), filepath.Join(dir, "b.ndjson")}
	cfg := RunnerConfig{
		Sources: []string{filepath.Join(dir, "a.ndjson"), filepath.Join(dir, "b.ndjson")},
		Decoder: ingest.DecoderConfig{Keys: []string{"page"}, ValueField: "value"},
		Engine:  engine.Config{Window: spec},
		Lake:    lakeDir,
		Trigger: DefaultTrigger,
	}
	if v := os.Getenv("TIDEMARK_BENCH_TRIGGER"); v != "" {
		if cfg.Trigger, err = time.ParseDuration(v); err != nil {
			b.Fatal(err)
		}
	}
	for _, f := range files {
		if err := os.WriteFile(f, nil, 0o644); err != nil {
			b.Fatal(err)
		}
	}
	pr, pw := io.Pipe()
	cfg.Print = pw
	var commits int
	var mu sync.Mutex
	cfg.OnProgress = func(Progress) { mu.Lock(); commits++; mu.Unlock() }

	// closedAt[end] is when the line that closes the window ending at end
	// (µs) was appended: the first tick whose event time reaches it.
	var closedMu sync.Mutex
	closedAt := map[int64]time.Time{}
	var lat []time.Duration
	printed := make(chan struct{})
	go func() {
		defer close(printed)
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			var w struct {
				End time.Time `json:"window_end"`
			}
			if err := json.Unmarshal(sc.Bytes(), &w); err != nil {
				continue
			}
			now := time.Now()
			closedMu.Lock()
			if t, ok := closedAt[w.End.UnixMicro()]; ok {
				lat = append(lat, now.Sub(t))
				delete(closedAt, w.End.UnixMicro())
			}
			closedMu.Unlock()
		}
	}()

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := Run(ctx, cfg)
		done <- err
	}()
	// The feeder is this test binary run again (TestMain): its CPU is not
	// the process's, so the CPU measured is the stream's.
	feeder := exec.Command(os.Args[0])
	feeder.Env = append(os.Environ(), feederEnv+"="+strings.Join(files, ","), fmt.Sprintf("%s_SECONDS=%d", feederEnv, b.N))
	feeder.Stderr = os.Stderr
	size := spec.Size
	b.ResetTimer()
	cpu0, start := cpuTime(), time.Now()
	if err := feeder.Start(); err != nil {
		b.Fatal(err)
	}
	// Every window ending while the feeder runs is closed by the first
	// lines past its end, which the feeder writes within a tick of it:
	// freshness is measured from the end itself (a tick pessimistic).
	first := tidemark.FloorDiv(start.UnixMicro(), size)*size + size
	closedMu.Lock()
	for end := first; end < start.Add(time.Duration(b.N-1)*time.Second).UnixMicro(); end += size {
		closedAt[end] = time.UnixMicro(end)
	}
	closedMu.Unlock()
	if err := feeder.Wait(); err != nil {
		b.Fatalf("feeder: %v", err)
	}
	lines := b.N * rate
	// Let the stream catch up before stopping the clock: the last window
	// closed is printed.
	deadline := time.Now().Add(30 * time.Second)
	for {
		closedMu.Lock()
		pending := len(closedAt)
		closedMu.Unlock()
		if pending == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	wall := time.Since(start)
	cpu := time.Duration(cpuTime() - cpu0)
	b.StopTimer()
	cancel()
	if err := <-done; err != nil {
		b.Fatal(err)
	}
	pw.Close()
	<-printed
	st, err := countFiles(lakeDir)
	if err != nil {
		b.Fatal(err)
	}
	slices.Sort(lat)
	b.ReportMetric(cpu.Seconds()/float64(lines)*1e6, "CPU-s/Mlines")
	mu.Lock()
	b.ReportMetric(float64(commits)/wall.Hours(), "commits/h")
	mu.Unlock()
	b.ReportMetric(float64(st), "raw-files")
	if len(lat) > 0 {
		b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "fresh-p50-ms")
		b.ReportMetric(float64(lat[(len(lat)*99)/100].Microseconds())/1000, "fresh-p99-ms")
	}
	b.ReportMetric(float64(len(lat)), "windows")
}

// countFiles counts raw_events' active data files.
func countFiles(lakeDir string) (int, error) {
	ctx := context.Background()
	st, err := store.OpenDir(lakeDir)
	if err != nil {
		return 0, err
	}
	lk, err := lake.Open(ctx, st, lake.Config{})
	if err != nil {
		return 0, err
	}
	tables, err := lk.Tables(ctx)
	if err != nil {
		return 0, err
	}
	for _, t := range tables {
		if t.Name == lake.TableRawEvents {
			return t.Files, nil
		}
	}
	return 0, fmt.Errorf("no raw_events in %s", lakeDir)
}

// feederEnv names the files the feeder process appends to (TestMain);
// feederEnv_SECONDS how long it feeds them.
const feederEnv = "TIDEMARK_TEST_FEEDER"

// feed is the feeder process of BenchmarkFollowingStream: 2,000 lines/s
// between the files, in 10 ms ticks, event time the tick's wall time.
func feed() int {
	const rate, tick = 2000, 10 * time.Millisecond
	files := strings.Split(os.Getenv(feederEnv), ",")
	secs, err := strconv.Atoi(os.Getenv(feederEnv + "_SECONDS"))
	if err != nil {
		fmt.Fprintln(os.Stderr, "feeder:", err)
		return 2
	}
	outs := make([]*os.File, len(files))
	for i, f := range files {
		if outs[i], err = os.OpenFile(f, os.O_WRONLY|os.O_APPEND, 0); err != nil {
			fmt.Fprintln(os.Stderr, "feeder:", err)
			return 2
		}
		defer outs[i].Close()
	}
	perTick := rate * int(tick) / int(time.Second) / len(files)
	var buf []byte
	next := time.Now()
	for n := range secs * int(time.Second/tick) {
		next = next.Add(tick)
		time.Sleep(time.Until(next))
		stamp := time.Now().UTC().Format(time.RFC3339Nano)
		for _, out := range outs {
			buf = buf[:0]
			for j := range perTick {
				buf = append(buf, `{"event_time":"`...)
				buf = append(buf, stamp...)
				buf = append(buf, `","page":"/p`...)
				buf = strconv.AppendInt(buf, int64((n+j)%50), 10)
				buf = append(buf, `","value":`...)
				buf = strconv.AppendInt(buf, int64(j), 10)
				buf = append(buf, "}\n"...)
			}
			if _, err := out.Write(buf); err != nil {
				fmt.Fprintln(os.Stderr, "feeder:", err)
				return 1
			}
		}
	}
	return 0
}
