// Command tidemark is the one binary of the tidemark toolkit: `tidemark
// stream` computes event-time windows from growing files or an S3 bucket into
// a Delta Lake, `tidemark reconcile` corrects the windows late data touched,
// and `tidemark lateness` measures how late data arrives. See README.md.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := newApp().RunContext(ctx, os.Args)
	stop()
	os.Exit(exitCode(err, os.Stderr))
}

// exitCoder is implemented by errors that want a specific exit status, such
// as reconcile's "another run holds the lock".
type exitCoder interface{ ExitCode() int }

// exitCode prints err as one line and maps it to the process status.
func exitCode(err error, w interface{ Write([]byte) (int, error) }) int {
	if err == nil {
		return 0
	}
	fmt.Fprintf(w, "tidemark: %v\n", err)
	var ec exitCoder
	if errors.As(err, &ec) {
		return ec.ExitCode()
	}
	return 1
}
