package main

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The heap's huge pages as a user sees them, in /proc/PID/smaps of the
// binary: a `stream --once` (a backlog run) has huge pages by default and
// none with --huge-pages=off (the control: under THP mode "madvise" only
// what asks gets them) nor when collections ran before main (GOGC=10); a following stream with --huge-pages=on keeps its
// heap advised (a mapping with VmFlags "hg"), and by default (auto) read
// its first batch into huge pages and then took the advice back (no "hg")
// as that batch came short of full.
func TestStreamHeapHugePages(t *testing.T) {
	needBinary(t) // the kernel's and the runtime's behaviour in the binary: full tier
	enabled, err := os.ReadFile("/sys/kernel/mm/transparent_hugepage/enabled")
	if err != nil {
		t.Skipf("no transparent huge pages in this kernel: %v", err)
	}
	mode := strings.TrimSpace(string(enabled))
	if !strings.Contains(mode, "[madvise]") {
		t.Skipf("THP mode is not madvise here (%s): the advice makes no difference to see", mode)
	}

	in := backlogInput(t, 200_000)
	for _, c := range []struct {
		flag, env string
		huge      bool
	}{
		{"--huge-pages=auto", "", true},
		{"--huge-pages=off", "", false},
		// Collections ran before main: the reservation could start in
		// freed memory, which the runtime zeroes, so there is none.
		{"--huge-pages=auto", "GOGC=10", false},
	} {
		kib := onceHugeKiB(t, c.flag, c.env, in)
		t.Logf("%s %s stream --once: AnonHugePages up to %d KiB", c.env, c.flag, kib)
		if c.huge && kib < 2048 {
			t.Errorf("%s %s stream --once: AnonHugePages %d KiB, want at least one 2 MiB page", c.env, c.flag, kib)
		}
		if !c.huge && kib != 0 {
			t.Errorf("%s %s stream --once: AnonHugePages %d KiB, want none", c.env, c.flag, kib)
		}
	}

	for _, c := range []struct {
		flag          string
		advised, huge bool // VmFlags hg on some mapping; AnonHugePages
	}{{"--huge-pages=on", true, true}, {"--huge-pages=auto", false, true}, {"--huge-pages=off", false, false}} {
		cmd, stderr := startFollowing(t, nil, c.flag, "stream", "--source", "testdata/example", "--key", "page", "--value", "value",
			"--window", "10m", "--lake", t.TempDir())
		s, err := readSmaps(cmd.Process.Pid)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s following stream after its first batch: AnonHugePages %d KiB, %d mappings advised hg", c.flag, s.anonHugeKiB, s.hg)
		if (s.hg > 0) != c.advised {
			t.Errorf("%s following stream: %d mappings advised hg, want advised %v", c.flag, s.hg, c.advised)
		}
		if c.huge && s.anonHugeKiB < 2048 {
			t.Errorf("%s following stream: AnonHugePages %d KiB, want at least one 2 MiB page", c.flag, s.anonHugeKiB)
		}
		if !c.huge && s.anonHugeKiB != 0 {
			t.Errorf("%s following stream: AnonHugePages %d KiB, want none", c.flag, s.anonHugeKiB)
		}
		if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		if err := cmd.Wait(); err != nil {
			t.Errorf("%s: stream after SIGTERM: %v\n%s", c.flag, err, stderr.String())
		}
	}
}

// TestHugePagesMode: on and auto back the heap, off does not, anything
// else is an error naming the values.
func TestHugePagesMode(t *testing.T) {
	for mode, want := range map[string]bool{"auto": true, "on": true, "off": false} {
		if got, err := hugePages(mode); err != nil || got != want {
			t.Errorf("hugePages(%q) = %v, %v; want %v", mode, got, err, want)
		}
	}
	if _, err := hugePages("yes"); err == nil || !strings.Contains(err.Error(), "want auto, on or off") {
		t.Errorf("hugePages(\"yes\"): %v, want an error naming the values", err)
	}
}

// onceHugeKiB runs `stream --once --drain` over in and returns the most
// AnonHugePages seen while it ran (polled until it exits).
func onceHugeKiB(t *testing.T, flag, env, in string) int {
	t.Helper()
	needBinary(t)
	cmd := exec.Command(binary, flag, "stream", "--source", in, "--key", "page", "--value", "value",
		"--window", "1m", "--lake", t.TempDir(), "--once", "--drain")
	if env != "" {
		cmd.Env = append(cmd.Environ(), env)
	}
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
		if s, err := readSmaps(cmd.Process.Pid); err == nil { // gone once it exits
			most = max(most, s.anonHugeKiB)
		}
		time.Sleep(2 * time.Millisecond) // polling a child process, not a test wait on our own code
	}
}

// smaps is what the tests read of a process's /proc/PID/smaps: its
// AnonHugePages, and how many mappings carry VmFlags hg (MADV_HUGEPAGE).
type smaps struct {
	anonHugeKiB, hg int
}

func readSmaps(pid int) (smaps, error) {
	var s smaps
	f, err := os.Open(fmt.Sprintf("/proc/%d/smaps", pid))
	if err != nil {
		return s, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 2 {
			continue
		}
		switch fields[0] {
		case "AnonHugePages:":
			kib, err := strconv.Atoi(fields[1])
			if err != nil {
				return s, fmt.Errorf("smaps: %q: %w", sc.Text(), err)
			}
			s.anonHugeKiB += kib
		case "VmFlags:":
			if slices.Contains(fields[1:], "hg") {
				s.hg++
			}
		}
	}
	return s, sc.Err()
}
