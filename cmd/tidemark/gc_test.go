package main

import (
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"testing"
)

// The binary runs with GOGC 70 unless GOGC is set: read from the GC's own
// trace (GODEBUG=gctrace=1) of a --once run, each collection's heap goal
// over the live heap it found is 1.7, and 2 with GOGC=100.
func TestDefaultGOGC(t *testing.T) {
	needBinary(t) // the Go runtime's behaviour in the binary: full tier
	in := backlogInput(t, 500_000)
	for _, c := range []struct {
		env  []string
		want float64
	}{{nil, 1.7}, {[]string{"GOGC=100"}, 2.0}} {
		cmd := exec.Command(binary, "stream", "--source", in, "--key", "page", "--value", "value",
			"--window", "1m", "--lake", t.TempDir(), "--once", "--drain")
		cmd.Env = append(append(cmd.Environ(), "GODEBUG=gctrace=1"), c.env...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%v: %v\n%s", c.env, err, out)
		}
		ratio, n := goalRatio(string(out))
		t.Logf("%v: median heap goal / live heap %.2f over %d collections", c.env, ratio, n)
		if n < 1 || ratio < c.want-0.1 || ratio > c.want+0.1 {
			t.Errorf("%v: median heap goal / live heap %.2f over %d collections, want %.1f (at least one)", c.env, ratio, n, c.want)
		}
	}
}

// gcLine is a gctrace line's heap at the start, end and live after marking,
// and the goal the cycle ran to, in MB.
var gcLine = regexp.MustCompile(`(\d+)->(\d+)->(\d+) MB, (\d+) MB goal`)

// goalRatio is the median, over consecutive collections, of a cycle's goal
// over the live heap the cycle before it found (the goal it set), where
// that was at least 16 MB (below, the MB rounding blurs the ratio).
func goalRatio(trace string) (float64, int) {
	var ratios []float64
	prevLive := 0.0
	for _, m := range gcLine.FindAllStringSubmatch(trace, -1) {
		live, _ := strconv.ParseFloat(m[3], 64)
		goal, _ := strconv.ParseFloat(m[4], 64)
		if prevLive >= 16 {
			ratios = append(ratios, goal/prevLive)
		}
		prevLive = live
	}
	if len(ratios) == 0 {
		return 0, 0
	}
	slices.Sort(ratios)
	return ratios[len(ratios)/2], len(ratios)
}
