package ingest

import (
	"cmp"
	"fmt"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
)

// DefaultS3Settle is how long an S3 object must have been unchanged
// (LastModified this long ago) before a tailing S3 source reads it, so
// rapid overwrites and uploads still in flight settle first.
const DefaultS3Settle = 2 * time.Second

// Defaults of the S3 client.
const (
	defaultS3Retries = 10
	defaultS3Timeout = 30 * time.Second
)

// s3Options holds the S3 source's settings that SourceConfig does not
// carry. The zero value takes everything from the usual AWS environment.
type s3Options struct {
	// Settle is how long ago an object must have last changed to be read;
	// 0 = DefaultS3Settle, < 0 = no wait. Ignored with SourceConfig.Once,
	// which reads everything listed at Open.
	Settle time.Duration
	// Endpoint is "host:port" or a URL ("http://127.0.0.1:7070"); empty
	// means $AWS_ENDPOINT_URL_S3, then $AWS_ENDPOINT_URL, then AWS.
	Endpoint string
	// Region is empty for $AWS_REGION, then $AWS_DEFAULT_REGION, then what
	// the server says the bucket's region is.
	Region string
	// Retries is the number of attempts per request (0 = 10); minio-go
	// retries 5xx, throttling and dropped connections with backoff.
	Retries int
	// Creds replaces the AWS credential chain when non-nil.
	Creds *credentials.Credentials
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

// endpoint returns host[:port] and whether to use TLS. It copies
// lake/store's S3Config.endpoint because ingest may not import lake/.
func (o s3Options) endpoint() (host string, secure bool, err error) {
	ep := cmp.Or(o.Endpoint, os.Getenv("AWS_ENDPOINT_URL_S3"), os.Getenv("AWS_ENDPOINT_URL"))
	if ep == "" {
		return "s3.amazonaws.com", true, nil
	}
	// Every message below names the endpoint without its userinfo: a
	// credential must never reach a log or a terminal.
	if redacted := redactURL(ep); redacted != ep {
		return "", false, fmt.Errorf("s3 endpoint %q: credentials in the endpoint URL are refused (they show in ps, shell history and logs); set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY", redacted)
	}
	if !strings.Contains(ep, "://") {
		return ep, true, nil
	}
	u, err := url.Parse(ep)
	if err != nil {
		return "", false, fmt.Errorf("s3 endpoint %q: not a URL (want scheme://host[:port])", ep)
	}
	if u.Host == "" || (u.Path != "" && u.Path != "/") || u.RawQuery != "" {
		return "", false, fmt.Errorf("s3 endpoint %q: want scheme://host[:port]", ep)
	}
	switch u.Scheme {
	case "http":
		return u.Host, false, nil
	case "https":
		return u.Host, true, nil
	}
	return "", false, fmt.Errorf("s3 endpoint %q: scheme must be http or https", ep)
}

// client builds the minio client (a copy of lake/store's, which ingest may
// not import). Bucket lookup is automatic: virtual
// hosts on AWS, path style on every other endpoint (MinIO, versitygw...).
func (o s3Options) client() (*minio.Client, error) {
	host, secure, err := o.endpoint()
	if err != nil {
		return nil, err
	}
	tr, err := minio.DefaultTransport(secure)
	if err != nil {
		return nil, err
	}
	tr.ResponseHeaderTimeout = defaultS3Timeout
	creds := o.Creds
	if creds == nil {
		creds = credentials.NewChainCredentials([]credentials.Provider{
			&credentials.EnvAWS{},
			&credentials.FileAWSCredentials{},
			&credentials.IAM{},
		})
	}
	c, err := minio.New(host, &minio.Options{
		Creds:        creds,
		Secure:       secure,
		Transport:    tr,
		Region:       cmp.Or(o.Region, os.Getenv("AWS_REGION"), os.Getenv("AWS_DEFAULT_REGION")),
		BucketLookup: minio.BucketLookupAuto,
		MaxRetries:   cmp.Or(o.Retries, defaultS3Retries),
	})
	if err != nil {
		return nil, fmt.Errorf("s3 client for %s: %w", host, err)
	}
	return c, nil
}

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

// redactURL replaces the userinfo of a URL, or of a scheme-less
// "user:pass@host", with "***". A copy of lake/store's (ingest may not
// import lake/).
func redactURL(s string) string {
	start := 0
	if i := strings.Index(s, "://"); i >= 0 {
		start = i + 3
	}
	// Up to the last "@" anywhere: a secret pasted unescaped may hold "/",
	// "?" or "#", and no host or endpoint path holds "@".
	at := strings.LastIndex(s[start:], "@")
	if at < 0 {
		return s
	}
	return s[:start] + "***" + s[start+at:]
}
