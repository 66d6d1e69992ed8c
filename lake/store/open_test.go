package store_test

import (
	"path/filepath"
	"testing"

	"tidemark/lake/store"
	"tidemark/lake/store/storetest"
)

func TestOpenURL(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		url, want string
	}{
		{dir, dir},
		{"file://" + dir, dir},
		{filepath.Join(dir, "sub"), filepath.Join(dir, "sub")},
	}
	for _, tt := range tests {
		s, err := store.Open(t.Context(), tt.url, store.S3Config{})
		if err != nil {
			t.Fatalf("open %s: %v", tt.url, err)
		}
		if _, ok := s.(*store.Dir); !ok || s.String() != tt.want {
			t.Errorf("open %s: got %T %s, want *store.Dir %s", tt.url, s, s, tt.want)
		}
	}
	for _, bad := range []string{"", "s3://", "s3:///prefix"} {
		if _, err := store.Open(t.Context(), bad, store.S3Config{}); err == nil {
			t.Errorf("open %q: got nil error", bad)
		}
	}
}

func TestOpenURLS3(t *testing.T) {
	srv := storetest.StartVersity(t)
	bucket := srv.Bucket(t)
	for _, url := range []string{"s3://" + bucket, "s3://" + bucket + "/", "s3://" + bucket + "/a/b"} {
		s, err := store.Open(t.Context(), url, s3Config(srv))
		if err != nil {
			t.Fatalf("open %s: %v", url, err)
		}
		if _, ok := s.(*store.S3); !ok {
			t.Errorf("open %s: got %T, want *store.S3", url, s)
		}
	}
}
