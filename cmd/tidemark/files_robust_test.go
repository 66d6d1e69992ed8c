package main

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Issue 31, operational robustness: unreadable paths, open-file limits,
// --once exit codes (docs/files-operations.md).

// unprivileged returns how to run the binary so that chmod 000 means
// unreadable: as is for a normal user; as root (who reads everything), a
// copy of the binary run as nobody, in a work directory nobody can write.
func unprivileged(t *testing.T) (bin, work string, attr *syscall.SysProcAttr) {
	t.Helper()
	if os.Geteuid() != 0 {
		return binary, t.TempDir(), nil
	}
	dir, err := os.MkdirTemp("", "tidemark-nobody-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	for _, d := range []string{dir, filepath.Join(dir, "bin"), filepath.Join(dir, "work")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		os.Chmod(d, 0o777)
	}
	bin = filepath.Join(dir, "bin", "tidemark")
	src, err := os.Open(binary)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	dst, err := os.OpenFile(bin, os.O_CREATE|os.O_WRONLY, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(dst, src); err != nil {
		t.Fatal(err)
	}
	if err := dst.Close(); err != nil {
		t.Fatal(err)
	}
	return bin, filepath.Join(dir, "work"), &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
}

// writeWorld writes a file every user can read, its directories too.
func writeWorld(t *testing.T, path, data string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

func event(t time.Time, n int) string {
	return fmt.Sprintf(`{"event_time":%q,"page":"/p%d","n":%d}`+"\n", t.UTC().Format(time.RFC3339), n%3, n)
}

// A --once run that cannot read an input commits what it read, does not
// drain, exits non-zero and names the input.
func TestStreamOnceUnreadableInput(t *testing.T) {
	if testing.Short() {
		t.Skip("full tier: runs the binary")
	}
	bin, work, attr := unprivileged(t)
	src := filepath.Join(work, "src")
	base := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	writeWorld(t, filepath.Join(src, "a.log"), event(base, 1)+event(base.Add(time.Minute), 2))
	writeWorld(t, filepath.Join(src, "b.log"), event(base.Add(30*time.Second), 3))
	if err := os.Chmod(filepath.Join(src, "b.log"), 0); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "stream", "--source", src, "--lake", filepath.Join(work, "lake"), "--window", "1m", "--lateness", "5m", "--once", "--drain", "--progress", os.DevNull)
	cmd.SysProcAttr = attr
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err := cmd.Run()
	if err == nil {
		t.Fatalf("exit 0 with b.log unreadable; stderr:\n%s", stderr.String())
	}
	last := lastLine(stderr.String())
	if !strings.Contains(last, "could not read 1 input") || !strings.Contains(last, "b.log") || !strings.Contains(last, "not drained") {
		t.Errorf("last line %q, want the unread input named", last)
	}
	if !strings.Contains(stderr.String(), "lines read 2 = ok 2") {
		t.Errorf("want a.log's 2 lines committed; stderr:\n%s", stderr.String())
	}
	out, errOut, code := run(t, "checkpoint", "--lake", filepath.Join(work, "lake"))
	if code != 0 || !strings.Contains(out, "unreadable") || !strings.Contains(out, "b.log") {
		t.Errorf("checkpoint (exit %d) does not list b.log as unreadable:\n%s%s", code, out, errOut)
	}
	// Readable again: the next run reads it and succeeds; the window it
	// belongs to was left open, so the line is not late.
	if err := os.Chmod(filepath.Join(src, "b.log"), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd = exec.Command(bin, "stream", "--source", src, "--lake", filepath.Join(work, "lake"), "--window", "1m", "--lateness", "5m", "--once", "--drain", "--progress", os.DevNull)
	cmd.SysProcAttr = attr
	stderr.Reset()
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("rerun: %v\n%s", err, stderr.String())
	}
	if !strings.Contains(stderr.String(), "lines read 1 = ok 1 + late 0") {
		t.Errorf("rerun: want b.log's line read, not late; stderr:\n%s", stderr.String())
	}
}

// cpuTicks returns a process's user+system CPU time in clock ticks.
func cpuTicks(t *testing.T, pid int) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+2:]) // after "pid (comm) "
	ut, _ := strconv.ParseInt(fields[11], 10, 64)                 // field 14
	st, _ := strconv.ParseInt(fields[12], 10, 64)                 // field 15
	return ut + st
}

