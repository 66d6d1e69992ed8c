package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fsnotify/fsnotify"

	"tidemark"
	"tidemark/lake/store/storetest"
	"tidemark/stream"
)

// checkpointJSON runs `tidemark checkpoint --format json` and decodes it.
func checkpointJSON(t *testing.T, env []string, args ...string) checkpointReport {
	t.Helper()
	out, stderr, code := runEnv(t, env, append([]string{"checkpoint", "--format", "json"}, args...)...)
	if code != 0 {
		t.Fatalf("checkpoint %v: exit %d\n%s", args, code, stderr)
	}
	var rep checkpointReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("checkpoint --format json: %v\n%s", err, out)
	}
	return rep
}

// readToEnd checks that every file of the source is positioned at its size.
func readToEnd(t *testing.T, src stream.SourceStatus, root string) {
	t.Helper()
	if len(src.Files) == 0 {
		t.Fatalf("source %s: no files", src.Name)
	}
	for _, f := range src.Files {
		fi, err := os.Stat(filepath.Join(root, f.Path))
		if err != nil {
			t.Fatal(err)
		}
		if f.Offset != fi.Size() {
			t.Errorf("%s: offset %d, want its size %d", f.Path, f.Offset, fi.Size())
		}
	}
}

// A stopped stream: the command shows its last batch, watermark, every
// file at the end it was read to, and the windows left open.
func TestCheckpointStopped(t *testing.T) {
	lakeDir := t.TempDir()
	args := []string{"stream", "--source", "testdata/example", "--key", "page", "--value", "value",
		"--arrival-field", "arrival_time", "--window", "10m", "--lateness", "5m", "--max-batch-rows", "10", "--once", "--lake", lakeDir}
	if _, stderr, code := run(t, args...); code != 0 {
		t.Fatalf("stream: exit %d\n%s", code, stderr)
	}
	rep := checkpointJSON(t, nil, "--lake", lakeDir)
	if !rep.Lock.Known || rep.Lock.Held {
		t.Errorf("lock of a stopped stream: %+v", rep.Lock)
	}
	if rep.Name != "stream" || rep.StreamID == "" || rep.Pending != nil {
		t.Errorf("name %q, id %q, pending %+v", rep.Name, rep.StreamID, rep.Pending)
	}
	if rep.Committed == nil || rep.Committed.BatchID != 6 || rep.Committed.ReadTime.IsZero() {
		t.Errorf("last committed %+v, want batch 6 (63 lines in batches of 10) with its time", rep.Committed)
	}
	if rep.Watermark == nil || rep.OpenWindows == 0 || rep.StateRows == 0 || rep.StateBytes == 0 {
		t.Errorf("watermark %v, %d open windows, %d rows, %d bytes", rep.Watermark, rep.OpenWindows, rep.StateRows, rep.StateBytes)
	}
	if len(rep.Sources) != 1 || rep.Sources[0].Name != "testdata/example" || rep.Sources[0].MaxEventTime == nil {
		t.Fatalf("sources %+v", rep.Sources)
	}
	readToEnd(t, rep.Sources[0], filepath.Join(repoRoot(t), "testdata", "example"))

	text, stderr, code := run(t, "checkpoint", "--lake", lakeDir)
	if code != 0 {
		t.Fatalf("checkpoint: exit %d\n%s", code, stderr)
	}
	for _, want := range []string{"stream          stream (id " + rep.StreamID + ")", "last committed  batch 6, read at", "watermark       " + tidemark.FormatTime(rep.Watermark.UnixMicro()),
		"open windows", "source testdata/example", "max event time"} {
		if !strings.Contains(text, want) {
			t.Errorf("text lacks %q:\n%s", want, text)
		}
	}
	if _, stderr, code := run(t, "checkpoint", "--lake", lakeDir, "--name", "other"); code == 0 || !strings.Contains(stderr, "no stream checkpoint") {
		t.Errorf("a missing checkpoint: exit %d, %s", code, stderr)
	}
	if _, err := os.Stat(filepath.Join(lakeDir, "_checkpoints", "other")); err == nil {
		t.Error("looking at a missing checkpoint created it")
	}
}

