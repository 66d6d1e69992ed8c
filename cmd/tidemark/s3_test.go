package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/minio/minio-go/v7"

	"tidemark/lake/store/storetest"
)

// The same stream and windows commands work with an s3:// lake on a real
// S3-compatible server (versitygw), and give the same results as a local lake.
func TestStreamToS3Lake(t *testing.T) {
	srv := storetest.StartVersity(t)
	bucket := srv.Bucket(t)
	env := []string{"AWS_ACCESS_KEY_ID=" + srv.AccessKey, "AWS_SECRET_ACCESS_KEY=" + srv.SecretKey, "AWS_REGION=" + srv.Region}
	streamArgs := func(lakeURL string) []string {
		return []string{"stream", "--source", "testdata/example", "--key", "page", "--value", "value",
			"--arrival-field", "arrival_time", "--window", "10m", "--lateness", "5m", "--max-batch-rows", "10",
			"--once", "--drain", "--lake", lakeURL, "--s3-endpoint", srv.Endpoint}
	}
	s3Lake := "s3://" + bucket + "/lakes/example"
	out, stderr, code := runEnv(t, env, streamArgs(s3Lake)...)
	if code != 0 {
		t.Fatalf("stream to %s: exit %d\n%s", s3Lake, code, stderr)
	}
	if !strings.Contains(stderr, "lines read 63 = ok 57 + late 3 + quarantined 3") {
		t.Errorf("accounting: %s", stderr)
	}
	_ = out
	s3Windows, stderr, code := runEnv(t, env, "windows", "--lake", s3Lake, "--s3-endpoint", srv.Endpoint, "--format", "csv")
	if code != 0 {
		t.Fatalf("windows: exit %d\n%s", code, stderr)
	}
	local := t.TempDir()
	if _, stderr, code := run(t, streamArgs(local)...); code != 0 {
		t.Fatalf("local stream: %s", stderr)
	}
	localWindows, _, _ := run(t, "windows", "--lake", local, "--format", "csv")
	strip := func(csv string) string { // computed_at differs between runs
		var out []string
		for _, l := range lines(csv) {
			f := strings.Split(l, ",")
			out = append(out, strings.Join(append(f[:len(f)-2:len(f)-2], f[len(f)-1]), ","))
		}
		return strings.Join(out, "\n")
	}
	if len(lines(s3Windows)) != 18 || strip(s3Windows) != strip(localWindows) {
		t.Errorf("windows from the S3 lake:\n%s\nfrom the local lake:\n%s", s3Windows, localWindows)
	}
	tables, _, code := runEnv(t, env, "tables", "--lake", s3Lake, "--s3-endpoint", srv.Endpoint)
	if code != 0 || !strings.Contains(tables, "raw_events") {
		t.Errorf("tables: %s", tables)
	}
}

