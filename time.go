package tidemark

import (
	"math"
	"time"
)

// Event times, watermarks and window bounds are int64 microseconds since the
// Unix epoch inside the project; the helpers below are the one place their
// arithmetic is written.

// MaxTime is +infinity for watermarks (the --drain watermark).
const MaxTime int64 = math.MaxInt64

// MinTime is -infinity: "no watermark yet".
const MinTime int64 = math.MinInt64

// Microseconds per hour and per day: the lake partitions raw events by hour
// and window results by day.
const (
	MicrosPerHour = int64(time.Hour / time.Microsecond)
	MicrosPerDay  = 24 * MicrosPerHour
)

// FloorDiv divides rounding toward -infinity, so negative times align the
// same way as positive ones (FloorDiv(-1, 10) == -1).
func FloorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && (a < 0) != (b < 0) {
		q--
	}
	return q
}

// SubSat returns a-b for b >= 0, saturating at MinTime instead of wrapping
// (a watermark minus a lateness budget).
func SubSat(a, b int64) int64 {
	if a < MinTime+b {
		return MinTime
	}
	return a - b
}

// FormatTime renders µs since the epoch as RFC 3339 UTC with only the
// fractional digits needed.
func FormatTime(us int64) string {
	return time.UnixMicro(us).UTC().Format(time.RFC3339Nano)
}
