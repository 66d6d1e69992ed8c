package main

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

var updateGolden = flag.Bool("update", false, "rewrite cmd/tidemark/testdata golden files")

func ttyStreamArgs(in, lakeDir string) []string {
	return []string{"stream", "--source", in, "--key", "page", "--value", "value", "--arrival-field", "arrival_time",
		"--window", "1m", "--lateness", "10s", "--max-batch-rows", "250", "--once", "--drain", "--lake", lakeDir}
}

// inTerminal runs the binary in a real pseudo-terminal: a tmux session
// (private server) runs it under script(1), which records every byte the
// program wrote to its terminal. It returns that raw output and the screen
// tmux shows once the program has exited.
func inTerminal(t *testing.T, args ...string) (raw, screen string) {
	t.Helper()
	for _, tool := range []string{"tmux", "script"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("no %s: the terminal display is tested in a real pseudo-terminal", tool)
		}
	}
	dir := t.TempDir()
	sock := filepath.Join(dir, "tmux.sock")
	rawPath := filepath.Join(dir, "raw")
	quoted := make([]string, len(args))
	for i, a := range args {
		quoted[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
	}
	needBinary(t)
	prog := binary + " " + strings.Join(quoted, " ")
	shell := fmt.Sprintf("script -q -e -c %s %s; tmux -S %s wait-for -S done",
		"'"+strings.ReplaceAll(prog, "'", `'\''`)+"'", rawPath, sock)
	tmux := func(a ...string) string {
		t.Helper()
		cmd := exec.Command("tmux", append([]string{"-S", sock, "-f", "/dev/null"}, a...)...)
		cmd.Dir = repoRoot(t)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("tmux %v: %v\n%s", a, err, out)
		}
		return string(out)
	}
	tmux("new-session", "-d", "-x", "150", "-y", "50", "-c", repoRoot(t), shell)
	t.Cleanup(func() { exec.Command("tmux", "-S", sock, "kill-server").Run() })
	tmux("set-option", "-g", "remain-on-exit", "on")
	// Block until the shell signals the program has exited (no polling).
	// The session keeps its pane (remain-on-exit) for capture-pane.
	done := make(chan struct{})
	go func() {
		defer close(done)
		exec.Command("tmux", "-S", sock, "wait-for", "done").Run()
	}()
	select {
	case <-done:
	case <-time.After(2 * time.Minute):
		t.Fatalf("the program did not finish in the terminal:\n%s", tmux("capture-pane", "-p"))
	}
	screen = tmux("capture-pane", "-p", "-S", "-200") // with the scrollback
	data, err := os.ReadFile(rawPath)
	if err != nil {
		t.Fatal(err)
	}
	return string(data), screen
}

// On a terminal, a --once run shows the bar (with lines/s, ETA, counts and
// watermark), no JSON progress line, and ends with the table.
func TestStreamTerminalDisplay(t *testing.T) {
	in := backlogInput(t, 3000)
	raw, screen := inTerminal(t, ttyStreamArgs(in, t.TempDir())...)
	for _, want := range []string{"reading", "% |", "KiB", "lines/s", "ok ", "quarantined", "watermark 2026-01-01T"} {
		if !strings.Contains(raw, want) {
			t.Errorf("the live display lacks %q; raw output:\n%q", want, raw)
		}
	}
	if !strings.Contains(raw, "[") || !regexp.MustCompile(`\[\d+s:\d+s\]`).MatchString(raw) {
		t.Errorf("no ETA ([elapsed:left]) in the bar; raw output:\n%q", raw)
	}
	if strings.Contains(raw, `"batch_id"`) || strings.Contains(raw, "lines read 3000 =") {
		t.Errorf("JSON progress or the machine line on a terminal; raw output:\n%q", raw)
	}
	// The screen at the end: the table, and nothing left of the bar.
	for _, want := range []string{"tidemark stream: 13 batches in", "lines read", "3,000", "ok", "2,970", "quarantined", "malformed", "30", "windows emitted"} {
		if !strings.Contains(screen, want) {
			t.Errorf("final screen lacks %q:\n%s", want, screen)
		}
	}
	if strings.Contains(screen, "% |") || strings.Contains(screen, "reading") {
		t.Errorf("the bar is still on the final screen:\n%s", screen)
	}
}

