package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/parquet-go/parquet-go"

	"tidemark/lake/store/storetest"
)

// Canary credentials: unmistakable strings that must never appear in any
// output. The secret holds "/" and "+", as AWS secrets do, so escaped
// forms are looked for too.
const (
	canaryKey       = "AKIACANARYKEY7Q2XK4Z"
	canarySecret    = "cAnArY/sEcReT+9f8e7d6c5b4a3wVuT"
	canaryWrongKey  = "AKIACANARYWRONG3J8KQ"
	canaryWrongSec  = "wRoNgCaNaRy/sEcReT+0x9y8z7"
	canaryToken     = "cAnArYsEsSiOnToKeN42xx"
	canaryURLKey    = "AKIACANARYURL5M1N2B3"
	canaryURLSecret = "uRlCaNaRy/sEcReT+77aa66"
)

var canaries = []string{canaryKey, canarySecret, canaryWrongKey, canaryWrongSec, canaryToken, canaryURLKey, canaryURLSecret}

// leaked returns the canaries (or their URL-escaped forms) found in s.
func leaked(s string) []string {
	var found []string
	for _, c := range canaries {
		for _, form := range []string{c, url.QueryEscape(c), url.PathEscape(c), c[:12]} {
			if strings.Contains(s, form) {
				found = append(found, form)
				break
			}
		}
	}
	return found
}

// secretsCase is one way to run every command.
type secretsCase struct {
	name     string
	lake     string   // --lake
	endpoint string   // --s3-endpoint, if any
	env      []string // extra environment
	ok       bool     // every known command must succeed (else: fail)
}

