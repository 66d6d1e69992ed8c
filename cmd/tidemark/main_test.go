package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// binary is the tidemark binary built once for the end-to-end tests; empty
// under -short (the fast tier), where every test that runs it skips
// (needBinary).
var binary string

// leakOptions are goleak's allowances: lake/store's (the HTTP transport's
// idle keep-alive connections belong to the shared pool, not to a request)
// and lake's (its zstd encoder maker lives with the process).
var leakOptions = []goleak.Option{
	goleak.IgnoreAnyFunction("net/http.(*persistConn).readLoop"),
	goleak.IgnoreTopFunction("net/http.(*persistConn).writeLoop"),
	goleak.IgnoreAnyFunction("tidemark/lake.makeZstdEncoders"),
}

// TestMain builds the binary (full tier) and fails the package's tests if
// any goroutine of the in-process tests outlives them.
func TestMain(m *testing.M) {
	flag.Parse()
	// The tests wait for what a stream commits, batch by batch: they run
	// it (the binary and in-process) with --trigger 0 unless they give
	// --trigger themselves. The default trigger's gathering is tested by
	// TestSoakFollowingStream and, in stream, TestTriggerSendsWhenAWindowCloses.
	if _, ok := os.LookupEnv("TIDEMARK_TRIGGER"); !ok {
		os.Setenv("TIDEMARK_TRIGGER", "0")
	}
	if testing.Short() {
		// The fast tier builds no binary: the tests that exec it are the
		// full tier's (go test without -short, scripts/test.sh).
		goleak.VerifyTestMain(m, leakOptions...)
		return
	}
	dir, err := os.MkdirTemp("", "tidemark-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binary = filepath.Join(dir, "tidemark")
	build := exec.Command("go", "build", "-o", binary, ".")
	build.Stderr = os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "build tidemark:", err)
		os.Exit(1)
	}
	goleak.VerifyTestMain(m, append(leakOptions, goleak.Cleanup(func(code int) {
		os.RemoveAll(dir)
		os.Exit(code)
	}))...)
}

// needBinary skips a test of the built binary in the fast tier (-short),
// where TestMain builds none.
func needBinary(t testing.TB) {
	t.Helper()
	if binary == "" {
		t.Skip("full tier: runs the built binary (go test without -short)")
	}
}

// run executes the built binary and returns stdout, stderr and the exit code.
func run(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	return runEnv(t, nil, args...)
}

// runEnv is run with extra environment variables.
func runEnv(t *testing.T, env []string, args ...string) (string, string, int) {
	t.Helper()
	needBinary(t)
	cmd := exec.Command(binary, args...)
	cmd.Dir = repoRoot(t)
	cmd.Env = append(cmd.Environ(), env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("run %v: %v", args, err)
	}
	return out.String(), errb.String(), code
}

func repoRoot(t *testing.T) string {
	t.Helper()
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Clean(filepath.Join(wd, "..", ".."))
}

func lines(s string) []string {
	s = strings.TrimRight(s, "\n")
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}

// lastLine returns the last non-empty line of s.
func lastLine(s string) string {
	l := lines(s)
	if len(l) == 0 {
		return ""
	}
	return l[len(l)-1]
}

// backlogInput writes n events (a second apart, 7 pages) over two files,
// with a malformed line every 97th, for a --once run of several batches.
func backlogInput(t *testing.T, n int) string {
	t.Helper()
	dir := t.TempDir()
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var files [2]strings.Builder
	for i := range n {
		b := &files[i*2/n]
		if i%97 == 96 {
			b.WriteString("not json\n")
			continue
		}
		fmt.Fprintf(b, `{"event_time":%q,"arrival_time":%q,"page":"/p%d","value":%d}`+"\n",
			base.Add(time.Duration(i)*time.Second).Format(time.RFC3339), base.Add(time.Duration(i+1)*time.Second).Format(time.RFC3339), i%7, i%10)
	}
	for i := range files {
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("part-%d.ndjson", i)), []byte(files[i].String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}
