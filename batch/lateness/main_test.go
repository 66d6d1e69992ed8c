package lateness

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests if any goroutine outlives them: the
// what-if replay's workers, or the lake's readers (the lake's zstd encoder
// maker lives for the process, as in the lake's own tests).
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreAnyFunction("tidemark/lake.makeZstdEncoders"))
}
