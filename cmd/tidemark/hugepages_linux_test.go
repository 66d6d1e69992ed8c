package main

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A running `tidemark stream` has its heap in transparent huge pages, and
// none with --huge-pages=false (the control: under THP mode "madvise" only
// what asks for them gets them). Read from the process's
// /proc/PID/smaps_rollup once its first batch is committed.
func TestStreamHeapHugePages(t *testing.T) {
	enabled, err := os.ReadFile("/sys/kernel/mm/transparent_hugepage/enabled")
	if err != nil {
		t.Skipf("no transparent huge pages in this kernel: %v", err)
	}
	mode := strings.TrimSpace(string(enabled))
	if strings.Contains(mode, "[never]") {
		t.Skipf("transparent huge pages are off here: %s", mode)
	}
	for _, flag := range []string{"--huge-pages=true", "--huge-pages=false"} {
		if flag == "--huge-pages=false" && strings.Contains(mode, "[always]") {
			continue // every heap gets huge pages then: no difference to see
		}
		kib := streamHugeKiB(t, flag)
		t.Logf("%s (THP %s): AnonHugePages %d KiB", flag, mode, kib)
		switch {
		case flag == "--huge-pages=true" && kib < 2048:
			t.Errorf("%s: AnonHugePages %d KiB, want at least one 2 MiB page", flag, kib)
		case flag == "--huge-pages=false" && kib != 0:
			t.Errorf("%s: AnonHugePages %d KiB under THP %s, want none", flag, kib, mode)
		}
	}
}

// streamHugeKiB starts a following stream on the bundled example, waits for
// its first committed batch, reads its AnonHugePages and stops it.
func streamHugeKiB(t *testing.T, flag string) int {
	t.Helper()
	cmd := exec.Command(binary, flag, "stream", "--source", "testdata/example", "--key", "page", "--value", "value",
		"--window", "10m", "--lake", t.TempDir())
	cmd.Dir = repoRoot(t)
	stderr := &syncBuffer{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(stderr.String(), `"batch_id":0`) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: the stream committed nothing in 20 s:\n%s", flag, stderr.String())
		}
		time.Sleep(20 * time.Millisecond) // polling a child process, not a test wait on our own code
	}
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
