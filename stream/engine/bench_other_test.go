//go:build !unix

package engine

// cpuTime is unavailable here; benchmarks then report 0 CPU ns/event.
func cpuTime() int64 { return 0 }
