package store

import (
	"bytes"
	"context"
	"errors"
	"io"
	"io/fs"
	"net/http"

	"github.com/minio/minio-go/v7"
)

var _ Swapper = (*S3)(nil)

// ReadVersion implements Swapper: one GET, the ETag is the tag.
func (s *S3) ReadVersion(ctx context.Context, key string) ([]byte, string, error) {
	if !validKey(key) {
		return nil, "", invalidKey("read", key)
	}
	obj, err := s.client.GetObject(ctx, s.bucket, s.object(key), minio.GetObjectOptions{})
	if err != nil {
		return nil, "", s.error("read", key, err)
	}
	defer obj.Close()
	info, err := obj.Stat()
	if err != nil {
		return nil, "", s.error("read", key, err)
	}
	data, err := io.ReadAll(obj)
	if err != nil {
		return nil, "", s.error("read", key, err)
	}
	return data, info.ETag, nil
}

// PutIfMatch implements Swapper with a single-part PUT and If-Match. It is
// sent once (no retries): a retried PUT whose first attempt was applied
// would fail its condition on our own write; the lease re-reads instead.
func (s *S3) PutIfMatch(ctx context.Context, key string, data []byte, tag string) (string, error) {
	if !validKey(key) {
		return "", invalidKey("put-if-match", key)
	}
	opts := minio.PutObjectOptions{DisableMultipart: true}
	opts.SetMatchETag(tag)
	info, err := s.once.PutObject(ctx, s.bucket, s.object(key), bytes.NewReader(data), int64(len(data)), opts)
	if err != nil {
		if preconditionFailed(err) {
			return "", &fs.PathError{Op: "put-if-match", Path: key, Err: ErrChanged}
		}
		return "", s.error("put-if-match", key, err)
	}
	return info.ETag, nil
}

// DeleteIfMatch implements Swapper with a DELETE carrying If-Match. minio-go
// has no option for it, so the header rides on the request's context to
// the client's transport (ifMatchTransport), after signing: If-Match is not
// an x-amz- header, so SigV4 does not need it signed.
func (s *S3) DeleteIfMatch(ctx context.Context, key, tag string) error {
	if !validKey(key) {
		return invalidKey("delete-if-match", key)
	}
	ctx = context.WithValue(ctx, ifMatchKey{}, `"`+tag+`"`)
	err := s.once.RemoveObject(ctx, s.bucket, s.object(key), minio.RemoveObjectOptions{})
	switch {
	case err == nil:
		return nil
	case preconditionFailed(err):
		return &fs.PathError{Op: "delete-if-match", Path: key, Err: ErrChanged}
	}
	if err := s.error("delete-if-match", key, err); !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

func preconditionFailed(err error) bool {
	resp := minio.ToErrorResponse(err)
	return resp.StatusCode == http.StatusPreconditionFailed || resp.Code == minio.PreconditionFailed
}

// ifMatchKey carries a DELETE's If-Match value on its context.
type ifMatchKey struct{}

// ifMatchTransport sets If-Match on a DELETE whose context carries one.
type ifMatchTransport struct{ http.RoundTripper }

func (t ifMatchTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if v, ok := req.Context().Value(ifMatchKey{}).(string); ok && req.Method == http.MethodDelete {
		req = req.Clone(req.Context())
		req.Header.Set("If-Match", v)
	}
	return t.RoundTripper.RoundTrip(req)
}