// volatile masks what differs between two runs of the same input: the
// wall-clock read time, rates and durations, and the lake's path.
var volatile = []*regexp.Regexp{
	regexp.MustCompile(`"timestamp":"[^"]*"`),
	regexp.MustCompile(`"processed_rows_per_second":[-0-9.e+]+`),
	regexp.MustCompile(`"duration_ms":[-0-9.e+]+`),
	// The checkpoint's entries hold the input paths, whose length differs
	// between test directories.
	regexp.MustCompile(`"checkpoint_bytes":[0-9]+`),
}

func maskVolatile(s, lakeDir, in string) string {
	for _, re := range volatile {
		s = re.ReplaceAllStringFunc(s, func(m string) string { return m[:strings.IndexByte(m, ':')+1] + "X" })
	}
	s = strings.ReplaceAll(s, lakeDir, "LAKE")
	return strings.ReplaceAll(s, in, "IN")
}

// The same run with stderr to a file (not a terminal) prints the JSON
// progress lines and the accounting line exactly as before the terminal
// display existed: testdata/stream_stderr.golden was recorded with the
// binary of main before this change (rates, durations, read times,
// checkpoint sizes and paths masked): -update with TIDEMARK_GOLDEN_BINARY
// naming that binary. It was re-recorded when the progress line gained
// "sources" and "checkpoint_bytes" and aligned reading changed which lines
// of the two input files each batch holds, and again when the engine's
// state_bytes estimate became 68 B a slot (the chunked slot slab), and
// again when files not read yet were peeked instead of each giving up its
// first line to batch 0 (batch 0 no longer holds the second file's first
// line, so its max event time and watermark follow the first file).
func TestStreamStderrFileUnchanged(t *testing.T) {
	needBinary(t)
	bin := binary
	if b := os.Getenv("TIDEMARK_GOLDEN_BINARY"); b != "" && *updateGolden {
		bin = b
	}
	in, lakeDir := backlogInput(t, 3000), t.TempDir()
	errPath := filepath.Join(t.TempDir(), "stderr")
	f, err := os.Create(errPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, append(ttyStreamArgs(in, lakeDir), "--log-level", "warn")...)
	cmd.Dir = repoRoot(t)
	cmd.Stderr = f
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	f.Close()
	data, err := os.ReadFile(errPath)
	if err != nil {
		t.Fatal(err)
	}
	got := maskVolatile(string(data), lakeDir, in)
	golden := filepath.Join("testdata", "stream_stderr.golden")
	if *updateGolden {
		if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if got != string(want) {
		t.Errorf("stderr to a file changed:\ngot:\n%s\nwant:\n%s", got, want)
	}
	if strings.Contains(string(data), "\x1b[") || strings.Contains(string(data), "% |") {
		t.Errorf("terminal codes or a bar in a file:\n%q", data)
	}
}

// A continuous run on a terminal: one status line updated in place after
// each batch (rate, watermark, lag behind the newest event, batch
// duration); Ctrl-C stops it cleanly and the table follows.
func TestStreamTerminalContinuous(t *testing.T) {
	if _, err := exec.LookPath("tmux"); err != nil {
		t.Skip("no tmux")
	}
	in, lakeDir := t.TempDir(), t.TempDir()
	path := filepath.Join(in, "e.ndjson")
	if err := os.WriteFile(path, []byte(`{"event_time":"2026-01-01T00:00:01Z","page":"/a"}`+"\n"+`{"event_time":"2026-01-01T00:00:20Z","page":"/a"}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(t.TempDir(), "tmux.sock")
	tmux := func(a ...string) string {
		t.Helper()
		out, err := exec.Command("tmux", append([]string{"-S", sock, "-f", "/dev/null"}, a...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("tmux %v: %v\n%s", a, err, out)
		}
		return string(out)
	}
	needBinary(t)
	prog := fmt.Sprintf("%s stream --source %s --key page --window 10s --lateness 5s --lake %s --rescan-interval 100ms --log-level warn; tmux -S %s wait-for -S done",
		binary, in, lakeDir, sock)
	tmux("new-session", "-d", "-x", "200", "-y", "20", prog)
	t.Cleanup(func() { exec.Command("tmux", "-S", sock, "kill-server").Run() })
	tmux("set-option", "-g", "remain-on-exit", "on")
	screenHas := func(want string) string {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			screen := tmux("capture-pane", "-p")
			if strings.Contains(screen, want) {
				return screen
			}
			if time.Now().After(deadline) {
				t.Fatalf("the screen never showed %q:\n%s", want, screen)
			}
			time.Sleep(50 * time.Millisecond) // polling a child's terminal, not a test wait on our own code
		}
	}
	screen := screenHas("batch 0 | ")
	for _, want := range []string{"lines/s", "watermark 2026-01-01T00:00:15Z", "5s behind newest event", "ok 2 late 0 quarantined 0"} {
		if !strings.Contains(screen, want) {
			t.Errorf("status line lacks %q:\n%s", want, screen)
		}
	}
	appendFile(t, path, `{"event_time":"2026-01-01T00:00:30Z","page":"/a"}`+"\n"+"not json\n")
	screen = screenHas("batch 1 | ")
	if strings.Contains(screen, "batch 0 | ") || !strings.Contains(screen, "watermark 2026-01-01T00:00:25Z") || !strings.Contains(screen, "quarantined 1") {
		t.Errorf("the status line was not replaced in place:\n%s", screen)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		exec.Command("tmux", "-S", sock, "wait-for", "done").Run()
	}()
	tmux("send-keys", "C-c")
	select {
	case <-done:
	case <-time.After(time.Minute):
		t.Fatalf("Ctrl-C did not stop the stream:\n%s", tmux("capture-pane", "-p"))
	}
	// With the scrollback: tmux's "Pane is dead" line, once the shell has
	// ended, scrolls the screen by one.
	screen = tmux("capture-pane", "-p", "-S", "-100")
	for _, want := range []string{"tidemark stream: 2 batches in", "lines read                        4", "malformed                     1", "windows emitted                   1"} {
		if !strings.Contains(screen, want) {
			t.Errorf("final screen lacks %q:\n%s", want, screen)
		}
	}
	if strings.Contains(screen, "batch 1 | ") {
		t.Errorf("the status line is still on the final screen:\n%s", screen)
	}
}

// With --progress FILE the terminal gets no display: the JSON lines go to
// the file exactly as before, and stderr ends with the accounting line.
func TestStreamTerminalWithProgressFile(t *testing.T) {
	in, lakeDir := backlogInput(t, 3000), t.TempDir()
	progress := filepath.Join(t.TempDir(), "progress.ndjson")
	raw, _ := inTerminal(t, append(ttyStreamArgs(in, lakeDir), "--progress", progress, "--log-level", "warn")...)
	if strings.Contains(raw, "% |") || strings.Contains(raw, "\x1b[2K") || strings.Contains(raw, "tidemark stream: 13 batches") {
		t.Errorf("a display although --progress was given:\n%q", raw)
	}
	if !strings.Contains(raw, "lines read 3000 = ok 2970 + late 0 + quarantined 30 (malformed 30); 13 batches, 350 windows emitted, lake "+lakeDir) {
		t.Errorf("no accounting line:\n%q", raw)
	}
	data, err := os.ReadFile(progress)
	if err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile(filepath.Join("testdata", "stream_stderr.golden"))
	if err != nil {
		t.Fatal(err)
	}
	// The golden is stderr: the JSON lines, then the accounting line.
	wantJSON := strings.Join(lines(string(want))[:13], "\n") + "\n"
	if got := maskVolatile(string(data), lakeDir, in); got != wantJSON {
		t.Errorf("--progress file:\n%s\nwant:\n%s", got, wantJSON)
	}
}
