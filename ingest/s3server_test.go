package ingest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
)

// The S3 tests run against a real S3-compatible server: versitygw on a
// posix directory, started per test (~50ms). ingest may not import lake/,
// so this is a small copy of lake/store/storetest's harness. Without the
// binary the tests skip, or fail when $TIDEMARK_REQUIRE_S3=1.

type s3TestServer struct {
	endpoint, access, secret string
}

func startS3Server(t testing.TB) *s3TestServer {
	t.Helper()
	bin := versityBinary()
	if bin == "" {
		if os.Getenv("TIDEMARK_REQUIRE_S3") == "1" {
			t.Fatal("versitygw not found on $PATH or in $(go env GOPATH)/bin, and TIDEMARK_REQUIRE_S3=1")
		}
		t.Skip("versitygw not found on $PATH or in $(go env GOPATH)/bin; set TIDEMARK_REQUIRE_S3=1 to fail instead")
	}
	srv := &s3TestServer{access: "tidemark", secret: "tidemark-secret-" + s3RandHex(8)}
	var logs s3SyncBuffer
	for range 3 { // the probed port may be taken before the server binds it
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := l.Addr().String()
		l.Close()
		cmd := exec.Command(bin, "--port", addr, "--quiet", "posix", t.TempDir())
		cmd.Env = append(os.Environ(), "ROOT_ACCESS_KEY="+srv.access, "ROOT_SECRET_KEY="+srv.secret)
		cmd.Stdout, cmd.Stderr = &logs, &logs
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		exited := make(chan struct{})
		go func() { cmd.Wait(); close(exited) }()
		stop := func() { cmd.Process.Kill(); <-exited }
		if s3Listening(addr, exited) {
			t.Cleanup(stop)
			srv.endpoint = "http://" + addr
			return srv
		}
		stop()
	}
	t.Fatalf("versitygw did not start: %s", logs.String())
	return nil
}

// s3Listening polls addr until it accepts, the process exits, or 10s pass.
func s3Listening(addr string, exited <-chan struct{}) bool {
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(10 * time.Second)
	for {
		if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			c.Close()
			return true
		}
		select {
		case <-exited:
			return false
		case <-deadline:
			return false
		case <-tick.C:
		}
	}
}

func versityBinary() string {
	if p, err := exec.LookPath("versitygw"); err == nil {
		return p
	}
	gopath := os.Getenv("GOPATH")
	if out, err := exec.Command("go", "env", "GOPATH").Output(); err == nil {
		gopath = strings.TrimSpace(string(out))
	}
	for _, dir := range filepath.SplitList(gopath) {
		p := filepath.Join(dir, "bin", "versitygw")
		if st, err := os.Stat(p); err == nil && !st.IsDir() {
			return p
		}
	}
	return ""
}

func (srv *s3TestServer) client(t testing.TB) *minio.Client {
	t.Helper()
	c, err := minio.New(strings.TrimPrefix(srv.endpoint, "http://"), &minio.Options{
		Creds: credentials.NewStaticV4(srv.access, srv.secret, ""), Region: "us-east-1",
	})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// bucket creates a fresh bucket.
func (srv *s3TestServer) bucket(t testing.TB) string {
	t.Helper()
	name := "tm-" + s3RandHex(6)
	if err := srv.client(t).MakeBucket(context.Background(), name, minio.MakeBucketOptions{Region: "us-east-1"}); err != nil {
		t.Fatalf("make bucket %s: %v", name, err)
	}
	return name
}

func s3RandHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

type s3SyncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *s3SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *s3SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
