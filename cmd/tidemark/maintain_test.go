package main

import (
	"context"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"tidemark/lake"
)

// TestMaintenanceWhileStreaming runs, as cron would beside two live streams
// (two --name, one lake) that tail growing files, compact, vacuum (forced to a zero retention,
// the default, and a short one it must refuse) and reconcile in a loop.
// Afterwards every input line is in raw_events or quarantine exactly once,
// no table references a file that is gone and every active file reads, and
// after a final reconcile the counts in window_results add up to the rows
// of raw_events.
func TestMaintenanceWhileStreaming(t *testing.T) {
	if testing.Short() {
		t.Skip("maintenance loop: not in -short")
	}
	maintainWhileStreaming(t, t.TempDir(), nil, nil)
}

// TestMaintenanceWhileStreamingS3 is the same on a lake in a bucket of a
// real S3-compatible server (versitygw).
func TestMaintenanceWhileStreamingS3(t *testing.T) {
	if testing.Short() {
		t.Skip("maintenance loop: not in -short")
	}
	srv, env := versityEnv(t)
	bucket := srv.Bucket(t)
	maintainWhileStreaming(t, "s3://"+bucket+"/lake", env, []string{"--s3-endpoint", srv.Endpoint})
}

func maintainWhileStreaming(t *testing.T, lakeURL string, env, flags []string) {
	in := newCrashInput(t.TempDir(), 0)
	// Two streams on the lake, as two hosts would run them: "one" tails a/,
	// "two" tails b/.
	streamArgs := func(name, source string) []string {
		return append([]string{"stream", "--name", name, "--source", filepath.Join(in.dir, source),
			"--key", "page", "--value", "value", "--window", "1m", "--lateness", "30s", "--max-batch-rows", "150",
			"--rescan-interval", "50ms", "--lake", lakeURL, "--progress", filepath.Join(t.TempDir(), "progress.ndjson")}, flags...)
	}
	names := [][2]string{{"one", "a"}, {"two", "b"}}
	lakeArgs := append([]string{"--lake", lakeURL}, flags...)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for _, d := range []string{"a", "b"} {
		if err := os.MkdirAll(filepath.Join(in.dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// The lake first, so that it exists before the maintenance starts.
	if _, stderr, code := runEnv(t, env, append(streamArgs("one", "a"), "--once")...); code != 0 {
		t.Fatalf("create the lake: exit %d\n%s", code, stderr)
	}
	writeErr := make(chan error, 1)
	go func() { writeErr <- in.write(ctx, 6000, rand.New(rand.NewPCG(3, 4))) }()
	var streams []*exec.Cmd
	var streamErrs []*strings.Builder
	for _, n := range names {
		needBinary(t)
		cmd := exec.Command(binary, streamArgs(n[0], n[1])...)
		cmd.Env = append(cmd.Environ(), env...)
		var errb strings.Builder
		cmd.Stderr = &errb
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		defer cmd.Process.Kill()
		streams, streamErrs = append(streams, cmd), append(streamErrs, &errb)
	}

	type step struct {
		args []string
		fail bool // the command must refuse
	}
	steps := []step{
		{args: []string{"compact"}},
		{args: []string{"vacuum", "--retain", "0s", "--force"}},
		{args: []string{"reconcile"}},
		{args: []string{"vacuum"}},
		{args: []string{"compact", "--table", "window_results"}},
		{args: []string{"vacuum", "--retain", "1m"}, fail: true},
		{args: []string{"vacuum", "--retain", "1s", "--force"}},
	}
	rounds := 0
	for done := false; !done; {
		select {
		case err := <-writeErr:
			if err != nil {
				t.Fatalf("writer: %v", err)
			}
			done = true
		default:
		}
		for _, s := range steps {
			out, stderr, code := runEnv(t, env, append(s.args, lakeArgs...)...)
			if s.fail != (code != 0) {
				t.Fatalf("round %d: %s: exit %d\n%s%s", rounds, strings.Join(s.args, " "), code, out, stderr)
			}
		}
		rounds++
	}
	// Stop the streams cleanly (each commits its current batch), then
	// finish the input and close every window.
	for i, cmd := range streams {
		if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		if err := cmd.Wait(); err != nil {
			t.Fatalf("stream %s: %v\n%s", names[i][0], err, streamErrs[i].String())
		}
	}
	for _, n := range names {
		if _, stderr, code := runEnv(t, env, append(streamArgs(n[0], n[1]), "--once", "--drain")...); code != 0 {
			t.Fatalf("final run of stream %s: exit %d\n%s", n[0], code, stderr)
		}
	}
	// The final reconcile checks every window (--since): two streams that
	// emit the same window key replace each other's row in window_results
	// (the last emission wins; SPEC §9's merge of shards' partial
	// aggregates is not built), and only a range reconcile recomputes
	// windows that hold no late rows.
	for _, s := range [][]string{{"compact"}, {"vacuum", "--retain", "0s", "--force"}, {"reconcile", "--since", "87600h"}} {
		if out, stderr, code := runEnv(t, env, append(s, lakeArgs...)...); code != 0 {
			t.Fatalf("final %s: exit %d\n%s%s", s[0], code, out, stderr)
		}
	}
	t.Logf("%d maintenance rounds beside the stream", rounds)

	// No table references a file that is gone.
	out, stderr, code := runEnv(t, env, append([]string{"repair"}, lakeArgs...)...)
	if code != 0 || strings.Contains(out, "missing or damaged") {
		t.Errorf("repair after the loop: exit %d\n%s%s", code, out, stderr)
	}
	// Every line exactly once; reading every column of every active file.
	lk := openTestLake(t, lakeURL)
	var rawRows int64
	checkOnce(t, in.lines, lakeLines(t, lk, lake.RawQuery{}, func(lake.RawBatch, int) { rawRows++ }))
	// After the final reconcile, window_results counts every raw row once
	// (tumbling windows, all closed by the drain).
	rows, err := lk.Windows(context.Background(), lake.AllFrom, lake.AllTo, -1)
	if err != nil {
		t.Fatal(err)
	}
	var sum int64
	for _, r := range rows {
		sum += r.Agg.Count
	}
	if sum != rawRows {
		t.Errorf("window_results counts %d rows, raw_events holds %d", sum, rawRows)
	}
}
