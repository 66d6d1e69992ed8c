package storetest

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"sync"
	"testing"
)

// Fault is a failure a Proxy injects in place of a server's answer.
type Fault int

// Faults the Proxy can inject.
const (
	SlowDown        Fault = iota // 503 SlowDown, S3's throttling answer
	InternalError                // 500 InternalError
	TooManyRequests              // 429
	Conflict                     // 409 ConditionalRequestConflict (AWS, racing conditional writes)
	Hang                         // no answer until the client gives up
	LoseResponse                 // forward the request, then answer 500: applied, but the client cannot know
	// IgnorePrecondition forwards the request and turns a 412 answer into
	// 200, playing a server that does not enforce If-None-Match (the
	// header itself cannot be dropped: it is signed).
	IgnorePrecondition
	// CutBody forwards the request and drops the connection halfway
	// through the response body.
	CutBody
)

// Proxy sits between a client and a real server and fails chosen requests,
// so retry paths are tested against the real server's behaviour.
type Proxy struct {
	Endpoint string // "http://127.0.0.1:<port>"

	mu    sync.Mutex
	fault Fault
	left  int
	seen  int
}

// NewProxy starts a proxy in front of target (a Server's Endpoint) and
// stops it in t.Cleanup.
func NewProxy(t testing.TB, target string) *Proxy {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	p := &Proxy{}
	stop := make(chan struct{})
	// The Host header is left as the client sent it, so SigV4 signatures
	// (which cover it) still verify at the server.
	rp := httputil.NewSingleHostReverseProxy(u)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fault, inject := p.next()
		if !inject {
			rp.ServeHTTP(w, r)
			return
		}
		switch fault {
		case Hang:
			// The server notices a client hanging up only once the body
			// is read; stop at cleanup in any case.
			io.Copy(io.Discard, r.Body)
			select {
			case <-r.Context().Done():
			case <-stop:
			}
		case LoseResponse:
			rp.ServeHTTP(discard{header: http.Header{}}, r)
			s3Error(w, http.StatusInternalServerError, "InternalError")
		case IgnorePrecondition:
			rec := httptest.NewRecorder()
			rp.ServeHTTP(rec, r)
			if rec.Code == http.StatusPreconditionFailed {
				w.Header().Set("ETag", `"ignored-precondition"`)
				w.WriteHeader(http.StatusOK)
				return
			}
			for k, v := range rec.Header() {
				w.Header()[k] = v
			}
			w.WriteHeader(rec.Code)
			w.Write(rec.Body.Bytes())
		case CutBody:
			rec := httptest.NewRecorder()
			rp.ServeHTTP(rec, r)
			for k, v := range rec.Header() {
				w.Header()[k] = v
			}
			w.WriteHeader(rec.Code)
			w.Write(rec.Body.Bytes()[:rec.Body.Len()/2])
			panic(http.ErrAbortHandler) // closes the connection mid-body
		case SlowDown:
			s3Error(w, http.StatusServiceUnavailable, "SlowDown")
		case InternalError:
			s3Error(w, http.StatusInternalServerError, "InternalError")
		case TooManyRequests:
			s3Error(w, http.StatusTooManyRequests, "TooManyRequests")
		case Conflict:
			s3Error(w, http.StatusConflict, "ConditionalRequestConflict")
		}
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(stop) }) // runs first: frees hung handlers
	p.Endpoint = srv.URL
	return p
}

// Fail makes the next n requests fail with f.
func (p *Proxy) Fail(n int, f Fault) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.fault, p.left = f, n
}

// Left returns how many of the requested failures are still to come.
func (p *Proxy) Left() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.left
}

// Requests returns how many requests the proxy has received.
func (p *Proxy) Requests() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.seen
}

func (p *Proxy) next() (Fault, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.seen++
	if p.left == 0 {
		return 0, false
	}
	p.left--
	return p.fault, true
}

func s3Error(w http.ResponseWriter, status int, code string) {
	w.Header().Set("Content-Type", "application/xml")
	w.WriteHeader(status)
	fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>%s</Code><Message>injected by storetest.Proxy</Message></Error>`, code)
}

// discard is a ResponseWriter that drops the server's answer.
type discard struct{ header http.Header }

func (d discard) Header() http.Header         { return d.header }
func (d discard) Write(p []byte) (int, error) { return len(p), nil }
func (d discard) WriteHeader(int)             {}