// A running stream: the command reads its checkpoint without its lock, and
// follows it as it commits.
func TestCheckpointRunning(t *testing.T) {
	in, lakeDir := t.TempDir(), t.TempDir()
	path := filepath.Join(in, "events.ndjson")
	line := func(sec int) string {
		return fmt.Sprintf(`{"event_time":"2026-01-01T00:00:%02dZ","page":"/a"}`+"\n", sec)
	}
	if err := os.WriteFile(path, []byte(line(1)+line(2)), 0o644); err != nil {
		t.Fatal(err)
	}
	needBinary(t)
	cmd := exec.Command(binary, "stream", "--source", in, "--key", "page", "--window", "10s", "--lake", lakeDir, "--rescan-interval", "100ms")
	errb := &syncBuffer{}
	cmd.Stderr = errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	waitFor := func(s string) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for !strings.Contains(errb.String(), s) {
			if time.Now().After(deadline) {
				t.Fatalf("stream did not print %s:\n%s", s, errb.String())
			}
			time.Sleep(20 * time.Millisecond) // polling a child process, not a test wait on our own code
		}
	}
	waitFor(`"batch_id":0`)
	rep := checkpointJSON(t, nil, "--lake", lakeDir)
	if rep.Committed == nil || rep.Committed.BatchID != 0 || len(rep.Sources) != 1 || len(rep.Sources[0].Files) != 1 {
		t.Fatalf("while running: %+v", rep)
	}
	if !rep.Lock.Held || rep.Lock.PID != cmd.Process.Pid {
		t.Errorf("lock while running: %+v, want held by pid %d", rep.Lock, cmd.Process.Pid)
	}
	if text, _, _ := run(t, "checkpoint", "--lake", lakeDir); !strings.Contains(text, fmt.Sprintf("running         yes, pid %d", cmd.Process.Pid)) {
		t.Errorf("text while running:\n%s", text)
	}
	readToEnd(t, rep.Sources[0], in)
	appendFile(t, path, line(12))
	waitFor(`"batch_id":1`)
	rep = checkpointJSON(t, nil, "--lake", lakeDir)
	if rep.Committed == nil || rep.Committed.BatchID != 1 || rep.Watermark == nil || !rep.Watermark.Equal(time.Date(2026, 1, 1, 0, 0, 12, 0, time.UTC)) {
		t.Errorf("after a second batch: committed %+v, watermark %v", rep.Committed, rep.Watermark)
	}
	readToEnd(t, rep.Sources[0], in)
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Errorf("stream after SIGTERM: %v\n%s", err, errb.String())
	}
}

var batchFile = regexp.MustCompile(`^(\d{20})\.json$`)

