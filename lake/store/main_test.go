package store_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests if any goroutine outlives them: a
// lease's heartbeat, a staged write or an S3 request left running.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