// TestNoCredentialInAnyOutput runs every command of the app (new ones
// too: the list comes from newApp) with canary credentials in the
// environment, in endpoint URLs and in s3:// locations, on success and on the error paths a
// test can provoke — credentials in the URL (flag and AWS_ENDPOINT_URL), an
// unparsable URL, a refused connection, wrong keys with a session token —
// with --log-level debug where a command has it, and checks that no canary
// appears in stdout, stderr, the progress file, the lateness plot,
// /metrics and / while a stream runs, or any object or file of the lakes
// (Parquet decoded, not grepped compressed).
func TestNoCredentialInAnyOutput(t *testing.T) {
	srv := storetest.StartVersityKeys(t, canaryKey, canarySecret)
	bucket := srv.Bucket(t)
	good := []string{"AWS_ACCESS_KEY_ID=" + canaryKey, "AWS_SECRET_ACCESS_KEY=" + canarySecret, "AWS_REGION=" + srv.Region}
	host := strings.TrimPrefix(srv.Endpoint, "http://")
	closed := closedAddr(t)
	withCreds := "http://" + canaryURLKey + ":" + canaryURLSecret + "@" + host
	s3Lake := "s3://" + bucket + "/lake"
	localLake := filepath.Join(t.TempDir(), "lake")
	out := t.TempDir() // progress files and plots

	// An S3 source with the example's events, for the stream.
	mc := srv.Client(t)
	for _, name := range []string{"clicks-001.ndjson", "clicks-002.ndjson"} {
		if _, err := mc.FPutObject(context.Background(), bucket, "in/"+name, filepath.Join(repoRoot(t), "testdata", "example", name), minio.PutObjectOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	cases := []secretsCase{
		{name: "s3 lake, keys in env", lake: s3Lake, endpoint: srv.Endpoint, env: good, ok: true},
		{name: "local lake, keys in env", lake: localLake, env: append(good, "AWS_SESSION_TOKEN="+canaryToken), ok: true},
		{name: "keys in --s3-endpoint", lake: s3Lake, endpoint: withCreds, env: good},
		{name: "keys in AWS_ENDPOINT_URL", lake: s3Lake, env: append(good, "AWS_ENDPOINT_URL="+withCreds)},
		{name: "keys in AWS_ENDPOINT_URL_S3", lake: s3Lake, env: append(good, "AWS_ENDPOINT_URL_S3="+withCreds)},
		{name: "keys in a bad URL", lake: s3Lake, endpoint: "http://" + canaryURLKey + ":" + canaryURLSecret + "@" + host + ":x/", env: good},
		{name: "keys without scheme", lake: s3Lake, endpoint: canaryURLKey + ":" + canaryURLSecret + "@" + host, env: good},
		{name: "keys in the s3:// lake and source", lake: "s3://" + canaryURLKey + ":" + canaryURLSecret + "@" + bucket + "/lake", endpoint: srv.Endpoint, env: good},
		{name: "keys in the s3:// lake, no @", lake: "s3://" + canaryURLKey + ":" + canaryURLSecret + "/lake", endpoint: srv.Endpoint, env: good},
		{name: "connection refused", lake: s3Lake, endpoint: "http://" + closed, env: good},
		{name: "wrong keys", lake: s3Lake, endpoint: srv.Endpoint, env: []string{
			"AWS_ACCESS_KEY_ID=" + canaryWrongKey, "AWS_SECRET_ACCESS_KEY=" + canaryWrongSec,
			"AWS_SESSION_TOKEN=" + canaryToken, "AWS_REGION=" + srv.Region}},
	}
	known := map[string]bool{}
	for i, c := range cases {
		for _, cmd := range newApp().Commands {
			args := commandArgs(t, cmd.Name, c, fmt.Sprintf("%s/%d-%s", out, i, cmd.Name))
			if args == nil {
				continue
			}
			for _, f := range cmd.Flags {
				switch f.Names()[0] {
				case "s3-endpoint":
					if c.endpoint != "" {
						args = append(args, "--s3-endpoint", c.endpoint)
					}
				case "log-level":
					args = append(args, "--log-level", "debug")
				}
			}
			stdout, stderr, code := runEnv(t, c.env, args...)
			if l := leaked(stdout + stderr); l != nil {
				t.Errorf("%s: tidemark %s printed %q:\nstdout: %s\nstderr: %s", c.name, cmd.Name, l, stdout, stderr)
			}
			known[cmd.Name] = true
			switch {
			case !knownCommand(cmd.Name):
			case c.ok && code != 0:
				t.Errorf("%s: tidemark %s: exit %d, want 0\n%s", c.name, cmd.Name, code, stderr)
			case !c.ok && code == 0:
				t.Errorf("%s: tidemark %s: exit 0, want a failure\n%s", c.name, cmd.Name, stdout)
			}
		}
	}
	for _, name := range []string{"stream", "reconcile", "lateness", "windows", "recompute", "tables", "compact", "vacuum"} {
		if !known[name] {
			t.Errorf("command %s was not run", name)
		}
	}

	// A running stream's /metrics and status page, and its progress lines.
	streamMetrics(t, good, srv.Endpoint, "s3://"+bucket+"/live", out)

	// Every file written: progress, plots, the local lake, every object.
	checkTree(t, out)
	checkTree(t, localLake)
	ctx := context.Background()
	n := 0
	for obj := range mc.ListObjects(ctx, bucket, minio.ListObjectsOptions{Recursive: true}) {
		if obj.Err != nil {
			t.Fatal(obj.Err)
		}
		r, err := mc.GetObject(ctx, bucket, obj.Key, minio.GetObjectOptions{})
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(r)
		r.Close()
		if err != nil {
			t.Fatal(err)
		}
		checkContent(t, "s3://"+bucket+"/"+obj.Key, b)
		n++
	}
	if n < 20 {
		t.Errorf("checked %d objects, want the lake's (at least 20)", n)
	}
}

func knownCommand(name string) bool {
	switch name {
	case "stream", "reconcile", "lateness", "windows", "recompute", "tables", "compact", "vacuum":
		return true
	}
	return false
}

// commandArgs returns the arguments that make a command do its job in case
// c; nil skips it. A command this test does not know gets --lake only.
func commandArgs(t *testing.T, name string, c secretsCase, prefix string) []string {
	lake := []string{"--lake", c.lake}
	switch name {
	case "stream":
		src := filepath.Join(repoRoot(t), "testdata", "example")
		if strings.HasPrefix(c.lake, "s3://") {
			src = strings.TrimSuffix(c.lake, "lake") + "in/" // the S3 source: the ingest client's endpoint parsing too
		}
		return append([]string{"stream", "--source", src, "--key", "page", "--value", "value",
			"--arrival-field", "arrival_time", "--window", "10m", "--lateness", "5m", "--max-batch-rows", "10",
			"--once", "--drain", "--print", "--progress", prefix + ".progress"}, lake...)
	case "lateness":
		return append([]string{"lateness", "--plot", prefix + ".svg", "--format", "json"}, lake...)
	case "recompute", "windows", "tables", "compact", "vacuum", "reconcile":
		return append([]string{name}, lake...)
	}
	return append([]string{name}, lake...)
}

// streamMetrics runs a continuous stream with --metrics-addr, waits for its
// first progress line, reads /metrics and /, and stops it with SIGTERM.
func streamMetrics(t *testing.T, env []string, endpoint, lakeURL, out string) {
	t.Helper()
	addr := closedAddr(t)
	progress := filepath.Join(out, "live.progress")
	needBinary(t)
	cmd := exec.Command(binary, "stream", "--source", "testdata/example", "--key", "page", "--value", "value",
		"--arrival-field", "arrival_time", "--window", "10m", "--lake", lakeURL, "--s3-endpoint", endpoint,
		"--metrics-addr", addr, "--progress", progress, "--log-level", "debug", "--print")
	cmd.Dir = repoRoot(t)
	cmd.Env = append(cmd.Environ(), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		cmd.Process.Signal(syscall.SIGTERM)
		cmd.Wait()
		if l := leaked(stdout.String() + stderr.String()); l != nil {
			t.Errorf("running stream printed %q:\n%s", l, stderr.String())
		}
	}()
	// The progress file gets its first line once the first batch is
	// committed; the metrics are served from the start.
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for {
		b, _ := os.ReadFile(progress)
		if bytes.Contains(b, []byte("\n")) {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("no progress line within 60s:\n%s", stderr.String())
		}
		waitForChange(ctx, progress)
	}
	for _, path := range []string{"/metrics", "/"} {
		req, _ := http.NewRequestWithContext(ctx, "GET", "http://"+addr+path, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if path == "/metrics" && !bytes.Contains(body, []byte("tidemark_batches_total")) {
			t.Errorf("GET /metrics: got %.200s", body)
		}
		if l := leaked(string(body)); l != nil {
			t.Errorf("GET %s shows %q", path, l)
		}
	}
}

// waitForChange blocks until the file's size changes or ctx ends, polling
// on a ticker (the other process writes it; there is no event to wait on).
func waitForChange(ctx context.Context, name string) {
	before := int64(-1)
	if fi, err := os.Stat(name); err == nil {
		before = fi.Size()
	}
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			if fi, err := os.Stat(name); err == nil && fi.Size() != before {
				return
			}
		}
	}
}

// closedAddr returns a loopback address nothing listens on (just freed).
func closedAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

func checkTree(t *testing.T, root string) {
	t.Helper()
	err := filepath.WalkDir(root, func(p string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		checkContent(t, p, b)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// checkContent looks for canaries in a file; Parquet files are decoded
// (their pages are compressed) and their metadata read.
func checkContent(t *testing.T, name string, b []byte) {
	t.Helper()
	text := string(b)
	if strings.HasSuffix(name, ".parquet") {
		text += parquetText(t, name, b)
	}
	if l := leaked(text); l != nil {
		t.Errorf("%s holds %q", name, l)
	}
}

func parquetText(t *testing.T, name string, b []byte) string {
	t.Helper()
	f, err := parquet.OpenFile(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		t.Errorf("%s: %v", name, err)
		return ""
	}
	var sb strings.Builder
	w := bufio.NewWriter(&sb)
	fmt.Fprintln(w, f.Metadata().CreatedBy)
	for _, kv := range f.Metadata().KeyValueMetadata {
		fmt.Fprintln(w, kv.Key, kv.Value)
	}
	rows := make([]parquet.Row, 128)
	for _, rg := range f.RowGroups() {
		rr := rg.Rows()
		for {
			n, err := rr.ReadRows(rows)
			for _, row := range rows[:n] {
				for _, v := range row {
					w.WriteString(v.String())
					w.WriteByte(' ')
				}
			}
			if err != nil {
				break
			}
		}
		rr.Close()
	}
	w.Flush()
	return sb.String()
}
