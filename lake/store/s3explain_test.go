package store

import (
	"context"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
)

// An S3 server that refuses every request: the error names the endpoint
// and where the credentials came from, and never a key or secret.
func TestExplainS3NamesCredentialSource(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/xml")
		w.WriteHeader(http.StatusForbidden)
		w.Write([]byte(`<?xml version="1.0" encoding="UTF-8"?><Error><Code>AccessDenied</Code><Message>Access Denied</Message><Resource>/bucket1</Resource><RequestId>1</RequestId></Error>`))
	}))
	defer srv.Close()
	noFile := filepath.Join(t.TempDir(), "credentials")
	tests := []struct {
		name string
		env  map[string]string
		want string
	}{
		{"env", map[string]string{"AWS_ACCESS_KEY_ID": "AKIASECRETID", "AWS_SECRET_ACCESS_KEY": "s3cr3tvalue"}, "credentials from the environment ($AWS_ACCESS_KEY_ID)"},
		{"none", map[string]string{"AWS_ACCESS_KEY_ID": "", "AWS_SECRET_ACCESS_KEY": ""}, "no credentials found"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("AWS_SHARED_CREDENTIALS_FILE", noFile)
			t.Setenv("AWS_ACCESS_KEY", "")
			t.Setenv("AWS_REGION", "us-east-1")
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			_, err := Open(context.Background(), "s3://bucket1/lake", S3Config{Endpoint: srv.URL, Retries: 1})
			if err == nil {
				t.Fatal("open: no error, want Access Denied")
			}
			msg := err.Error()
			t.Log(msg)
			for _, want := range []string{"Access Denied", "S3 endpoint " + srv.URL, tc.want} {
				if !strings.Contains(msg, want) {
					t.Errorf("error %q lacks %q", msg, want)
				}
			}
			if strings.Contains(msg, "AKIASECRETID") || strings.Contains(msg, "s3cr3tvalue") {
				t.Errorf("error shows a credential: %s", msg)
			}
		})
	}
}

// Errors that are not refusals pass through unchanged.
func TestExplainS3LeavesOtherErrors(t *testing.T) {
	err := context.DeadlineExceeded
	if got := (S3Config{}).ExplainS3(err); got != err {
		t.Errorf("got %v, want the error unchanged", got)
	}
}
