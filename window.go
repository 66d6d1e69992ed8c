package tidemark

import (
	"errors"
	"fmt"
	"time"
)

// Window is a half-open event-time interval [Start, End) in microseconds.
type Window struct {
	Start int64
	End   int64
}

// Contains reports whether t falls in [Start, End).
func (w Window) Contains(t int64) bool { return w.Start <= t && t < w.End }

// String renders the window in RFC 3339 UTC.
func (w Window) String() string {
	return "[" + FormatTime(w.Start) + ", " + FormatTime(w.End) + ")"
}

// WindowSpec describes tumbling (Slide == Size or 0) or sliding windows.
// Windows are aligned to the Unix epoch: starts are multiples of Slide.
type WindowSpec struct {
	Size  int64 // window length, µs
	Slide int64 // distance between window starts, µs; 0 means Size (tumbling)
}

// NewWindowSpec validates durations and returns the spec.
func NewWindowSpec(size, slide time.Duration) (WindowSpec, error) {
	if size <= 0 {
		return WindowSpec{}, fmt.Errorf("window must be positive, got %s", size)
	}
	if slide < 0 {
		return WindowSpec{}, fmt.Errorf("slide must be positive, got %s", slide)
	}
	if slide == 0 {
		slide = size
	}
	if slide > size {
		return WindowSpec{}, fmt.Errorf("slide %s is larger than the window %s: events between windows would be lost", slide, size)
	}
	if size%time.Microsecond != 0 || slide%time.Microsecond != 0 {
		return WindowSpec{}, errors.New("window and slide must be whole microseconds")
	}
	return WindowSpec{Size: size.Microseconds(), Slide: slide.Microseconds()}, nil
}

// Normalized returns s with the slide made explicit: a Slide of 0 (or less)
// becomes Size, so two specs of the same windows compare equal. This is the
// one place the "0 means tumbling" rule is applied.
func (s WindowSpec) Normalized() WindowSpec {
	if s.Slide <= 0 {
		s.Slide = s.Size
	}
	return s
}

// Sliding reports whether a row can belong to more than one window.
func (s WindowSpec) Sliding() bool { return s.Normalized().Slide != s.Size }

// Assign appends to dst every window containing t, in ascending start order.
// This is the one place window assignment is defined; the stream, the batch
// recomputation and the lateness what-if all call it.
func (s WindowSpec) Assign(dst []Window, t int64) []Window {
	slide := s.Normalized().Slide
	last := FloorDiv(t, slide) * slide // the latest start <= t
	first := last
	for first-slide > t-s.Size {
		first -= slide
	}
	for start := first; start <= last; start += slide {
		dst = append(dst, Window{Start: start, End: start + s.Size})
	}
	return dst
}
