package requeue

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests if any goroutine outlives them
// (but the lake's zstd encoder maker, which lives with the process).
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreAnyFunction("tidemark/lake.makeZstdEncoders"))
}
