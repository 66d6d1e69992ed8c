package store_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"

	"tidemark/lake/store"
	"tidemark/lake/store/storetest"
)

// s3Config points a store at srv.
func s3Config(srv *storetest.Server) store.S3Config {
	return store.S3Config{
		Endpoint:  srv.Endpoint,
		Region:    srv.Region,
		AccessKey: srv.AccessKey,
		SecretKey: srv.SecretKey,
	}
}

func TestS3(t *testing.T) {
	srv := storetest.StartVersity(t)
	storetest.Run(t, func(t *testing.T) store.Store {
		s, err := store.OpenS3(t.Context(), srv.Bucket(t), "lake/root", s3Config(srv))
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}

// openVia opens a store on a fresh bucket of srv, reached through endpoint.
func openVia(t *testing.T, srv *storetest.Server, endpoint string, cfg store.S3Config) *store.S3 {
	t.Helper()
	cfg.Endpoint = endpoint
	s, err := store.OpenS3(t.Context(), srv.Bucket(t), "lake", cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestS3Retries fails the first requests of each operation in a proxy in
// front of the real server: every operation must still succeed.
func TestS3Retries(t *testing.T) {
	srv := storetest.StartVersity(t)
	faults := []struct {
		name  string
		fault storetest.Fault
	}{
		{"SlowDown503", storetest.SlowDown},
		{"InternalError500", storetest.InternalError},
		{"TooMany429", storetest.TooManyRequests},
		{"Timeout", storetest.Hang},
		{"LostResponse", storetest.LoseResponse},
	}
	ops := []struct {
		name string
		fn   func(t *testing.T, s *store.S3) error
	}{
		{"Put", func(t *testing.T, s *store.S3) error {
			return s.Put(t.Context(), "a/put", strings.NewReader("put"), 3)
		}},
		{"PutIfAbsent", func(t *testing.T, s *store.S3) error {
			return s.PutIfAbsent(t.Context(), "_delta_log/0.json", []byte("commit"))
		}},
		{"ReadAll", func(t *testing.T, s *store.S3) error {
			b, err := store.ReadAll(t.Context(), s, "a/put")
			if err == nil && string(b) != "put" {
				err = fmt.Errorf("got %q, want %q", b, "put")
			}
			return err
		}},
		{"List", func(t *testing.T, s *store.S3) error {
			infos, err := s.List(t.Context(), "")
			if err == nil && len(infos) != 2 {
				err = fmt.Errorf("got %d objects, want 2", len(infos))
			}
			return err
		}},
		{"Delete", func(t *testing.T, s *store.S3) error {
			return s.Delete(t.Context(), "a/put")
		}},
	}
	for _, f := range faults {
		t.Run(f.name, func(t *testing.T) {
			proxy := storetest.NewProxy(t, srv.Endpoint)
			cfg := s3Config(srv)
			cfg.Timeout = 300 * time.Millisecond
			s := openVia(t, srv, proxy.Endpoint, cfg)
			for _, op := range ops {
				proxy.Fail(2, f.fault)
				if err := op.fn(t, s); err != nil {
					t.Errorf("%s after 2 x %s: %v", op.name, f.name, err)
				}
				if left := proxy.Left(); left != 0 {
					t.Errorf("%s: %d injected failures never reached", op.name, left)
				}
			}
		})
	}
}

// TestS3RetriesGiveUp checks that retrying is bounded: with more failures
// than attempts, the error surfaces.
func TestS3RetriesGiveUp(t *testing.T) {
	srv := storetest.StartVersity(t)
	proxy := storetest.NewProxy(t, srv.Endpoint)
	cfg := s3Config(srv)
	cfg.Retries = 2
	s := openVia(t, srv, proxy.Endpoint, cfg)
	proxy.Fail(5, storetest.SlowDown)
	if err := s.PutIfAbsent(t.Context(), "k", []byte("x")); err == nil || errors.Is(err, store.ErrExists) {
		t.Errorf("put-if-absent after 5 x 503 with 2 attempts: got %v, want a SlowDown error", err)
	}
	if got, want := proxy.Left(), 3; got != want {
		t.Errorf("failures left: got %d, want %d (2 attempts)", got, want)
	}
}

// TestS3ConditionalConflict: AWS answers 409 ConditionalRequestConflict to
// racing conditional writes; PutIfAbsent retries and then succeeds or, if
// the other writer won, reports ErrExists.
func TestS3ConditionalConflict(t *testing.T) {
	srv := storetest.StartVersity(t)
	proxy := storetest.NewProxy(t, srv.Endpoint)
	s := openVia(t, srv, proxy.Endpoint, s3Config(srv))
	proxy.Fail(2, storetest.Conflict)
	if err := s.PutIfAbsent(t.Context(), "c", []byte("mine")); err != nil {
		t.Fatalf("put-if-absent after 2 x 409: %v", err)
	}
	proxy.Fail(1, storetest.Conflict)
	if err := s.PutIfAbsent(t.Context(), "c", []byte("theirs")); !errors.Is(err, store.ErrExists) {
		t.Errorf("put-if-absent of a taken key after 409: got %v, want ErrExists", err)
	}
}

// TestS3LostResponseOtherBytes: a PUT that was applied but answered 500,
// retried into 412, counts as ours only if the object holds our bytes.
func TestS3LostResponseOtherBytes(t *testing.T) {
	srv := storetest.StartVersity(t)
	proxy := storetest.NewProxy(t, srv.Endpoint)
	s := openVia(t, srv, proxy.Endpoint, s3Config(srv))
	if err := s.PutIfAbsent(t.Context(), "k", []byte("first")); err != nil {
		t.Fatal(err)
	}
	proxy.Fail(1, storetest.InternalError)
	if err := s.PutIfAbsent(t.Context(), "k", []byte("second")); !errors.Is(err, store.ErrExists) {
		t.Errorf("got %v, want ErrExists", err)
	}
}

// TestS3ProbeRefusesUnconditionalServer plays a server that ignores
// If-None-Match (a proxy turns its 412 into 200): OpenS3 must refuse, and
// leave no probe object behind.
func TestS3ProbeRefusesUnconditionalServer(t *testing.T) {
	srv := storetest.StartVersity(t)
	proxy := storetest.NewProxy(t, srv.Endpoint)
	proxy.Fail(3, storetest.IgnorePrecondition) // put, put again, delete
	cfg := s3Config(srv)
	cfg.Endpoint = proxy.Endpoint
	bucket := srv.Bucket(t)
	_, err := store.OpenS3(t.Context(), bucket, "lake", cfg)
	if err == nil || !strings.Contains(err.Error(), "If-None-Match") {
		t.Fatalf("open on a server ignoring If-None-Match: got %v, want a refusal naming If-None-Match", err)
	}
	var left []string
	for o := range srv.Client(t).ListObjects(t.Context(), bucket, minio.ListObjectsOptions{Recursive: true}) {
		left = append(left, o.Key)
	}
	if len(left) != 0 {
		t.Errorf("objects left after probe: %q", left)
	}
	// The same server without the proxy passes.
	if _, err := store.OpenS3(t.Context(), bucket, "lake", s3Config(srv)); err != nil {
		t.Errorf("open on versitygw: %v", err)
	}
}

// TestS3OpenMissingBucket: a missing bucket is a clear error at open, with
// and without the probe.
func TestS3OpenMissingBucket(t *testing.T) {
	srv := storetest.StartVersity(t)
	for _, skip := range []bool{false, true} {
		cfg := s3Config(srv)
		cfg.SkipProbe = skip
		if _, err := store.OpenS3(t.Context(), "no-such-bucket", "", cfg); err == nil {
			t.Errorf("SkipProbe=%v: open missing bucket: got nil error", skip)
		}
	}
}

// TestS3ReaderPinned: a Reader reads the version it opened; after an
// overwrite, reads fail with ErrChanged instead of returning new bytes.
func TestS3ReaderPinned(t *testing.T) {
	srv := storetest.StartVersity(t)
	s := openVia(t, srv, srv.Endpoint, s3Config(srv))
	ctx := t.Context()
	if err := s.Put(ctx, "v", strings.NewReader("version one"), 11); err != nil {
		t.Fatal(err)
	}
	r, err := s.Open(ctx, "v")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	p := make([]byte, 7)
	if n, err := r.ReadAt(p, 0); err != nil || string(p[:n]) != "version" {
		t.Fatalf("read before overwrite: got %q, %v", p[:n], err)
	}
	if err := s.Put(ctx, "v", strings.NewReader("VERSION TWO"), 11); err != nil {
		t.Fatal(err)
	}
	if _, err := r.ReadAt(p, 4); !errors.Is(err, store.ErrChanged) {
		t.Errorf("read after overwrite: got %v, want ErrChanged", err)
	}
	if err := s.Delete(ctx, "v"); err != nil {
		t.Fatal(err)
	}
	if _, err := r.ReadAt(p, 0); !errors.Is(err, store.ErrChanged) {
		t.Errorf("read after delete: got %v, want ErrChanged", err)
	}
}

// TestS3Prefix: two stores on one bucket under different prefixes do not
// see each other's objects, and keys land under the prefix.
func TestS3Prefix(t *testing.T) {
	srv := storetest.StartVersity(t)
	bucket := srv.Bucket(t)
	ctx := t.Context()
	a, err := store.Open(ctx, "s3://"+bucket+"/lakes/a", s3Config(srv))
	if err != nil {
		t.Fatal(err)
	}
	b, err := store.Open(ctx, "s3://"+bucket+"/lakes/b/", s3Config(srv))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := a.String(), "s3://"+bucket+"/lakes/a/"; got != want {
		t.Errorf("String: got %q, want %q", got, want)
	}
	if err := a.PutIfAbsent(ctx, "t/_delta_log/0.json", []byte("a")); err != nil {
		t.Fatal(err)
	}
	if infos, err := b.List(ctx, ""); err != nil || len(infos) != 0 {
		t.Errorf("list b: got %v, %v, want nothing", infos, err)
	}
	var keys []string
	for o := range srv.Client(t).ListObjects(ctx, bucket, minio.ListObjectsOptions{Recursive: true}) {
		keys = append(keys, o.Key)
	}
	if got, want := fmt.Sprint(keys), "[lakes/a/t/_delta_log/0.json]"; got != want {
		t.Errorf("bucket holds %s, want %s", got, want)
	}
}

// TestS3ReadResumesCutBody: a GET whose body is cut halfway is resumed
// from where it stopped.
func TestS3ReadResumesCutBody(t *testing.T) {
	srv := storetest.StartVersity(t)
	proxy := storetest.NewProxy(t, srv.Endpoint)
	s := openVia(t, srv, proxy.Endpoint, s3Config(srv))
	data := strings.Repeat("0123456789", 10000)
	if err := s.Put(t.Context(), "big", strings.NewReader(data), int64(len(data))); err != nil {
		t.Fatal(err)
	}
	r, err := s.Open(t.Context(), "big")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	proxy.Fail(2, storetest.CutBody)
	p := make([]byte, len(data)-5)
	n, err := r.ReadAt(p, 5)
	if err != nil || string(p[:n]) != data[5:] {
		t.Errorf("read through 2 cut bodies: got %d bytes, %v; want %d bytes", n, err, len(data)-5)
	}
	if left := proxy.Left(); left != 0 {
		t.Errorf("%d cuts never happened", left)
	}
}
