package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// runApp runs the app in-process (fast: no binary) and returns its stdout,
// stderr (with the one error line main would print) and exit code.
func runApp(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	app := newApp()
	var out, errb bytes.Buffer
	app.Writer, app.ErrWriter = &out, &errb
	err := app.RunContext(context.Background(), append([]string{"tidemark"}, args...))
	code := exitCode(err, &errb)
	return out.String(), errb.String(), code
}

// A mistyped flag, command or value is one line on stderr that says what
// was probably meant or what form is accepted, and no help dump.
func TestUsageErrors(t *testing.T) {
	lake := t.TempDir()
	base := []string{"stream", "--source", "testdata/example", "--once", "--lake", lake}
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"flag from Spark", append(base, "--window", "1m", "--watermark", "30s"), "unknown flag --watermark; did you mean --lateness? (see tidemark stream --help)"},
		{"misspelt flag", append(base, "--windw", "1m"), "unknown flag --windw; did you mean --window?"},
		{"swapped letters", append(base, "--window", "1m", "--lateenss", "1m"), "did you mean --lateness?"},
		{"flag with =", append(base, "--window", "1m", "--time-feild=ts"), "unknown flag --time-feild; did you mean --time-field?"},
		{"nothing close", append(base, "--window", "1m", "--zzzzzzzz", "1"), "unknown flag --zzzzzzzz (see tidemark stream --help)"},
		{"app flag", []string{"--cpuprofle", "x", "stream"}, "unknown flag --cpuprofle; did you mean --cpuprofile? (see tidemark --help)"},
		{"reconcile flag", []string{"reconcile", "--lake", lake, "--dryrun"}, "unknown flag --dryrun; did you mean --dry-run? (see tidemark reconcile --help)"},
		{"misspelt command", []string{"strem", "--window", "1m"}, `unknown command "strem"; did you mean "stream"? (see tidemark --help)`},
		{"command synonym", []string{"fix"}, `unknown command "fix"; did you mean "reconcile"?`},
		{"duration in words", append(base, "--window", "1 minute"), `--window "1 minute": not a duration; use a Go duration like 1m, 90s, 1h30m`},
		{"size with a unit", append(base, "--window", "1m", "--max-line-bytes", "4MiB"), `--max-line-bytes "4MiB": not a whole number`},
		{"max-future zero", append(base, "--window", "1m", "--max-future", "0s"), "--max-future 0s: want a positive duration"},
		{"max-future negative", append(base, "--window", "1m", "--max-future", "-1h"), "--max-future -1h0m0s: want a positive duration"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			stdout, stderr, code := runApp(t, tc.args...)
			if code == 0 {
				t.Fatalf("exit 0, want an error")
			}
			if !strings.Contains(stderr, tc.want) {
				t.Errorf("stderr %q lacks %q", stderr, tc.want)
			}
			if n := len(lines(stderr)); n != 1 {
				t.Errorf("stderr has %d lines, want 1:\n%s", n, stderr)
			}
			if stdout != "" {
				t.Errorf("stdout is not empty (a help dump?):\n%.300s", stdout)
			}
		})
	}
}

// No arguments still shows the help, and exits 0.
func TestNoArgumentsShowsHelp(t *testing.T) {
	stdout, _, code := runApp(t)
	if code != 0 || !strings.Contains(stdout, "COMMANDS:") {
		t.Errorf("exit %d, stdout %q: want the app's help", code, stdout)
	}
}
