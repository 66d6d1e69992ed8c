package main

import (
	"strings"
	"testing"
	"time"

	"github.com/urfave/cli/v2"

	"tidemark/stream"
)

// Bad flag values give one clear line on stderr and a non-zero exit, never a
// stack trace or a usage dump.
func TestStreamFlagErrors(t *testing.T) {
	base := []string{"stream", "--source", "testdata/example", "--once"}
	tests := []struct {
		name  string
		flags []string
		want  string
	}{
		{"negative window", []string{"--window", "-5m"}, "window must be positive"},
		{"missing window", nil, "--window is required"},
		{"slide larger than window", []string{"--window", "1m", "--slide", "2m"}, "slide 2m0s is larger than the window 1m0s"},
		{"unknown late rule", []string{"--window", "1m", "--late-rule", "sometimes"}, "--late-rule"},
		{"unknown output mode", []string{"--window", "1m", "--output-mode", "complete"}, "--output-mode"},
		{"unknown policy", []string{"--window", "1m", "--watermark-policy", "avg"}, "--watermark-policy"},
		{"key in tidemark's namespace", []string{"--window", "1m", "--key", "_tm_status"}, `--key "_tm_status": column names starting with "_tm_" are tidemark's own; name the column: --key "name=_tm_status"`},
		{"keys equal but for case", []string{"--window", "1m", "--key", "page", "--key", "PAGE"}, `--key "page" and --key "PAGE" both make the column "PAGE"`},
		{"key with a blank", []string{"--window", "1m", "--key", "a b"}, `--key "a b": a Delta column name cannot hold`},
		{"key with an equals sign", []string{"--window", "1m", "--key", "`p=q`"}, `--key "` + "`p=q`" + `": a Delta column name cannot hold`},
		{"two keys, one column", []string{"--window", "1m", "--key", "request.path", "--key", "url.path"}, `both make the column "path"`},
		{"negative lateness", []string{"--window", "1m", "--lateness", "-1s"}, "--lateness must not be negative"},
		{"drain without once", []string{"--window", "1m", "--drain"}, "--drain needs --once"},
		{"zero batch rows", []string{"--window", "1m", "--max-batch-rows", "0"}, "--max-batch-rows must be at least 1"},
		{"zero stall threshold", []string{"--window", "1m", "--stall-after", "0s"}, "--stall-after must be positive, got 0s"},
		{"negative stall threshold", []string{"--window", "1m", "--stall-after", "-1m"}, "--stall-after must be positive, got -1m0s"},
		{"unknown format", []string{"--window", "1m", "--format", "xml"}, "xml"},
		{"unknown time unit", []string{"--window", "1m", "--time-unit", "days"}, "days"},
		{"not a duration", []string{"--window", "ten minutes"}, "ten minutes"},
		{"unknown flag", []string{"--window", "1m", "--windw", "1m"}, "windw"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			args := append(append([]string{}, base...), tc.flags...)
			if tc.name == "drain without once" {
				args = append([]string{"stream", "--source", "testdata/example"}, tc.flags...)
			}
			args = append(args, "--lake", t.TempDir())
			stdout, stderr, code := run(t, args...)
			if code == 0 {
				t.Fatalf("exit 0, want an error; stdout:\n%s", stdout)
			}
			if !strings.Contains(stderr, tc.want) {
				t.Errorf("stderr %q lacks %q", stderr, tc.want)
			}
			if n := len(lines(stderr)); n != 1 {
				t.Errorf("stderr has %d lines, want 1:\n%s", n, stderr)
			}
			if strings.Contains(stderr, "goroutine ") || strings.Contains(stderr, "panic") {
				t.Errorf("stderr shows a crash:\n%s", stderr)
			}
		})
	}
}

// Every stream flag can be set from TIDEMARK_<FLAG>.
func TestStreamFlagsFromEnvironment(t *testing.T) {
	for _, f := range streamCommand().Flags {
		name := f.Names()[0]
		envs := env(name)
		type enver interface{ GetEnvVars() []string }
		ev, ok := f.(enver)
		if !ok {
			t.Fatalf("flag %s has no env vars", name)
		}
		if got := ev.GetEnvVars(); len(got) == 0 || got[0] != envs[0] {
			t.Errorf("flag --%s: env vars %v, want %s first", name, got, envs[0])
		}
	}
}

// --stall-after reaches the runner's StallAfter (whose effect
// stream.TestRunnerNamesStalledFile tests); unset, it is the default.
func TestStallAfterFlag(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want time.Duration
	}{
		{nil, stream.DefaultStallAfter},
		{[]string{"--stall-after", "5m"}, 5 * time.Minute},
		{[]string{"--stall-after", "90s"}, 90 * time.Second},
	} {
		cmd := streamCommand()
		var got stream.RunnerConfig
		var cfgErr error
		cmd.Action = func(c *cli.Context) error {
			got, cfgErr = streamConfig(c)
			return nil
		}
		app := &cli.App{Name: "tidemark", Commands: []*cli.Command{cmd}}
		args := append([]string{"tidemark", "stream", "--source", "testdata/example", "--window", "1m"}, tc.args...)
		if err := app.Run(args); err != nil || cfgErr != nil {
			t.Fatalf("%v: %v, %v", tc.args, err, cfgErr)
		}
		if got.StallAfter != tc.want {
			t.Errorf("%v: StallAfter %s, want %s", tc.args, got.StallAfter, tc.want)
		}
	}
}