// A stream reads its events from an s3:// source (objects in key order) and
// gives the same windows as the same files read from a local directory.
func TestStreamFromS3Source(t *testing.T) {
	srv := storetest.StartVersity(t)
	bucket := srv.Bucket(t)
	client := srv.Client(t)
	dir := filepath.Join(repoRoot(t), "testdata", "example")
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if _, err := client.FPutObject(context.Background(), bucket, "in/"+e.Name(), filepath.Join(dir, e.Name()), minio.PutObjectOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	env := []string{"AWS_ACCESS_KEY_ID=" + srv.AccessKey, "AWS_SECRET_ACCESS_KEY=" + srv.SecretKey, "AWS_REGION=" + srv.Region}
	args := func(source string) []string {
		return []string{"stream", "--source", source, "--key", "page", "--value", "value", "--arrival-field", "arrival_time",
			"--window", "10m", "--lateness", "5m", "--max-batch-rows", "10", "--once", "--drain", "--print",
			"--lake", t.TempDir(), "--s3-endpoint", srv.Endpoint}
	}
	fromS3, stderr, code := runEnv(t, env, args("s3://"+bucket+"/in")...)
	if code != 0 {
		t.Fatalf("stream from S3: exit %d\n%s", code, stderr)
	}
	if !strings.Contains(stderr, "lines read 63 = ok 57 + late 3 + quarantined 3") {
		t.Errorf("accounting: %s", stderr)
	}
	fromDir, _, code := run(t, args("testdata/example")...)
	if code != 0 || fromS3 != fromDir || len(lines(fromS3)) != 17 {
		t.Errorf("windows from S3:\n%s\nfrom the directory:\n%s", fromS3, fromDir)
	}
}

// An S3 backlog of objects spread over hosts and time (keys host by host,
// not in time order) reads as the same events in one local file: objects
// not read yet are peeked and wait their turn at their first event, so the
// accounting and the windows equal the one-file run's, and the first
// commit holds the earliest events (a few raw_events files), not one line
// from each object (one small file per object's hour).
func TestStreamS3BacklogPeeked(t *testing.T) {
	needBinary(t)
	srv := storetest.StartVersity(t)
	bucket := srv.Bucket(t)
	client := srv.Client(t)
	dir := t.TempDir()
	spread, one, events := manyFiles(t, dir, 300) // 100 ten-minute slots × 3 hosts, 2 events each
	err := filepath.WalkDir(spread, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(spread, path)
		_, err = client.FPutObject(context.Background(), bucket, "in/"+filepath.ToSlash(rel), path, minio.PutObjectOptions{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	env := []string{"AWS_ACCESS_KEY_ID=" + srv.AccessKey, "AWS_SECRET_ACCESS_KEY=" + srv.SecretKey, "AWS_REGION=" + srv.Region}
	const batch = 60 // the first 10 slots: 100 minutes, two event hours
	backfill := func(source, lake string) (accounting, windows string) {
		t.Helper()
		_, stderr, code := runEnv(t, env, "stream", "--source", source, "--lake", lake, "--s3-endpoint", srv.Endpoint,
			"--key", "host", "--window", "1h", "--lateness", "10m", "--max-batch-rows", fmt.Sprint(batch),
			"--once", "--drain", "--progress", os.DevNull)
		if code != 0 {
			t.Fatalf("%s: exit %d\n%s", source, code, tail(stderr, 20))
		}
		out, errOut, code := run(t, "windows", "--lake", lake, "--format", "csv")
		if code != 0 {
			t.Fatalf("windows: %s", errOut)
		}
		return lastLine(stderr), dropColumns(out)
	}
	s3Lake, oneLake := filepath.Join(dir, "lake-s3"), filepath.Join(dir, "lake-one")
	accS3, winS3 := backfill("s3://"+bucket+"/in", s3Lake)
	accOne, winOne := backfill(one, oneLake)
	if want := fmt.Sprintf("lines read %d = ok", events); !strings.HasPrefix(accS3, want) {
		t.Errorf("from S3: %q, want %q...", accS3, want)
	}
	if counts := func(s string) string { return s[:strings.Index(s, ";")] }; counts(accS3) != counts(accOne) {
		t.Errorf("accounting differs:\nS3 objects: %s\none file:   %s", accS3, accOne)
	}
	// The windows and their counts, not the watermark each was emitted at:
	// that depends on where the 60-row batches fall, and the one file
	// interleaves the hosts' lines otherwise than aligned reading does.
	noWatermark := func(csv string) string {
		var out []string
		for _, l := range lines(csv) {
			out = append(out, l[:strings.LastIndex(l, ",")])
		}
		return strings.Join(out, "\n")
	}
	if noWatermark(winS3) != noWatermark(winOne) || len(lines(winS3)) < 40 {
		t.Errorf("windows differ between the S3 objects and one file:\n%s\n---\n%s", winS3, winOne)
	}
	n := firstCommitFiles(t, filepath.Join(s3Lake, "raw_events"))
	t.Logf("the first raw_events commit from %d objects adds %d files", 300, n)
	if n < 1 || n > 2 {
		t.Errorf("the first raw_events commit from S3 adds %d files, want 1 or 2 (its %d events span two hours)", n, batch)
	}
}

// firstCommitFiles returns how many data files the first commit of a
// local Delta table that adds any adds.
func firstCommitFiles(t *testing.T, table string) int {
	t.Helper()
	logs, err := filepath.Glob(filepath.Join(table, "_delta_log", "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(logs)
	for _, l := range logs {
		data, err := os.ReadFile(l)
		if err != nil {
			t.Fatal(err)
		}
		if n := strings.Count(string(data), `{"add":`); n > 0 {
			return n
		}
	}
	return 0
}