// A crashed stream, killed with SIGKILL after writing a batch's write-ahead
// record and before its commit record: the command shows the batch as
// pending, and after a restart it is committed.
func TestCheckpointCrashed(t *testing.T) {
	needBinary(t)
	in, lakeDir := t.TempDir(), t.TempDir()
	var b strings.Builder
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := range 120_000 {
		fmt.Fprintf(&b, `{"event_time":%q,"page":"/p%d","value":%d}`+"\n", base.Add(time.Duration(i)*time.Second).Format(time.RFC3339), i%13, i%10)
	}
	if err := os.WriteFile(filepath.Join(in, "events.ndjson"), []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	ck := filepath.Join(lakeDir, "_checkpoints", "stream")
	for _, d := range []string{"offsets", "commits"} {
		if err := os.MkdirAll(filepath.Join(ck, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	args := []string{"stream", "--source", in, "--key", "page", "--value", "value", "--window", "1m",
		"--max-batch-rows", "20000", "--once", "--lake", lakeDir}
	var pending int64 = -1
	attempt := 0
	for ; attempt < 5 && pending < 0; attempt++ {
		pending = killAfterWriteAhead(t, ck, args)
	}
	t.Logf("killed between the records of batch %d at attempt %d", pending, attempt)
	if pending < 0 {
		t.Fatal("5 attempts did not catch a batch between its write-ahead and commit records")
	}
	rep := checkpointJSON(t, nil, "--lake", lakeDir)
	if rep.Pending == nil || rep.Pending.BatchID != pending || rep.Pending.Rows != 20000 {
		t.Fatalf("pending %+v, want batch %d of 20000 lines", rep.Pending, pending)
	}
	if rep.Committed == nil || rep.Committed.BatchID != pending-1 {
		t.Errorf("committed %+v, want batch %d", rep.Committed, pending-1)
	}
	if !rep.Lock.Known || rep.Lock.Held {
		t.Errorf("lock after kill -9: %+v, want known and free (the kernel drops a dead holder's flock)", rep.Lock)
	}
	text, _, _ := run(t, "checkpoint", "--lake", lakeDir)
	if !strings.Contains(text, fmt.Sprintf("pending         batch %d (20000 lines", pending)) || !strings.Contains(text, "interrupted (the stream stopped or crashed): a restart replays it") ||
		!strings.Contains(text, "running         no") {
		t.Errorf("text of a crashed checkpoint:\n%s", text)
	}
	if _, stderr, code := run(t, args...); code != 0 {
		t.Fatalf("restart: exit %d\n%s", code, stderr)
	}
	rep = checkpointJSON(t, nil, "--lake", lakeDir)
	if rep.Pending != nil || rep.Committed == nil || rep.Committed.BatchID != 5 {
		t.Errorf("after the restart: pending %+v, committed %+v; want batch 5 (120000 lines in 6)", rep.Pending, rep.Committed)
	}
	readToEnd(t, rep.Sources[0], in)
}

// killAfterWriteAhead starts the stream and kills it with SIGKILL the
// moment the write-ahead record of a batch after the first appears. It
// returns that batch's id if its commit record had not been written, or -1
// when the kill came too late (or the run ended first).
func killAfterWriteAhead(t *testing.T, ck string, args []string) int64 {
	t.Helper()
	w, err := fsnotify.NewWatcher()
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if err := w.Add(filepath.Join(ck, "offsets")); err != nil {
		t.Fatal(err)
	}
	needBinary(t)
	cmd := exec.Command(binary, args...)
	cmd.Dir = repoRoot(t)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	defer func() { cmd.Process.Kill(); <-exited }()
	first := true
	for {
		select {
		case ev := <-w.Events:
			m := batchFile.FindStringSubmatch(filepath.Base(ev.Name))
			if m == nil || !ev.Has(fsnotify.Create) {
				continue
			}
			var id int64
			fmt.Sscan(strings.TrimLeft(m[1], "0"), &id)
			if first && id == 0 {
				first = false
				continue
			}
			cmd.Process.Signal(syscall.SIGKILL)
			<-exited
			if _, err := os.Stat(filepath.Join(ck, "commits", m[1]+".json")); err == nil {
				return -1
			}
			return id
		case err := <-w.Errors:
			t.Fatal(err)
		case <-exited:
			return -1
		case <-time.After(2 * time.Minute):
			t.Fatal("no write-ahead record within 2 minutes")
		}
	}
}

// An S3 checkpoint on a real S3-compatible server (versitygw).
func TestCheckpointS3(t *testing.T) {
	srv := storetest.StartVersity(t)
	bucket := srv.Bucket(t)
	env := []string{"AWS_ACCESS_KEY_ID=" + srv.AccessKey, "AWS_SECRET_ACCESS_KEY=" + srv.SecretKey, "AWS_REGION=" + srv.Region}
	s3Lake := "s3://" + bucket + "/lakes/example"
	if _, stderr, code := runEnv(t, env, "stream", "--source", "testdata/example", "--key", "page", "--value", "value",
		"--arrival-field", "arrival_time", "--window", "10m", "--lateness", "5m", "--max-batch-rows", "10",
		"--once", "--drain", "--lake", s3Lake, "--s3-endpoint", srv.Endpoint); code != 0 {
		t.Fatalf("stream: exit %d\n%s", code, stderr)
	}
	rep := checkpointJSON(t, env, "--lake", s3Lake, "--s3-endpoint", srv.Endpoint)
	if strings.TrimSuffix(rep.Checkpoint, "/") != s3Lake+"/_checkpoints/stream" || rep.StreamID == "" {
		t.Errorf("checkpoint %q, id %q", rep.Checkpoint, rep.StreamID)
	}
	if rep.Committed == nil || rep.Committed.BatchID != 7 || !rep.Committed.Drain || rep.OpenWindows != 0 {
		t.Errorf("committed %+v, %d open windows; want the drain batch 7 and nothing open", rep.Committed, rep.OpenWindows)
	}
	if len(rep.Sources) != 1 {
		t.Fatalf("sources %+v", rep.Sources)
	}
	readToEnd(t, rep.Sources[0], filepath.Join(repoRoot(t), "testdata", "example"))
	// --checkpoint names the same place directly.
	rep2 := checkpointJSON(t, env, "--checkpoint", s3Lake+"/_checkpoints/stream", "--s3-endpoint", srv.Endpoint)
	if !rep.Lock.Known || rep.Lock.Held {
		t.Errorf("lease after the stream ended: %+v, want known and free", rep.Lock)
	}
	if rep2.StreamID != rep.StreamID || rep2.Name != "stream" {
		t.Errorf("by --checkpoint: id %q name %q, want %q stream", rep2.StreamID, rep2.Name, rep.StreamID)
	}

	// A running stream on S3 holds a lease: the command names its holder.
	cmd, errb := startFollowing(t, env, "stream", "--source", "testdata/example", "--key", "page", "--value", "value", "--window", "10m",
		"--name", "live", "--lake", s3Lake, "--s3-endpoint", srv.Endpoint)
	live := checkpointJSON(t, env, "--lake", s3Lake, "--s3-endpoint", srv.Endpoint, "--name", "live")
	host, _ := os.Hostname()
	if !live.Lock.Held || live.Lock.PID != cmd.Process.Pid || live.Lock.Host != host || live.Lock.Expires == nil {
		t.Errorf("lease of a running stream: %+v, want held by pid %d on %s", live.Lock, cmd.Process.Pid, host)
	}
	if live.Committed == nil || live.Committed.BatchID != 0 {
		t.Errorf("running stream on S3: committed %+v", live.Committed)
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Errorf("stream after SIGTERM: %v\n%s", err, errb.String())
	}
}
