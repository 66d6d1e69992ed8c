package store

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/minio/minio-go/v7"
)

// s3Reader reads one version of an object with ranged GETs. It is safe for
// concurrent ReadAt calls.
type s3Reader struct {
	ctx     context.Context
	s       *S3
	key     string
	etag    string
	size    int64
	modTime time.Time
}

func (r *s3Reader) Size() int64  { return r.size }
func (r *s3Reader) Close() error { return nil }

// ReadAt implements io.ReaderAt. A body cut short mid-transfer is resumed
// with a new ranged GET (pinned to the same ETag, so never mixing versions).
func (r *s3Reader) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, &fs.PathError{Op: "read", Path: r.key, Err: errors.New("negative offset")}
	}
	if len(p) == 0 {
		return 0, nil
	}
	if off >= r.size {
		return 0, io.EOF
	}
	want := p[:min(int64(len(p)), r.size-off)]
	n := 0
	for attempt := 0; n < len(want); attempt++ {
		m, cut, err := r.get(want[n:], off+int64(n))
		n += m
		if err == nil {
			continue
		}
		// Failed requests were already retried by minio-go; only a body
		// cut short is resumed here: at once after progress (the retry
		// budget is for stalls), else after a backoff.
		if !cut || r.ctx.Err() != nil {
			return n, err
		}
		if m > 0 {
			attempt = -1
			continue
		}
		if attempt+1 >= r.s.retries {
			return n, err
		}
		if err := sleep(r.ctx, backoff(attempt)); err != nil {
			return n, &fs.PathError{Op: "read", Path: r.key, Err: err}
		}
	}
	if len(want) < len(p) {
		return n, io.EOF
	}
	return n, nil
}

// get fills p from offset off with one ranged GET. cut reports a body that
// ended early (the request itself succeeded).
func (r *s3Reader) get(p []byte, off int64) (n int, cut bool, err error) {
	var opts minio.GetObjectOptions
	if err := opts.SetMatchETag(r.etag); err != nil {
		return 0, false, err
	}
	if err := opts.SetRange(off, off+int64(len(p))-1); err != nil {
		return 0, false, err
	}
	core := minio.Core{Client: r.s.client}
	body, info, h, err := core.GetObject(r.ctx, r.s.bucket, r.s.object(r.key), opts)
	if err != nil {
		resp := minio.ToErrorResponse(err)
		if resp.StatusCode == http.StatusPreconditionFailed || resp.StatusCode == http.StatusNotFound ||
			resp.Code == minio.PreconditionFailed || resp.Code == minio.NoSuchKey {
			return 0, false, &fs.PathError{Op: "read", Path: r.key, Err: ErrChanged}
		}
		return 0, false, &fs.PathError{Op: "read", Path: r.key, Err: err}
	}
	defer body.Close()
	if !r.sameVersion(info, h) {
		return 0, false, &fs.PathError{Op: "read", Path: r.key, Err: ErrChanged}
	}
	n, err = io.ReadFull(body, p)
	if err != nil {
		return n, true, &fs.PathError{Op: "read", Path: r.key, Err: fmt.Errorf("body: %w", err)}
	}
	return n, false, nil
}

// sameVersion double-checks that a GET answered from the opened version.
// If-Match should be enough, but versitygw (v1.8.0, posix) checks the ETag
// and then opens the file by path, so a concurrent overwrite can slip in
// between; the object size in Content-Range and Last-Modified come from
// the file it actually read.
func (r *s3Reader) sameVersion(info minio.ObjectInfo, h http.Header) bool {
	if info.ETag != "" && info.ETag != r.etag {
		return false
	}
	if !info.LastModified.IsZero() && !r.modTime.IsZero() &&
		!info.LastModified.Truncate(time.Second).Equal(r.modTime.Truncate(time.Second)) {
		return false
	}
	if cr := h.Get("Content-Range"); cr != "" {
		_, total, ok := strings.Cut(cr, "/")
		if !ok || total != strconv.FormatInt(r.size, 10) {
			return false
		}
	}
	return true
}
