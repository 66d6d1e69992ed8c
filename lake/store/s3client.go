package store

import (
	"fmt"

	"github.com/minio/minio-go/v7"
)

// Client returns a minio-go client set up from c with every setting
// (endpoint, TLS, region, path style, credentials, retries, timeout): the
// one S3 client set-up of tidemark, which the S3 store and the S3 sources
// of package ingest share.
func (c S3Config) Client() (*minio.Client, error) {
	return c.client(c.retries())
}

// client builds a client making up to retries attempts per request.
func (c S3Config) client(retries int) (*minio.Client, error) {
	host, secure, err := c.endpoint()
	if err != nil {
		return nil, err
	}
	lookup, err := c.lookup()
	if err != nil {
		return nil, err
	}
	tr, err := minio.DefaultTransport(secure)
	if err != nil {
		return nil, err
	}
	tr.ResponseHeaderTimeout = defaultTimeout
	if c.Timeout > 0 {
		tr.ResponseHeaderTimeout = c.Timeout
	}
	cl, err := minio.New(host, &minio.Options{
		Creds:        c.creds(),
		Secure:       secure,
		Transport:    ifMatchTransport{tr},
		Region:       c.region(),
		BucketLookup: lookup,
		MaxRetries:   retries,
	})
	if err != nil {
		return nil, fmt.Errorf("s3 client for %s: %w", host, err)
	}
	return cl, nil
}
