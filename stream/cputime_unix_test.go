//go:build unix

package stream

import "syscall"

// cpuTime returns the process's user+system CPU time in nanoseconds, so
// benchmarks on a shared machine can report CPU per event as well as wall
// time.
func cpuTime() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}
