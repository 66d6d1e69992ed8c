package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"

	"tidemark/lake"
	"tidemark/lake/store/storetest"
)

// TestS3ServerRestart kills the real S3 server (SIGKILL) while a stream
// reads its source from it and commits its lake and checkpoint to it, and
// starts it again on the same port and directory a moment later. The
// stream rides the outage out or exits with a clear error; either way,
// after a restart of the stream the lake holds every input line exactly
// once and the windows of a run that saw no outage.
// A short outage (1.5 s) is within the S3 client's retries; a long one
// (up to 30 s) outlasts them and the stream exits.
func TestS3ServerRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("S3 restart: not in -short")
	}
	t.Run("short", func(t *testing.T) { s3Restart(t, 1500*time.Millisecond) })
	t.Run("long", func(t *testing.T) { s3Restart(t, 30*time.Second) })
}

func s3Restart(t *testing.T, outage time.Duration) {
	srv := storetest.StartVersity(t)
	bucket := srv.Bucket(t)
	client := srv.Client(t)
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	total := 0
	for o := range 12 {
		var b bytes.Buffer
		for i := range 300 {
			n := o*300 + i
			if n%41 == 40 {
				fmt.Fprintf(&b, "{\"event_time\": broken %d\n", n)
			} else {
				ts := base.Add(time.Duration(n)*time.Second - time.Duration(n%4)*time.Second)
				fmt.Fprintf(&b, "{\"event_time\":%q,\"page\":\"/p%d\",\"value\":%d}\n", ts.Format(time.RFC3339), n%5, n%100)
			}
			total++
		}
		if _, err := client.PutObject(context.Background(), bucket, fmt.Sprintf("in/part-%02d.ndjson", o), &b, int64(b.Len()), minio.PutObjectOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	env := []string{"AWS_ACCESS_KEY_ID=" + srv.AccessKey, "AWS_SECRET_ACCESS_KEY=" + srv.SecretKey,
		"AWS_REGION=" + srv.Region, "AWS_ENDPOINT_URL=" + srv.Endpoint}
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
	progress := filepath.Join(t.TempDir(), "progress.ndjson")
	args := func(lakeURL string) []string {
		return []string{"stream", "--source", "s3://" + bucket + "/in", "--key", "page", "--value", "value",
			"--window", "1m", "--lateness", "10s", "--max-batch-rows", "150", "--rescan-interval", "50ms",
			"--lake", lakeURL, "--s3-endpoint", srv.Endpoint, "--progress", progress}
	}
	lakeURL := "s3://" + bucket + "/lake"
	needBinary(t)
	stream := exec.Command(binary, args(lakeURL)...)
	stream.Env = append(stream.Environ(), env...)
	var stderr bytes.Buffer
	stream.Stderr = &stderr
	if err := stream.Start(); err != nil {
		t.Fatal(err)
	}
	defer stream.Process.Kill()
	exited := make(chan error, 1)
	go func() { exited <- stream.Wait() }()

	batches := func() int {
		b, _ := os.ReadFile(progress)
		return bytes.Count(b, []byte("\n"))
	}
	// waitFor polls cond until it holds, the stream exits, or 60s pass.
	waitFor := func(what string, cond func() bool) (streamDone bool, err error) {
		deadline := time.After(60 * time.Second)
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for !cond() {
			select {
			case err := <-exited:
				return true, err
			case <-deadline:
				t.Fatalf("waiting for %s: 60s passed\n%s", what, stderr.String())
			case <-tick.C:
			}
		}
		return false, nil
	}
	if done, err := waitFor("5 batches", func() bool { return batches() >= 5 }); done {
		t.Fatalf("stream exited before the outage: %v\n%s", err, stderr.String())
	}
	before := batches()
	srv.Kill()
	select { // the outage lasts, or until the stream gives up
	case err := <-exited:
		exited <- err
	case <-time.After(outage):
	}
	srv.Restart(t)

	// The stream rides it out (commits more batches) or has exited.
	done, err := waitFor("a batch after the outage", func() bool { return batches() > before })
	if done {
		msg := strings.TrimSpace(stderr.String())
		last := msg[strings.LastIndex(msg, "\n")+1:]
		if err == nil || !strings.HasPrefix(last, "tidemark: ") {
			t.Fatalf("stream ended without a clear error (%v):\n%s", err, msg)
		}
		t.Logf("the stream exited during the outage: %s", last)
	} else {
		t.Logf("the stream rode the outage out (%d batches before, %d now)", before, batches())
		if err := stream.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		if err := <-exited; err != nil {
			t.Fatalf("stream after the outage: %v\n%s", err, stderr.String())
		}
	}
	// Restart (or continue) to the end of the input.
	if _, errOut, code := runEnv(t, env, append(args(lakeURL), "--once", "--drain")...); code != 0 {
		t.Fatalf("stream restart: exit %d\n%s", code, errOut)
	}
	refURL := "s3://" + bucket + "/reference"
	if _, errOut, code := runEnv(t, env, append(args(refURL), "--once", "--drain")...); code != 0 {
		t.Fatalf("reference run: exit %d\n%s", code, errOut)
	}

	got, want := lineSet(t, openTestLake(t, lakeURL)), lineSet(t, openTestLake(t, refURL))
	if len(want) != total {
		t.Fatalf("reference run: %d lines in the lake, want %d", len(want), total)
	}
	var missing, doubled []string
	for k := range want {
		switch got[k] {
		case 0:
			missing = append(missing, k)
		case 1:
		default:
			doubled = append(doubled, k)
		}
	}
	sort.Strings(missing)
	sort.Strings(doubled)
	if len(missing)+len(doubled) > 0 || len(got) != len(want) {
		t.Errorf("got %d lines, want %d: missing %d %v, doubled %d %v", len(got), len(want), len(missing), head(missing), len(doubled), head(doubled))
	}
	if g, w := windowSummary(t, openTestLake(t, lakeURL)), windowSummary(t, openTestLake(t, refURL)); g != w {
		t.Errorf("window_results after the outage differ from a run without one:\n%s", diffLines(g, w))
	}
}

// lineSet counts the lake's rows (raw_events and quarantine) per input
// file and offset.
func lineSet(t *testing.T, lk *lake.Lake) map[string]int {
	t.Helper()
	got := map[string]int{}
	err := lk.ScanRaw(context.Background(), lake.RawQuery{Columns: []string{lake.ColFile, lake.ColOffset}}, func(b lake.RawBatch) error {
		for i := 0; i < b.N; i++ {
			got[fmt.Sprintf("%s@%d", b.File[i], b.Offset[i])]++
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	err = lk.ScanQuarantine(context.Background(), func(q lake.QuarantineRow) error {
		got[fmt.Sprintf("%s@%d", q.File, q.Offset)]++
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return got
}
