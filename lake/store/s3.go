package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/minio/minio-go/v7"
)

// S3 is a Store on an S3 bucket under a key prefix, with the same layout as
// a Dir. Put is a single PUT (or a multipart upload for large objects);
// PutIfAbsent is a single-part PUT with If-None-Match: *, which OpenS3 checks
// the server enforces.
type S3 struct {
	client   *minio.Client // retries inside minio-go
	once     *minio.Client // no retries: PutIfAbsent runs its own loop
	bucket   string
	prefix   string // "" or ending in "/"
	partSize int64
	retries  int
}

var _ Store = (*S3)(nil)

// OpenS3 opens the store on bucket under prefix (a key prefix; "" for the
// bucket root). Unless cfg.SkipProbe, it writes a probe object twice with
// If-None-Match: * and refuses a server that lets the second write through,
// since Delta commits on it would silently overwrite each other.
func OpenS3(ctx context.Context, bucket, prefix string, cfg S3Config) (*S3, error) {
	s, err := newS3(bucket, prefix, cfg)
	if err != nil {
		return nil, fmt.Errorf("open s3 store s3://%s/%s: %w", bucket, prefix, err)
	}
	if cfg.SkipProbe {
		ok, err := s.client.BucketExists(ctx, bucket)
		if err == nil && !ok {
			err = fmt.Errorf("bucket %s does not exist", bucket)
		}
		if err != nil {
			return nil, fmt.Errorf("open s3 store %s: %w", s, cfg.ExplainS3(err))
		}
		return s, nil
	}
	if err := s.probe(ctx); err != nil {
		return nil, fmt.Errorf("open s3 store %s: %w", s, cfg.ExplainS3(err))
	}
	return s, nil
}

func newS3(bucket, prefix string, cfg S3Config) (*S3, error) {
	if prefix != "" && !strings.HasSuffix(prefix, "/") {
		prefix += "/"
	}
	if prefix != "" && !validKey(strings.TrimSuffix(prefix, "/")) {
		return nil, fmt.Errorf("invalid key prefix %q", prefix)
	}
	partSize, err := cfg.partSize()
	if err != nil {
		return nil, err
	}
	s := &S3{bucket: bucket, prefix: prefix, partSize: partSize, retries: cfg.retries()}
	if s.client, err = cfg.client(s.retries); err != nil {
		return nil, err
	}
	if s.once, err = cfg.client(1); err != nil {
		return nil, err
	}
	return s, nil
}

// probe checks that a second If-None-Match write of the same key fails.
func (s *S3) probe(ctx context.Context) error {
	key := probePrefix + uuid.NewString()
	if err := s.putIfAbsent(ctx, key, []byte("probe")); err != nil {
		return fmt.Errorf("probe conditional write: %w", err)
	}
	err := s.putIfAbsent(ctx, key, []byte("probe 2"))
	if derr := s.delete(ctx, key); derr != nil && err != nil {
		return errors.Join(err, derr)
	}
	switch {
	case errors.Is(err, ErrExists):
		return nil
	case err == nil:
		return fmt.Errorf("server does not enforce If-None-Match: * on PUT (a second conditional write of %s succeeded); concurrent commits would overwrite each other", key)
	}
	return fmt.Errorf("probe conditional write: %w", err)
}

// String returns the store's s3:// URL.
func (s *S3) String() string { return "s3://" + s.bucket + "/" + s.prefix }

func (s *S3) object(key string) string { return s.prefix + key }

// Put implements Store. Objects up to the part size are read into memory
// and sent in one PUT, so they can be retried; larger or unknown-size ones
// go as a multipart upload (buffered part by part), which is fine because
// Put has no condition.
func (s *S3) Put(ctx context.Context, key string, r io.Reader, size int64) error {
	if !validKey(key) {
		return invalidKey("put", key)
	}
	opts := minio.PutObjectOptions{PartSize: uint64(s.partSize)}
	if size >= 0 && size <= s.partSize {
		buf := make([]byte, size)
		if _, err := io.ReadFull(r, buf); err != nil {
			return &fs.PathError{Op: "put", Path: key, Err: err}
		}
		r = bytes.NewReader(buf)
		opts.DisableMultipart = true
	}
	if _, err := s.client.PutObject(ctx, s.bucket, s.object(key), r, size, opts); err != nil {
		return s.error("put", key, err)
	}
	return nil
}

// PutIfAbsent implements Store with a single-part PUT and If-None-Match: *.
func (s *S3) PutIfAbsent(ctx context.Context, key string, data []byte) error {
	if !validKey(key) {
		return invalidKey("put-if-absent", key)
	}
	return s.putIfAbsent(ctx, key, data)
}

