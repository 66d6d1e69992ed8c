package store

import (
	"strings"
	"testing"
)

func TestEndpointRefusesCredentials(t *testing.T) {
	for _, ep := range []string{
		"http://AKIAKEY:s3cr3t@127.0.0.1:7070",
		"https://AKIAKEY:s3cr3t@s3.example.com",
		"AKIAKEY:s3cr3t@127.0.0.1:7070",           // no scheme: minio-go would print the user
		"http://AKIAKEY:s3cr3t@127.0.0.1:x/",      // url.Parse echoes the whole URL
		"ftp://AKIAKEY:s3cr3t@h",                  // wrong scheme
		"http://AKIAKEY:s3/cr?3#t@127.0.0.1:7070", // a secret pasted unescaped
		"http://AKIAKEY@127.0.0.1:7070",
	} {
		_, _, err := S3Config{Endpoint: ep}.endpoint()
		if err == nil {
			t.Errorf("endpoint %q: got no error, want credentials refused", ep)
			continue
		}
		msg := err.Error()
		if strings.Contains(msg, "AKIAKEY") || strings.Contains(msg, "cr3") {
			t.Errorf("endpoint %q: the error shows a credential: %s", ep, msg)
		}
		if !strings.Contains(msg, "***@") || !strings.Contains(msg, "credentials in the endpoint URL are refused") {
			t.Errorf("endpoint %q: got %q, want the redacted endpoint and why", ep, msg)
		}
	}
	for _, ep := range []string{"http://127.0.0.1:7070", "127.0.0.1:7070", "https://s3.example.com/"} {
		if _, _, err := (S3Config{Endpoint: ep}).endpoint(); err != nil {
			t.Errorf("endpoint %q: %v", ep, err)
		}
	}
}

// FuzzEndpointRedacts: whatever the user and password, an endpoint with
// userinfo is refused and the error never holds "user:password" or the
// password after the scheme.
func FuzzEndpointRedacts(f *testing.F) {
	f.Add("http", "AKIAKEY", "s3cr3t", "127.0.0.1:7070")
	f.Add("", "k", "p/q?r#s", "host")
	f.Add("https", "", "", "[::1]:1")
	f.Fuzz(func(t *testing.T, scheme, user, pass, host string) {
		if strings.Contains(host, "@") {
			return // then the host's "@" ends the userinfo: another case
		}
		ep := user + ":" + pass + "@" + host
		if scheme != "" {
			ep = scheme + "://" + ep
		}
		_, _, err := S3Config{Endpoint: ep}.endpoint()
		if err == nil {
			t.Fatalf("endpoint %q: no error", ep)
		}
		if strings.Contains(err.Error(), user+":"+pass+"@") {
			t.Fatalf("endpoint %q: error shows the userinfo: %s", ep, err)
		}
		if RedactURL(ep) == ep {
			t.Fatalf("RedactURL(%q) left it as it was", ep)
		}
	})
}
