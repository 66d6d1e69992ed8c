package main

import (
	"context"
	"os"
	"path/filepath"
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
