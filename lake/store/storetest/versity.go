package storetest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
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

// Server is a running S3-compatible server for tests (the lake's store and
// ingest's S3 sources use it).
type Server struct {
	Endpoint  string // "http://127.0.0.1:<port>"
	AccessKey string
	SecretKey string
	Region    string

	bin, addr, dir string
	mu             sync.Mutex
	stop           func() // kills the running process; nil when stopped
}

// RequireS3Env names the variable that turns a missing server binary from a
// skip into a failure (CI sets TIDEMARK_REQUIRE_S3=1).
const RequireS3Env = "TIDEMARK_REQUIRE_S3"

// StartVersity starts versitygw (the Versity S3 gateway) on a posix
// directory in t.TempDir() and stops it in t.Cleanup. It looks for the
// binary on $PATH, then in $(go env GOPATH)/bin. Without it the test is
// skipped, or fails when $TIDEMARK_REQUIRE_S3=1. Startup takes ~50ms, so
// each test may start its own.
func StartVersity(t testing.TB) *Server {
	t.Helper()
	return StartVersityKeys(t, "tidemark", "tidemark-secret-"+randHex(8))
}

// StartVersityKeys is StartVersity with the given root credentials (tests
// that look for credentials in outputs choose unmistakable ones).
func StartVersityKeys(t testing.TB, accessKey, secretKey string) *Server {
	t.Helper()
	bin := findVersity()
	if bin == "" {
		if os.Getenv(RequireS3Env) == "1" {
			t.Fatalf("versitygw not found on $PATH or in $(go env GOPATH)/bin, and %s=1", RequireS3Env)
		}
		t.Skip("versitygw not found on $PATH or in $(go env GOPATH)/bin; set " + RequireS3Env + "=1 to fail instead")
	}
	s := &Server{AccessKey: accessKey, SecretKey: secretKey, Region: "us-east-1", bin: bin, dir: t.TempDir()}
	t.Cleanup(s.Kill)
	var lastErr error
	for range 3 { // the free port may be taken between our probe and the server's bind
		addr, err := freeAddr()
		if err != nil {
			t.Fatal(err)
		}
		if lastErr = s.start(addr); lastErr == nil {
			s.Endpoint = "http://" + addr
			s.addr = addr
			return s
		}
	}
	t.Fatalf("start versitygw: %v", lastErr)
	return nil
}

// Kill kills the server process with SIGKILL, as a crash or a host going
// away would; the bucket data stays in its directory for Restart.
func (s *Server) Kill() {
	s.mu.Lock()
	stop := s.stop
	s.stop = nil
	s.mu.Unlock()
	if stop != nil {
		stop()
	}
}

// Restart starts a killed server again on the same address and directory,
// so clients see the same endpoint and buckets come back.
func (s *Server) Restart(t testing.TB) {
	t.Helper()
	s.Kill()
	var err error
	for range 50 { // the port may linger a moment after the kill
		if err = s.start(s.addr); err == nil {
			return
		}
	}
	t.Fatalf("restart versitygw on %s: %v", s.addr, err)
}

func (s *Server) start(addr string) error {
	var logs bytes.Buffer
	cmd := exec.Command(s.bin, "--port", addr, "--quiet", "posix", s.dir)
	cmd.Env = append(os.Environ(), "ROOT_ACCESS_KEY="+s.AccessKey, "ROOT_SECRET_KEY="+s.SecretKey)
	cmd.Stdout = &syncWriter{w: &logs}
	cmd.Stderr = cmd.Stdout
	dieWithParent(cmd)
	if err := cmd.Start(); err != nil {
		return err
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	stop := func() {
		cmd.Process.Kill()
		<-exited
	}
	// Poll the port until it accepts, the process exits, or 10s pass.
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(10 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			s.mu.Lock()
			s.stop = stop
			s.mu.Unlock()
			return nil
		}
		select {
		case err := <-exited:
			return fmt.Errorf("versitygw exited: %v: %s", err, cmd.Stdout.(*syncWriter).String())
		case <-deadline:
			stop()
			return fmt.Errorf("versitygw did not listen on %s within 10s: %s", addr, cmd.Stdout.(*syncWriter).String())
		case <-tick.C:
		}
	}
}

// Client returns a minio-go client for the server (for setup and checks
// outside the store under test).
func (s *Server) Client(t testing.TB) *minio.Client {
	t.Helper()
	c, err := minio.New(strings.TrimPrefix(s.Endpoint, "http://"), &minio.Options{
		Creds:  credentials.NewStaticV4(s.AccessKey, s.SecretKey, ""),
		Region: s.Region,
	})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// Bucket creates a fresh, empty bucket and returns its name.
func (s *Server) Bucket(t testing.TB) string {
	t.Helper()
	name := "tm-" + randHex(8)
	if err := s.Client(t).MakeBucket(context.Background(), name, minio.MakeBucketOptions{Region: s.Region}); err != nil {
		t.Fatalf("make bucket %s: %v", name, err)
	}
	return name
}

func findVersity() string {
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

func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().String(), nil
}

func randHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// syncWriter collects the server's output from two goroutines.
type syncWriter struct {
	mu sync.Mutex
	w  *bytes.Buffer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

func (s *syncWriter) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.String()
}
