package main

import (
	"os/exec"
	"testing"
)

// With GOMEMLIMIT set below what the stream holds live, the binary's GC
// works to it: in the GC's own trace (GODEBUG=gctrace=1) each goal hugs
// the live heap the collection before found, where without it (the
// default --memory-limit auto, 320 MiB plus the state, and GOGC 70) the
// goal is 1.7 times that.
func TestGOMEMLIMITBinary(t *testing.T) {
	needBinary(t)
	in := backlogInput(t, 300_000)
	ratio := func(env ...string) (float64, int) {
		cmd := exec.Command(binary, "stream", "--source", in, "--key", "page", "--value", "value",
			"--window", "1m", "--lake", t.TempDir(), "--once", "--drain")
		cmd.Env = append(append(cmd.Environ(), "GODEBUG=gctrace=1"), env...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%v: %v\n%s", env, err, out)
		}
		return goalRatio(string(out))
	}
	limited, n := ratio("GOMEMLIMIT=24MiB")
	t.Logf("GOMEMLIMIT=24MiB: median heap goal / live heap %.2f over %d collections", limited, n)
	if n < 1 || limited > 1.3 {
		t.Errorf("GOMEMLIMIT=24MiB: median heap goal / live heap %.2f over %d collections, want <= 1.3 (at least one)", limited, n)
	}
	free, n := ratio()
	t.Logf("without GOMEMLIMIT: median heap goal / live heap %.2f over %d collections", free, n)
	if n < 1 || free < 1.5 {
		t.Errorf("without GOMEMLIMIT: median heap goal / live heap %.2f over %d collections, want about 1.7: else this test proves nothing", free, n)
	}
}

// Under `ulimit -v` (a cap on address space, as overcommit_memory=2 makes
// one) the binary starts and runs: nothing reserves a large range at start.
// A Go process takes ~1.2 GB of address space before main and the stream
// ~1.6 GB in all here (glibc's malloc arenas bounded by MALLOC_ARENA_MAX);
// the 512 MiB the --huge-pages reservation took made it fail under 2 GB.
func TestAddressSpaceLimitBinary(t *testing.T) {
	needBinary(t)
	in := backlogInput(t, 50_000)
	cmd := exec.Command("sh", "-c", `ulimit -v 2000000 && exec "$0" "$@"`, binary, "stream", "--source", in,
		"--key", "page", "--window", "1m", "--lake", t.TempDir(), "--once", "--drain")
	cmd.Env = append(cmd.Environ(), "MALLOC_ARENA_MAX=1")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("stream under ulimit -v 2000000: %v\n%.2000s", err, out)
	}
}
