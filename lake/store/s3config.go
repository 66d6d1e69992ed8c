package store

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

// S3Config configures the S3 store. The zero value takes everything from the
// usual AWS environment: endpoint, region and credentials.
type S3Config struct {
	// Endpoint is "host:port" or a URL ("http://127.0.0.1:7070"). Empty
	// means $AWS_ENDPOINT_URL_S3, then $AWS_ENDPOINT_URL, then AWS.
	Endpoint string
	// Region is empty for $AWS_REGION, then $AWS_DEFAULT_REGION, then
	// whatever the server says the bucket's region is.
	Region string
	// PathStyle is "auto" (or empty: virtual hosts on AWS, paths
	// elsewhere), "path" or "virtual".
	PathStyle string
	// Insecure uses plain HTTP for an Endpoint given without a scheme.
	Insecure bool
	// AccessKey, SecretKey and SessionToken, when AccessKey is set, are used
	// as they are. Otherwise the AWS chain applies: $AWS_ACCESS_KEY_ID,
	// $AWS_SECRET_ACCESS_KEY and $AWS_SESSION_TOKEN, then the shared
	// credentials file (~/.aws/credentials, $AWS_PROFILE), then IAM (EC2
	// instance metadata, ECS, EKS web identity).
	AccessKey, SecretKey, SessionToken string
	// Retries is the number of attempts per request (0 means 10). Throttling
	// (503 SlowDown, 429), other 5xx, timeouts and dropped connections are
	// retried with exponential backoff and jitter; a racing conditional
	// write (409 ConditionalRequestConflict) too.
	Retries int
	// Timeout bounds the wait for a response's headers in one attempt
	// (0 means 30s); a timed-out attempt is retried.
	Timeout time.Duration
	// PartSize is the multipart part size for large or unknown-size Puts
	// (0 means 16 MiB; S3 needs at least 5 MiB). Objects up to PartSize go
	// in one PUT.
	PartSize int64
	// SkipProbe skips the check at open that the server enforces
	// If-None-Match (the probe needs write access; read-only tools may
	// skip it).
	SkipProbe bool
}

const (
	defaultRetries  = 10
	defaultTimeout  = 30 * time.Second
	defaultPartSize = 16 << 20
	minPartSize     = 5 << 20
)

// endpoint returns host[:port] and whether to use TLS.
func (c S3Config) endpoint() (host string, secure bool, err error) {
	ep := cmp.Or(c.Endpoint, os.Getenv("AWS_ENDPOINT_URL_S3"), os.Getenv("AWS_ENDPOINT_URL"))
	if ep == "" {
		return "s3.amazonaws.com", !c.Insecure, nil
	}
	// Every message below names the endpoint without its userinfo: a
	// credential must never reach a log or a terminal.
	if redacted := RedactURL(ep); redacted != ep {
		return "", false, fmt.Errorf("s3 endpoint %q: credentials in the endpoint URL are refused (they show in ps, shell history and logs); set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY", redacted)
	}
	if !strings.Contains(ep, "://") {
		return ep, !c.Insecure, nil
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

func (c S3Config) region() string {
	return cmp.Or(c.Region, os.Getenv("AWS_REGION"), os.Getenv("AWS_DEFAULT_REGION"))
}

func (c S3Config) lookup() (minio.BucketLookupType, error) {
	switch c.PathStyle {
	case "", "auto":
		return minio.BucketLookupAuto, nil
	case "path":
		return minio.BucketLookupPath, nil
	case "virtual":
		return minio.BucketLookupDNS, nil
	}
	return 0, fmt.Errorf("s3 path style %q: want auto, path or virtual", c.PathStyle)
}

func (c S3Config) creds() *credentials.Credentials {
	if c.AccessKey != "" {
		return credentials.NewStaticV4(c.AccessKey, c.SecretKey, c.SessionToken)
	}
	return credentials.NewChainCredentials([]credentials.Provider{
		&credentials.EnvAWS{},
		&credentials.FileAWSCredentials{},
		&credentials.IAM{},
	})
}

func (c S3Config) retries() int {
	if c.Retries <= 0 {
		return defaultRetries
	}
	return c.Retries
}

func (c S3Config) partSize() (int64, error) {
	switch {
	case c.PartSize == 0:
		return defaultPartSize, nil
	case c.PartSize < minPartSize:
		return 0, fmt.Errorf("s3 part size %d: want at least %d", c.PartSize, minPartSize)
	}
	return c.PartSize, nil
}

// RedactURL replaces the userinfo of a URL, or of a scheme-less
// "user:pass@host", with "***", for messages. It works on text url.Parse
// rejects too. ingest/s3client.go holds a copy (ingest may not import lake/).
func RedactURL(s string) string {
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