// putIfAbsent retries here rather than in minio-go so that it knows whether
// an earlier attempt may have been applied. After such an attempt (a timeout
// or a 5xx), a 412 may be our own write: if the object holds exactly data,
// the write is taken as ours. Callers that must tell writers apart put a
// unique id in data.
func (s *S3) putIfAbsent(ctx context.Context, key string, data []byte) error {
	ambiguous := false
	for attempt := 0; ; attempt++ {
		opts := minio.PutObjectOptions{DisableMultipart: true}
		opts.SetMatchETagExcept("*")
		_, err := s.once.PutObject(ctx, s.bucket, s.object(key), bytes.NewReader(data), int64(len(data)), opts)
		if err == nil {
			return nil
		}
		resp := minio.ToErrorResponse(err)
		if resp.StatusCode == http.StatusPreconditionFailed || resp.Code == minio.PreconditionFailed {
			if ambiguous && s.holds(ctx, key, data) {
				return nil
			}
			return &fs.PathError{Op: "put-if-absent", Path: key, Err: ErrExists}
		}
		if !retryable(ctx, err) || attempt+1 >= s.retries {
			return s.error("put-if-absent", key, err)
		}
		// 409 and 429 are refusals; anything else may have been applied.
		if resp.StatusCode != http.StatusConflict && resp.StatusCode != http.StatusTooManyRequests {
			ambiguous = true
		}
		if err := sleep(ctx, backoff(attempt)); err != nil {
			return s.error("put-if-absent", key, err)
		}
	}
}

// holds reports whether key's object is exactly data.
func (s *S3) holds(ctx context.Context, key string, data []byte) bool {
	got, err := ReadAll(ctx, s, key)
	return err == nil && bytes.Equal(got, data)
}

// retryable reports whether a failed request may succeed if sent again.
func retryable(ctx context.Context, err error) bool {
	if ctx.Err() != nil {
		return false
	}
	resp := minio.ToErrorResponse(err)
	switch resp.StatusCode {
	case http.StatusRequestTimeout, http.StatusConflict, http.StatusTooManyRequests,
		http.StatusInternalServerError, http.StatusBadGateway,
		http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return true
	}
	switch resp.Code {
	case "SlowDown", "RequestTimeout", "InternalError", "ConditionalRequestConflict", "Throttling":
		return true
	}
	var ue *url.Error
	var ne net.Error
	return errors.As(err, &ue) || errors.As(err, &ne) ||
		errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF)
}

// backoff is the wait before retry attempt+1: exponential from 100ms, capped
// at 5s, with full jitter.
func backoff(attempt int) time.Duration {
	d := 100 * time.Millisecond << min(max(attempt, 0), 6)
	d = min(d, 5*time.Second)
	return d/2 + rand.N(d/2+1)
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Open implements Store. The Reader's ranged GETs carry If-Match with the
// ETag seen at open, so an overwrite after Open fails reads with ErrChanged
// instead of mixing versions. They run under ctx.
func (s *S3) Open(ctx context.Context, key string) (Reader, error) {
	if !validKey(key) {
		return nil, invalidKey("open", key)
	}
	info, err := s.client.StatObject(ctx, s.bucket, s.object(key), minio.StatObjectOptions{})
	if err != nil {
		return nil, s.error("open", key, err)
	}
	return &s3Reader{ctx: ctx, s: s, key: key, etag: info.ETag, size: info.Size, modTime: info.LastModified}, nil
}

// List implements Store; minio-go pages through ListObjectsV2.
func (s *S3) List(ctx context.Context, prefix string) ([]Info, error) {
	if !validPrefix(prefix) {
		return nil, invalidKey("list", prefix)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // stops minio-go's lister if we return early
	var out []Info
	for o := range s.client.ListObjects(ctx, s.bucket, minio.ListObjectsOptions{Prefix: s.object(prefix), Recursive: true}) {
		if o.Err != nil {
			return nil, &fs.PathError{Op: "list", Path: prefix, Err: o.Err}
		}
		key, ok := strings.CutPrefix(o.Key, s.prefix)
		if !ok || !validKey(key) {
			continue // directory markers, probe objects, foreign names
		}
		out = append(out, Info{Key: key, Size: o.Size, ModTime: o.LastModified})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out, nil
}

// Delete implements Store.
func (s *S3) Delete(ctx context.Context, key string) error {
	if !validKey(key) {
		return invalidKey("delete", key)
	}
	return s.delete(ctx, key)
}

func (s *S3) delete(ctx context.Context, key string) error {
	err := s.client.RemoveObject(ctx, s.bucket, s.object(key), minio.RemoveObjectOptions{})
	if err != nil {
		err = s.error("delete", key, err)
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return err
	}
	return nil
}

// error wraps a minio-go error in a *fs.PathError, turning a missing key
// into fs.ErrNotExist so no caller needs to know minio-go.
func (s *S3) error(op, key string, err error) error {
	resp := minio.ToErrorResponse(err)
	if resp.Code == minio.NoSuchKey || (resp.StatusCode == http.StatusNotFound && resp.Code != minio.NoSuchBucket) {
		return notExist(op, key)
	}
	return &fs.PathError{Op: op, Path: key, Err: err}
}