// lockedBuffer is a bytes.Buffer safe for a writer goroutine and readers.
type lockedBuffer struct {
	mu chan struct{}
	b  bytes.Buffer
}

func newLockedBuffer() *lockedBuffer {
	l := &lockedBuffer{mu: make(chan struct{}, 1)}
	return l
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu <- struct{}{}
	defer func() { <-l.mu }()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu <- struct{}{}
	defer func() { <-l.mu }()
	return l.b.String()
}

// until polls cond every 50 ms for up to d; the binary runs on its own.
func until(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
		<-tick.C
	}
}

var rowsRead = regexp.MustCompile(`"num_input_rows":(\d+)`)

// totalRows sums num_input_rows over the progress lines written so far.
func totalRows(t *testing.T, progress string) int {
	b, _ := os.ReadFile(progress)
	n := 0
	for _, m := range rowsRead.FindAllStringSubmatch(string(b), -1) {
		v, _ := strconv.Atoi(m[1])
		n += v
	}
	return n
}

// A following stream with an unreadable file, an unreadable subdirectory
// made while it runs, and its root deleted and recreated: one warning
// each, CPU near idle meanwhile, the paths on the progress line and in
// `checkpoint`, each read once it can be, no exit.
func TestStreamUnreadablePaths(t *testing.T) {
	if testing.Short() {
		t.Skip("full tier: runs the binary for ~15 s")
	}
	bin, work, attr := unprivileged(t)
	src := filepath.Join(work, "src")
	lake, progress := filepath.Join(work, "lake"), filepath.Join(work, "progress.ndjson")
	base := time.Now().Add(-time.Hour)
	writeWorld(t, filepath.Join(src, "a.log"), event(base, 1))
	writeWorld(t, filepath.Join(src, "secret.log"), event(base, 2))
	if err := os.Chmod(filepath.Join(src, "secret.log"), 0); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "stream", "--source", src, "--lake", lake, "--window", "1m", "--lateness", "1h",
		"--rescan-interval", "200ms", "--progress", progress)
	cmd.SysProcAttr = attr
	stderr := newLockedBuffer()
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	until(t, 30*time.Second, "a.log's line", func() bool { return totalRows(t, progress) >= 1 })

	// Made unreadable elsewhere and moved in, so the stream never sees it readable.
	sub, staged := filepath.Join(src, "sub"), filepath.Join(work, "staged")
	writeWorld(t, filepath.Join(staged, "c.log"), event(base, 3))
	if err := os.Chmod(staged, 0); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(staged, sub); err != nil {
		t.Fatal(err)
	}
	defer os.Chmod(sub, 0o755)
	// A batch while both are unreadable: its progress line and the
	// checkpoint name them.
	appendFile(t, filepath.Join(src, "a.log"), event(base, 4))
	until(t, 30*time.Second, "a.log's second line", func() bool { return totalRows(t, progress) >= 2 })
	until(t, 10*time.Second, "the subdirectory reported", func() bool {
		return strings.Contains(stderr.String(), "cannot read directory")
	})
	ticks0, wall0 := cpuTicks(t, cmd.Process.Pid), time.Now()
	time.Sleep(3 * time.Second) // the process runs on its own: measure its CPU over 3 s
	ticks, wall := cpuTicks(t, cmd.Process.Pid)-ticks0, time.Since(wall0)
	const hz = 100 // USER_HZ on Linux
	cpu := float64(ticks) / hz / wall.Seconds()
	t.Logf("CPU with an unreadable file and directory: %.1f%% of a core over %v (%d ticks)", cpu*100, wall.Round(time.Millisecond), ticks)
	if cpu > 0.10 {
		t.Errorf("%.0f%% of a core while waiting on unreadable paths, want near idle (<10%%)", cpu*100)
	}
	appendFile(t, filepath.Join(src, "a.log"), event(base, 5))
	until(t, 30*time.Second, "a.log's third line", func() bool { return totalRows(t, progress) >= 3 })
	b, _ := os.ReadFile(progress)
	lastProgress := lastLine(string(b))
	// Each named path comes with its error, tries and next retry (the
	// status page shows them).
	if !strings.Contains(lastProgress, `"unreadable":{"`+src+`":{"count":2,"paths":["secret.log","sub"],"details":[{"path":"secret.log","error":"open `) ||
		!regexp.MustCompile(`"path":"sub","dir":true,"error":"[^"]*permission denied","since":"[^"]+","tries":\d+,"next_retry":"20\d\d-`).MatchString(lastProgress) {
		t.Errorf("progress line %s\nwant secret.log and sub listed as unreadable, with their errors and next retries; stderr:\n%s", lastProgress, stderr.String())
	}
	out, _, _ := run(t, "checkpoint", "--lake", lake)
	if !strings.Contains(out, "unreadable") || !strings.Contains(out, "secret.log") || !strings.Contains(out, "sub (directory)") {
		t.Errorf("checkpoint does not list the unreadable paths:\n%s", out)
	}
	if n := strings.Count(stderr.String(), "cannot read"); n != 2 {
		t.Errorf("%d 'cannot read' warnings, want 2 (one per path):\n%s", n, stderr.String())
	}

	for _, p := range []string{filepath.Join(src, "secret.log"), sub} {
		if err := os.Chmod(p, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	until(t, 90*time.Second, "secret.log and sub/c.log read once readable", func() bool { return totalRows(t, progress) >= 5 })

	// The root deleted, then recreated with a new file.
	if err := os.RemoveAll(src); err != nil {
		t.Fatal(err)
	}
	until(t, 10*time.Second, "the root reported gone", func() bool {
		return strings.Contains(stderr.String(), "cannot read directory") && strings.Count(stderr.String(), "cannot read") == 3
	})
	writeWorld(t, filepath.Join(src, "d.log"), event(base, 6))
	os.Chmod(src, 0o755)
	until(t, 90*time.Second, "d.log read in the recreated root", func() bool { return totalRows(t, progress) >= 6 })
	if cmd.ProcessState != nil {
		t.Fatalf("the stream exited: %s", stderr.String())
	}
	cmd.Process.Signal(syscall.SIGTERM)
	if err := cmd.Wait(); err != nil {
		t.Errorf("stream: %v\n%s", err, stderr.String())
	}
	if n := strings.Count(stderr.String(), "cannot read"); n != 3 {
		t.Errorf("%d 'cannot read' warnings in the run, want 3:\n%s", n, stderr.String())
	}
}

// manyFiles writes the same events twice: over files files (hosts hosts,
// one file per host and 10-minute slot, two events each, a little
// disorder) and in one file, in the order they were generated.
func manyFiles(t *testing.T, dir string, files int) (spread, one string, events int) {
	t.Helper()
	spread, one = filepath.Join(dir, "spread"), filepath.Join(dir, "one")
	const hosts, per = 3, 2
	rng := rand.New(rand.NewPCG(31, 1))
	base := time.Date(2025, 6, 1, 0, 0, 0, 0, time.UTC)
	var all bytes.Buffer
	slots := files / hosts
	for s := range slots {
		slot := base.Add(time.Duration(s) * 10 * time.Minute)
		var lines []string
		var hostOf []int
		for h := range hosts {
			for i := range per {
				at := slot.Add(time.Duration(i*300+rng.IntN(300)) * time.Second)
				lines = append(lines, fmt.Sprintf(`{"event_time":%q,"host":"h%d","n":%d}`+"\n", at.Format(time.RFC3339), h, events))
				hostOf = append(hostOf, h)
				events++
			}
		}
		// Generated host by host: the one file interleaves them as a merged
		// log would, with neighbours swapped now and then (disorder).
		order := rng.Perm(len(lines))
		var buf [hosts]strings.Builder
		for _, k := range order {
			all.WriteString(lines[k])
			buf[hostOf[k]].WriteString(lines[k])
		}
		for h := range hosts {
			path := filepath.Join(spread, fmt.Sprintf("h%d", h), slot.Format("20060102-1504")+".ndjson")
			if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, []byte(buf[h].String()), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	writeWorld(t, filepath.Join(one, "all.ndjson"), all.String())
	return spread, one, events
}

// A backfill over 20,000 files under `ulimit -n 1024` reads every line,
// with the late rows and windows of the same events in one file.
func TestStreamManyFilesLowFDLimit(t *testing.T) {
	if testing.Short() {
		t.Skip("full tier: 20,000 files, two backfills")
	}
	files := 20001
	dir := t.TempDir()
	spread, one, events := manyFiles(t, dir, files)
	backfill := func(source, lake string) (accounting, windows string, cpu time.Duration) {
		t.Helper()
		cmd := exec.Command("sh", "-c", `ulimit -n 1024 && exec "$0" "$@"`, binary, "stream", "--source", source, "--lake", lake,
			"--key", "host", "--window", "1h", "--lateness", "10m", "--once", "--drain", "--progress", os.DevNull)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if err := cmd.Run(); err != nil {
			t.Fatalf("%s: %v\n%s", source, err, tail(stderr.String(), 20))
		}
		if n := strings.Count(stderr.String(), "cannot read"); n > 0 {
			t.Errorf("%s: %d 'cannot read' warnings under ulimit -n 1024", source, n)
		}
		out, errOut, code := run(t, "windows", "--lake", lake, "--format", "csv")
		if code != 0 {
			t.Fatalf("windows: %s", errOut)
		}
		return lastLine(stderr.String()), dropColumns(out), cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	}
	accOne, winOne, cpuOne := backfill(one, filepath.Join(dir, "lake-one"))
	accSpread, winSpread, cpuSpread := backfill(spread, filepath.Join(dir, "lake-spread"))
	t.Logf("%d events: one file %v CPU; %d files under ulimit -n 1024 %v CPU (%.2fx)", events, cpuOne, files, cpuSpread, cpuSpread.Seconds()/cpuOne.Seconds())
	want := fmt.Sprintf("lines read %d = ok", events)
	if !strings.HasPrefix(accSpread, want) {
		t.Errorf("spread over files: %q, want %q...", accSpread, want)
	}
	if counts := func(s string) string { return s[:strings.Index(s, ";")] }; counts(accSpread) != counts(accOne) {
		t.Errorf("accounting differs:\n%d files: %s\none file:  %s", files, accSpread, accOne)
	}
	if winSpread != winOne {
		t.Errorf("windows differ between %d files and one file", files)
	}
}

// dropColumns removes the columns of a windows CSV that name the run
// (computed_at), keeping the results.
func dropColumns(csv string) string {
	sc := bufio.NewScanner(strings.NewReader(csv))
	var out []string
	drop := -1
	for sc.Scan() {
		cols := strings.Split(sc.Text(), ",")
		if drop < 0 {
			for i, c := range cols {
				if c == "computed_at" {
					drop = i
				}
			}
		}
		if drop >= 0 && drop < len(cols) {
			cols = append(cols[:drop], cols[drop+1:]...)
		}
		out = append(out, strings.Join(cols, ","))
	}
	return strings.Join(out, "\n")
}

func tail(s string, n int) string {
	l := lines(s)
	return strings.Join(l[max(0, len(l)-n):], "\n")
}
