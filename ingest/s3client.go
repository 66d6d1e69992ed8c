package ingest

import (
	"fmt"
	"strings"
	"time"

	"github.com/minio/minio-go/v7"

	"tidemark/lake/store"
)

// DefaultS3Settle is how long an S3 object must have been unchanged
// (LastModified this long ago) before a tailing S3 source reads it, so
// rapid overwrites and uploads still in flight settle first.
const DefaultS3Settle = 2 * time.Second

// s3Options holds the S3 source's settings that SourceConfig does not
// carry. The zero value takes everything from the usual AWS environment.
type s3Options struct {
	// Settle is how long ago an object must have last changed to be read;
	// 0 = DefaultS3Settle, < 0 = no wait. Ignored with SourceConfig.Once,
	// which reads everything listed at Open.
	Settle time.Duration
	// S3 is the client set-up, lake/store's, with every setting the lake
	// has (endpoint, region, path style, insecure, timeout, credentials,
	// retries).
	S3 store.S3Config
}

func (o s3Options) settle() time.Duration {
	switch {
	case o.Settle == 0:
		return DefaultS3Settle
	case o.Settle < 0:
		return 0
	}
	return o.Settle
}

// client builds the minio client with lake/store's one S3 set-up.
func (o s3Options) client() (*minio.Client, error) { return o.S3.Client() }

// parseS3Spec splits "s3://bucket/prefix" into the bucket and a key prefix
// that is empty or ends in "/": the prefix names a directory, so
// s3://b/logs reads logs/a.ndjson but not logs2/a.ndjson.
func parseS3Spec(spec string) (bucket, prefix string, err error) {
	rest, ok := strings.CutPrefix(spec, "s3://")
	if !ok {
		return "", "", fmt.Errorf("parse s3 source %q: want s3://bucket/prefix", spec)
	}
	bucket, prefix, _ = strings.Cut(rest, "/")
	if bucket == "" {
		return "", "", fmt.Errorf("parse s3 source %q: no bucket", spec)
	}
	if strings.ContainsAny(bucket, " \\?#") {
		return "", "", fmt.Errorf("parse s3 source %q: bad bucket name %q", spec, bucket)
	}
	prefix = strings.TrimLeft(prefix, "/")
	if prefix != "" && !strings.HasSuffix(prefix, "/") {
		prefix += "/"
	}
	return bucket, prefix, nil
}
