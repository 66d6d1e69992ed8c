package ingest

import (
	"strings"
	"testing"
)

// The S3 source's copy of the endpoint parsing refuses credentials in the
// URL without showing them, as lake/store's does.
func TestS3EndpointRefusesCredentials(t *testing.T) {
	for _, ep := range []string{
		"http://AKIAKEY:s3cr3t@127.0.0.1:7070",
		"AKIAKEY:s3cr3t@127.0.0.1:7070",
		"http://AKIAKEY:s3cr3t@127.0.0.1:x/",
		"http://AKIAKEY:s3/cr?3#t@127.0.0.1:7070",
	} {
		_, _, err := s3Options{Endpoint: ep}.endpoint()
		if err == nil {
			t.Errorf("endpoint %q: got no error, want credentials refused", ep)
			continue
		}
		if msg := err.Error(); strings.Contains(msg, "AKIAKEY") || strings.Contains(msg, "cr3") || !strings.Contains(msg, "***@") {
			t.Errorf("endpoint %q: got %q, want it refused and redacted", ep, msg)
		}
	}
	if _, _, err := (s3Options{Endpoint: "http://127.0.0.1:7070"}).endpoint(); err != nil {
		t.Error(err)
	}
}
