package stream

import (
	"os"
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests if any goroutine outlives them
// (but the lake's zstd encoder maker, which lives with the process).
func TestMain(m *testing.M) {
	if os.Getenv(feederEnv) != "" {
		os.Exit(feed()) // the feeder process of BenchmarkFollowingStream
	}
	goleak.VerifyTestMain(m, goleak.IgnoreAnyFunction("tidemark/lake.makeZstdEncoders"))
}
