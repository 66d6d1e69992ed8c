package lateness

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
)

const (
	usSecond = int64(time.Second / time.Microsecond)
	usMinute = 60 * usSecond
	usHour   = 60 * usMinute
	usDay    = 24 * usHour
)

// ladder holds the readable lateness budgets (µs) a recommendation is
// rounded up to. 0 is a budget too: data that is in order at p99 needs none.
// Beyond the last rung a budget is rounded up to whole days.
var ladder = []int64{
	0,
	1 * usSecond, 2 * usSecond, 5 * usSecond, 10 * usSecond, 15 * usSecond, 30 * usSecond,
	1 * usMinute, 2 * usMinute, 5 * usMinute, 10 * usMinute, 15 * usMinute, 30 * usMinute,
	1 * usHour, 2 * usHour, 3 * usHour, 6 * usHour, 12 * usHour,
	1 * usDay, 2 * usDay, 3 * usDay, 7 * usDay, 14 * usDay, 30 * usDay, 60 * usDay, 90 * usDay,
	180 * usDay, 365 * usDay,
}

// defaultBudgets are the lateness budgets (µs) every report replays, besides
// each group's recommendation.
var defaultBudgets = []int64{10 * usSecond, usMinute, 5 * usMinute, 10 * usMinute, usHour}

// RoundUp returns the smallest readable budget >= us.
func RoundUp(us int64) int64 {
	if i, _ := slices.BinarySearch(ladder, us); i < len(ladder) {
		return ladder[i]
	}
	return (us + usDay - 1) / usDay * usDay
}

// ladderCounts counts values exactly per ladder rung: c[i] values are in
// (ladder[i−1], ladder[i]], the last counter those above the top rung. The
// recommendation comes from these exact counts, so it is the exact p99
// rounded up, whatever the sketch's error.
type ladderCounts []int64

func newLadderCounts() ladderCounts { return make(ladderCounts, len(ladder)+1) }

func (c ladderCounts) add(us int64) {
	i, _ := slices.BinarySearch(ladder, us)
	c[i]++
}

// recommend returns the exact nearest-rank q-quantile of the counted values
// rounded up to the ladder; above the top rung it rounds the sketch's
// estimate up to whole days.
func (c ladderCounts) recommend(q float64, n int64, s *Sketch) int64 {
	rank := max(int64(math.Ceil(q*float64(n))), 1)
	var seen int64
	for i, k := range c[:len(ladder)] {
		if seen += k; seen >= rank {
			return ladder[i]
		}
	}
	return RoundUp(int64(math.Ceil(s.Quantile(q))))
}

// FormatDuration renders seconds the way a person writes them: 0, 250µs,
// 12ms, 1.5s, 4m12s, 2h30m, 3d4h. Zero parts are left out (5m, not 5m0s).
func FormatDuration(seconds float64) string {
	if seconds == 0 || math.IsNaN(seconds) {
		return "0"
	}
	if seconds < 0 {
		return "-" + FormatDuration(-seconds)
	}
	us := seconds * 1e6
	switch {
	case us < 1000:
		return fmt.Sprintf("%.0fµs", us)
	case us < 10_000:
		return trimZero(fmt.Sprintf("%.1f", us/1000)) + "ms"
	case us < 999_500: // not "1000ms"
		return fmt.Sprintf("%.0fms", us/1000)
	case seconds < 10:
		return trimZero(fmt.Sprintf("%.2f", seconds)) + "s"
	case seconds < 60:
		return trimZero(fmt.Sprintf("%.1f", seconds)) + "s"
	}
	s := int64(math.Round(seconds))
	parts := func(big, small int64, bu, su string) string {
		out := fmt.Sprintf("%d%s", big, bu)
		if small > 0 {
			out += fmt.Sprintf("%d%s", small, su)
		}
		return out
	}
	switch {
	case s < 3600:
		return parts(s/60, s%60, "m", "s")
	case s < 86400:
		return parts(s/3600, s%3600/60, "h", "m")
	}
	return parts(s/86400, s%86400/3600, "d", "h")
}

func trimZero(s string) string {
	if strings.Contains(s, ".") {
		s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	}
	return s
}
