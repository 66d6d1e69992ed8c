package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"tidemark/lake/store/storetest"
)

// appender appends generated lines to growing files while a stream runs
// and is killed: valid events with a small disorder (0–2 s behind their
// place), a malformed line every badEvery-th, some lines written in two
// pieces (a partial last line must wait for its newline). It records the
// byte offset of every line it completes, and counts them.
type appender struct {
	dir   string
	files []string // round-robin, relative to dir (their directory is the source)
	keys  int      // distinct page values, cycled; 0 means 5
	// badEvery makes line n malformed when n%badEvery == badEvery-1.
	badEvery int
	// step is the event time between consecutive lines.
	step time.Duration
	// After every pauseEvery lines the writer pauses for pause.
	pauseEvery int
	pause      time.Duration

	mu      sync.Mutex
	grew    *sync.Cond      // broadcast after each line, and when the writer ends
	lines   map[string]bool // "file@offset" -> malformed
	written int
	done    bool
}

// newCrashInput is the crash and maintenance tests' input: two sources
// (a/ and b/) of one file each, one event a second, a malformed line every
// 37th. Within a source, files are read in lexical order, so two files of
// one source written in parallel would make results depend on batch
// boundaries (the later file's rows turn late): one file per source.
func newCrashInput(dir string, keys int) *appender {
	return newAppender(&appender{dir: dir, files: []string{"a/events.ndjson", "b/events.ndjson"}, keys: keys,
		badEvery: 37, step: time.Second, pauseEvery: 20, pause: 2 * time.Millisecond})
}

func newAppender(in *appender) *appender {
	in.lines = map[string]bool{}
	in.grew = sync.NewCond(&in.mu)
	return in
}

// waitWritten blocks until n lines are written or the writer has ended.
func (in *appender) waitWritten(n int) {
	in.mu.Lock()
	defer in.mu.Unlock()
	for in.written < n && !in.done {
		in.grew.Wait()
	}
}

func (in *appender) count() int {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.written
}

func (in *appender) write(ctx context.Context, total int, rng *rand.Rand) error {
	defer func() {
		in.mu.Lock()
		in.done = true
		in.mu.Unlock()
		in.grew.Broadcast()
	}()
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	keys := in.keys
	if keys <= 0 {
		keys = 5
	}
	offsets := make([]int64, len(in.files))
	handles := make([]*os.File, len(in.files))
	for i, name := range in.files {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(in.dir, name)), 0o755); err != nil {
			return err
		}
		f, err := os.OpenFile(filepath.Join(in.dir, name), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return err
		}
		defer f.Close()
		handles[i] = f
	}
	for n := 0; n < total; n++ {
		fi := n % len(in.files)
		var line string
		bad := n%in.badEvery == in.badEvery-1
		if bad {
			line = fmt.Sprintf(`{"event_time": "broken %d"`, n)
		} else {
			t := base.Add(time.Duration(n)*in.step - time.Duration(rng.IntN(3))*time.Second)
			line = fmt.Sprintf(`{"event_time":%q,"page":"/p%d","value":%d}`, t.Format(time.RFC3339Nano), n%keys, n%100)
		}
		data := line + "\n"
		cut := len(data)
		if n%7 == 3 {
			cut = len(data) / 2
		}
		if _, err := handles[fi].WriteString(data[:cut]); err != nil {
			return err
		}
		if cut < len(data) {
			time.Sleep(time.Millisecond) // the writer's pacing, not a test wait
			if _, err := handles[fi].WriteString(data[cut:]); err != nil {
				return err
			}
		}
		in.mu.Lock()
		in.lines[fmt.Sprintf("%s@%d", in.files[fi], offsets[fi])] = bad // source dir + file
		in.written++
		in.mu.Unlock()
		in.grew.Broadcast()
		offsets[fi] += int64(len(data))
		if n%in.pauseEvery == in.pauseEvery-1 {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(in.pause):
			}
		}
	}
	return nil
}

// killLoop starts the binary with args (env added) runs times and kills
// each run with SIGKILL at a random moment, minDelay plus up to spread from
// rng; before (when set) runs before each start, after (when set) with
// each run's stderr. A run that ends before its kill fails t. It returns
// the number of runs killed.
func killLoop(t *testing.T, runs int, args, env []string, rng *rand.Rand, minDelay, spread time.Duration, before func(i int), after func(stderr string)) int {
	t.Helper()
	survived := 0
	for i := 0; i < runs; i++ {
		if before != nil {
			before(i)
		}
		needBinary(t)
		cmd := exec.Command(binary, args...)
		cmd.Env = append(cmd.Environ(), env...)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(minDelay + time.Duration(rng.IntN(int(spread/time.Millisecond)))*time.Millisecond) // a random moment to kill at
		if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		err := cmd.Wait()
		if after != nil {
			after(stderr.String())
		}
		if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			survived++
		} else {
			t.Fatalf("run %d ended before the kill (%v):\n%s", i, err, stderr.String())
		}
	}
	return survived
}

// finishAndCompare runs args once more with --once --drain (the input is
// complete: every window closes), then the same args on the fresh lake
// refURL in place of lakeURL, and fails t unless window_results of both are
// equal.
func finishAndCompare(t *testing.T, args, env []string, lakeURL, refURL string, kills int) {
	t.Helper()
	if _, stderr, code := runEnv(t, env, append(args, "--once", "--drain")...); code != 0 {
		t.Fatalf("final run: exit %d\n%s", code, stderr)
	}
	ref := append([]string{}, args...)
	for i := range ref {
		if ref[i] == lakeURL {
			ref[i] = refURL
		}
	}
	if _, stderr, code := runEnv(t, env, append(ref, "--once", "--drain")...); code != 0 {
		t.Fatalf("reference run: exit %d\n%s", code, stderr)
	}
	if gotW, wantW := windowSummary(t, openTestLake(t, lakeURL)), windowSummary(t, openTestLake(t, refURL)); gotW != wantW {
		t.Errorf("window_results after %d kills differ from an uninterrupted run:\n%s", kills, diffLines(gotW, wantW))
	}
}

// versityEnv starts versitygw and returns the environment that points the
// binary at it, set in this process too (for opening its lakes here).
func versityEnv(t *testing.T) (*storetest.Server, []string) {
	srv := storetest.StartVersity(t)
	env := []string{"AWS_ACCESS_KEY_ID=" + srv.AccessKey, "AWS_SECRET_ACCESS_KEY=" + srv.SecretKey,
		"AWS_REGION=" + srv.Region, "AWS_ENDPOINT_URL=" + srv.Endpoint}
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
	return srv, env
}

// appendFile appends data to the file at path, as a producer would.
func appendFile(t *testing.T, path, data string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(data); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}
