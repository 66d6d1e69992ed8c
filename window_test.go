package tidemark

import (
	"testing"
	"time"
)

func TestAssign(t *testing.T) {
	min := time.Minute.Microseconds()
	tests := []struct {
		name        string
		size, slide time.Duration
		t           int64
		want        []Window
	}{
		{"tumbling", 10 * time.Minute, 0, 12 * min, []Window{{10 * min, 20 * min}}},
		{"tumbling, on a boundary", 10 * time.Minute, 0, 10 * min, []Window{{10 * min, 20 * min}}},
		{"tumbling, negative time", 10 * time.Minute, 0, -1, []Window{{-10 * min, 0}}},
		{"sliding: every window containing t", 10 * time.Minute, 5 * time.Minute, 12 * min,
			[]Window{{5 * min, 15 * min}, {10 * min, 20 * min}}},
		{"sliding, on a boundary (half-open)", 10 * time.Minute, 5 * time.Minute, 10 * min,
			[]Window{{5 * min, 15 * min}, {10 * min, 20 * min}}},
		{"sliding 1m/10s", time.Minute, 10 * time.Second, 65 * time.Second.Microseconds(),
			[]Window{{10e6, 70e6}, {20e6, 80e6}, {30e6, 90e6}, {40e6, 100e6}, {50e6, 110e6}, {60e6, 120e6}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			spec, err := NewWindowSpec(tc.size, tc.slide)
			if err != nil {
				t.Fatal(err)
			}
			got := spec.Assign(nil, tc.t)
			if len(got) != len(tc.want) {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
			for i := range got {
				if got[i] != tc.want[i] || !got[i].Contains(tc.t) {
					t.Errorf("got %v, want %v", got, tc.want)
				}
			}
		})
	}
}

func TestNewWindowSpecRejects(t *testing.T) {
	for _, c := range []struct{ size, slide time.Duration }{
		{0, 0}, {-time.Minute, 0}, {time.Minute, 2 * time.Minute}, {time.Minute, -time.Second}, {time.Nanosecond, 0},
	} {
		if _, err := NewWindowSpec(c.size, c.slide); err == nil {
			t.Errorf("NewWindowSpec(%s, %s): no error", c.size, c.slide)
		}
	}
}

func TestNormalized(t *testing.T) {
	tests := []struct{ in, want WindowSpec }{
		{WindowSpec{Size: 10}, WindowSpec{Size: 10, Slide: 10}},
		{WindowSpec{Size: 10, Slide: -1}, WindowSpec{Size: 10, Slide: 10}},
		{WindowSpec{Size: 10, Slide: 5}, WindowSpec{Size: 10, Slide: 5}},
		{WindowSpec{Size: 10, Slide: 10}, WindowSpec{Size: 10, Slide: 10}},
	}
	for _, tt := range tests {
		if got := tt.in.Normalized(); got != tt.want {
			t.Errorf("%+v.Normalized() = %+v, want %+v", tt.in, got, tt.want)
		}
	}
}
