package main

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A running `tidemark stream` has its heap in transparent huge pages with
// --huge-pages=on, and none with off (the control: under THP mode "madvise"
// only what asks for them gets them) nor by default (auto: a following
// stream runs for good). Read from the process's /proc/PID/smaps_rollup
// once its first batch is committed.
func TestStreamHeapHugePages(t *testing.T) {
	enabled, err := os.ReadFile("/sys/kernel/mm/transparent_hugepage/enabled")
	if err != nil {
		t.Skipf("no transparent huge pages in this kernel: %v", err)
	}
	mode := strings.TrimSpace(string(enabled))
	if strings.Contains(mode, "[never]") {
		t.Skipf("transparent huge pages are off here: %s", mode)
	}
	for _, c := range []struct {
		flag string
		huge bool
	}{{"--huge-pages=on", true}, {"--huge-pages=off", false}, {"--huge-pages=auto", false}} {
		if !c.huge && strings.Contains(mode, "[always]") {
			continue // every heap gets huge pages then: no difference to see
		}
		kib := streamHugeKiB(t, c.flag)
		t.Logf("%s (THP %s): AnonHugePages %d KiB", c.flag, mode, kib)
		checkHuge(t, c.flag, mode, c.huge, kib)
	}
	// A --once run is a batch job: auto backs its heap.
	in := t.TempDir()
	var lines strings.Builder
	for i := range 200_000 {
		fmt.Fprintf(&lines, `{"event_time":"2026-01-01T00:%02d:%02d.%03dZ","page":"/p%d","value":%d}`+"\n", i/60000%60, i/1000%60, i%1000, i%500, i%1000)
	}
	if err := os.WriteFile(filepath.Join(in, "events.ndjson"), []byte(lines.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		flag string
		huge bool
	}{{"--huge-pages=auto", true}, {"--huge-pages=off", false}} {
		if !c.huge && strings.Contains(mode, "[always]") {
			continue
		}
		kib := onceHugeKiB(t, c.flag, in)
		t.Logf("%s stream --once (THP %s): AnonHugePages up to %d KiB", c.flag, mode, kib)
		checkHuge(t, c.flag+" stream --once", mode, c.huge, kib)
	}
}

func checkHuge(t *testing.T, what, mode string, huge bool, kib int) {
	t.Helper()
	switch {
	case huge && kib < 2048:
		t.Errorf("%s: AnonHugePages %d KiB, want at least one 2 MiB page", what, kib)
	case !huge && kib != 0:
		t.Errorf("%s: AnonHugePages %d KiB under THP %s, want none", what, kib, mode)
	}
}

// onceHugeKiB runs `stream --once --drain` over in and returns the most
// AnonHugePages seen while it ran (polled until it exits).
func onceHugeKiB(t *testing.T, flag, in string) int {
	t.Helper()
	cmd := exec.Command(binary, flag, "stream", "--source", in, "--key", "page", "--value", "value",
		"--window", "1m", "--lake", t.TempDir(), "--once", "--drain")
	stderr := &syncBuffer{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	most := 0
	for {
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("%s stream --once: %v\n%s", flag, err, stderr.String())
			}
			return most
		default:
		}
		if kib, err := anonHugeKiB(cmd.Process.Pid); err == nil { // gone once it exits
			most = max(most, kib)
		}
		time.Sleep(2 * time.Millisecond) // polling a child process, not a test wait on our own code
	}
}

// TestHugePagesMode: auto backs the heap of what runs to completion, on
// and off are what they say, anything else is an error.
func TestHugePagesMode(t *testing.T) {
	for _, c := range []struct {
		mode   string
		finite bool
		want   bool
	}{{"auto", true, true}, {"auto", false, false}, {"on", false, true}, {"on", true, true}, {"off", true, false}, {"off", false, false}} {
		if got, err := hugePages(c.mode, c.finite); err != nil || got != c.want {
			t.Errorf("hugePages(%q, finite %v) = %v, %v; want %v", c.mode, c.finite, got, err, c.want)
		}
	}
	if _, err := hugePages("yes", true); err == nil || !strings.Contains(err.Error(), "want auto, on or off") {
		t.Errorf("hugePages(\"yes\"): %v, want an error naming the values", err)
	}
}

// streamHugeKiB starts a following stream on the bundled example, waits for
// its first committed batch, reads its AnonHugePages and stops it.
func streamHugeKiB(t *testing.T, flag string) int {
	t.Helper()
	cmd, stderr := startFollowing(t, nil, flag, "stream", "--source", "testdata/example", "--key", "page", "--value", "value",
		"--window", "10m", "--lake", t.TempDir())
	kib, err := anonHugeKiB(cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Errorf("%s: stream after SIGTERM: %v\n%s", flag, err, stderr.String())
	}
	return kib
}

// anonHugeKiB is a process's AnonHugePages from /proc/PID/smaps_rollup.
func anonHugeKiB(pid int) (int, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/smaps_rollup", pid))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if fields := strings.Fields(sc.Text()); len(fields) >= 2 && fields[0] == "AnonHugePages:" {
			return strconv.Atoi(fields[1])
		}
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, fmt.Errorf("/proc/%d/smaps_rollup has no AnonHugePages", pid)
}
