package colfile

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests if any goroutine outlives them (the
// package starts none of its own: ZstdEncoderMaker is its caller's).
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
