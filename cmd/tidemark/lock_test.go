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

// A second `tidemark stream` on the same checkpoint exits with a clear error
// while the first runs; SIGTERM stops the first cleanly (exit 0).
func TestSecondStreamIsLockedOut(t *testing.T) {
	lakeDir := t.TempDir()
	args := []string{"stream", "--source", "testdata/example", "--window", "10m", "--lake", lakeDir}
	first := exec.Command(binary, args...)
	first.Dir = repoRoot(t)
	firstErr := &syncBuffer{}
	first.Stderr = firstErr
	if err := first.Start(); err != nil {
		t.Fatal(err)
	}
	defer first.Process.Kill()
	// Wait (bounded) until the first stream has taken the lock: its first
	// progress line says it is running.
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(firstErr.String(), `"batch_id":0`) {
		if time.Now().After(deadline) {
			t.Fatalf("first stream did not start:\n%s", firstErr.String())
		}
		time.Sleep(20 * time.Millisecond) // polling a child process, not a test wait on our own code
	}
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
