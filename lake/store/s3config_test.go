package store

import (
	"testing"

	"github.com/minio/minio-go/v7"
)

func TestS3ConfigEndpoint(t *testing.T) {
	tests := []struct {
		name       string
		cfg        S3Config
		env        map[string]string
		wantHost   string
		wantSecure bool
		wantErr    bool
	}{
		{"aws default", S3Config{}, nil, "s3.amazonaws.com", true, false},
		{"env url", S3Config{}, map[string]string{"AWS_ENDPOINT_URL": "http://127.0.0.1:7070"}, "127.0.0.1:7070", false, false},
		{"env s3 wins", S3Config{}, map[string]string{"AWS_ENDPOINT_URL": "http://a:1", "AWS_ENDPOINT_URL_S3": "https://b:2"}, "b:2", true, false},
		{"config wins", S3Config{Endpoint: "https://minio.local"}, map[string]string{"AWS_ENDPOINT_URL": "http://a:1"}, "minio.local", true, false},
		{"bare host", S3Config{Endpoint: "minio.local:9000"}, nil, "minio.local:9000", true, false},
		{"bare host insecure", S3Config{Endpoint: "minio.local:9000", Insecure: true}, nil, "minio.local:9000", false, false},
		{"trailing slash", S3Config{Endpoint: "http://h:1/"}, nil, "h:1", false, false},
		{"path", S3Config{Endpoint: "http://h:1/bucket"}, nil, "", false, true},
		{"scheme", S3Config{Endpoint: "ftp://h:1"}, nil, "", false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("AWS_ENDPOINT_URL", "")
			t.Setenv("AWS_ENDPOINT_URL_S3", "")
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			host, secure, err := tt.cfg.endpoint()
			if (err != nil) != tt.wantErr {
				t.Fatalf("got error %v, want error %v", err, tt.wantErr)
			}
			if host != tt.wantHost || secure != tt.wantSecure {
				t.Errorf("got %s secure=%v, want %s secure=%v", host, secure, tt.wantHost, tt.wantSecure)
			}
		})
	}
}

func TestS3ConfigRegion(t *testing.T) {
	t.Setenv("AWS_REGION", "")
	t.Setenv("AWS_DEFAULT_REGION", "eu-west-1")
	if got, want := (S3Config{}).region(), "eu-west-1"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	t.Setenv("AWS_REGION", "us-west-2")
	if got, want := (S3Config{}).region(), "us-west-2"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	if got, want := (S3Config{Region: "ap-south-1"}).region(), "ap-south-1"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

func TestS3ConfigPathStyle(t *testing.T) {
	tests := []struct {
		style   string
		want    minio.BucketLookupType
		wantErr bool
	}{
		{"", minio.BucketLookupAuto, false},
		{"auto", minio.BucketLookupAuto, false},
		{"path", minio.BucketLookupPath, false},
		{"virtual", minio.BucketLookupDNS, false},
		{"dns", 0, true},
	}
	for _, tt := range tests {
		got, err := S3Config{PathStyle: tt.style}.lookup()
		if (err != nil) != tt.wantErr || got != tt.want {
			t.Errorf("%q: got %v, %v, want %v (error %v)", tt.style, got, err, tt.want, tt.wantErr)
		}
	}
}

func TestS3ConfigPartSize(t *testing.T) {
	if got, err := (S3Config{}).partSize(); err != nil || got != defaultPartSize {
		t.Errorf("default: got %d, %v, want %d", got, err, defaultPartSize)
	}
	if _, err := (S3Config{PartSize: 1 << 20}).partSize(); err == nil {
		t.Error("1 MiB: got nil error, want one (S3 needs 5 MiB)")
	}
}

func TestValidKey(t *testing.T) {
	tests := []struct {
		key  string
		want bool
	}{
		{"a", true},
		{"raw_events/event_date=2026-01-01/event_hour=03/part-x.zstd.parquet", true},
		{"a b/100%/c+d", true},
		{"_tidemark/lock", true},
		{"", false},
		{".", false},
		{"/a", false},
		{"a/", false},
		{"a//b", false},
		{"a/./b", false},
		{"a/../b", false},
		{"..", false},
		{".tidemark-tmp", false},
		{".tidemark-tmp/x", false},
		{".tidemark-tmpx", true},
		{"_tidemark/probe-1", false},
		{"a\\b", false},
		{"a\x00b", false},
	}
	for _, tt := range tests {
		if got := validKey(tt.key); got != tt.want {
			t.Errorf("validKey(%q): got %v, want %v", tt.key, got, tt.want)
		}
	}
}

func FuzzValidKey(f *testing.F) {
	for _, k := range []string{"a/b", "../x", "a//b", ".tidemark-tmp/x", "p=1/q=2/f.parquet"} {
		f.Add(k)
	}
	f.Fuzz(func(t *testing.T, key string) {
		if !validKey(key) {
			return
		}
		// A valid key stays inside the root and is its own prefix.
		if !validPrefix(key) {
			t.Errorf("valid key %q is not a valid prefix", key)
		}
		for _, bad := range []string{"..", "."} {
			for _, el := range splitSlash(key) {
				if el == bad || el == "" {
					t.Errorf("valid key %q has element %q", key, el)
				}
			}
		}
	})
}

func splitSlash(s string) []string {
	var out []string
	start := 0
	for i := 0; i < len(s); i++ {
		if s[i] == '/' {
			out = append(out, s[start:i])
			start = i + 1
		}
	}
	return append(out, s[start:])
}
