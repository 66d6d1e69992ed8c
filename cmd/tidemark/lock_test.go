package main

import (
	"bytes"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// syncBuffer is a bytes.Buffer safe for a child process's writer goroutine
// and the test reading it.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// startFollowing starts `tidemark ARGS` (a stream without --once) from the
// repository root with env added, and waits (bounded) until its first
// batch is committed: its progress line for batch 0. The caller stops it;
// a stream that does not get there is sent SIGQUIT, for its stacks.
func startFollowing(t *testing.T, env []string, args ...string) (*exec.Cmd, *syncBuffer) {
	t.Helper()
	needBinary(t)
	cmd := exec.Command(binary, args...)
	cmd.Dir = repoRoot(t)
	cmd.Env = append(cmd.Environ(), env...)
	stderr := &syncBuffer{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill() })
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(stderr.String(), `"batch_id":0`) {
		if time.Now().After(deadline) {
			cmd.Process.Signal(syscall.SIGQUIT)
			cmd.Wait()
			t.Fatalf("%v: the stream committed nothing in 30 s:\n%s", args, stderr.String())
		}
		time.Sleep(20 * time.Millisecond) // polling a child process, not a test wait on our own code
	}
	return cmd, stderr
}

// A second `tidemark stream` on the same checkpoint exits with a clear error
// while the first runs; SIGTERM stops the first cleanly (exit 0).
func TestSecondStreamIsLockedOut(t *testing.T) {
	lakeDir := t.TempDir()
	args := []string{"stream", "--source", "testdata/example", "--window", "10m", "--lake", lakeDir}
	first, firstErr := startFollowing(t, nil, args...)
	_, stderr, code := run(t, args...)
	if code == 0 || !strings.Contains(stderr, "checkpoint is locked by another running stream") {
		t.Errorf("second stream: exit %d, stderr %q", code, stderr)
	}
	if err := first.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := first.Wait(); err != nil {
		t.Errorf("first stream after SIGTERM: %v\n%s", err, firstErr.String())
	}
}
