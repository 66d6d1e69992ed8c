package store_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests if any goroutine outlives them: a
// lease's heartbeat, a staged write or an S3 request left running. The
// HTTP transport's idle keep-alive connections (one read and one write
// loop each, owned by the shared transport's pool, not by a request) are
// not leaks: the S3 tests against versitygw leave some in the pool.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		goleak.IgnoreAnyFunction("net/http.(*persistConn).readLoop"),
		goleak.IgnoreTopFunction("net/http.(*persistConn).writeLoop"),
	)
}
