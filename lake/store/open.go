package store

import (
	"context"
	"fmt"
	"strings"
)

// Open opens the store a URL names; it is the one place a backend is chosen.
// "s3://bucket/prefix" opens an S3 store (cfg applies; the prefix is a key
// prefix, with the same layout below it as a directory), "file:///path" or
// any other string opens a directory store.
func Open(ctx context.Context, url string, cfg S3Config) (Store, error) {
	if rest, ok := strings.CutPrefix(url, "s3://"); ok {
		bucket, prefix, _ := strings.Cut(rest, "/")
		if bucket == "" {
			return nil, fmt.Errorf("open store %s: missing bucket", url)
		}
		s, err := OpenS3(ctx, bucket, strings.Trim(prefix, "/"), cfg)
		if err != nil {
			return nil, err
		}
		return s, nil
	}
	path := strings.TrimPrefix(url, "file://")
	if path == "" {
		return nil, fmt.Errorf("open store %q: empty path", url)
	}
	d, err := OpenDir(path)
	if err != nil {
		return nil, err
	}
	return d, nil
}
