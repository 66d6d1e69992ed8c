package tidemark

import "testing"

func TestFloorDiv(t *testing.T) {
	tests := []struct{ a, b, want int64 }{
		{7, 2, 3},
		{6, 2, 3},
		{0, 2, 0},
		{-1, 2, -1},
		{-2, 2, -1},
		{-3, 2, -2},
		{7, -2, -4},
		{-7, -2, 3},
	}
	for _, tt := range tests {
		if got := FloorDiv(tt.a, tt.b); got != tt.want {
			t.Errorf("FloorDiv(%d, %d) = %d, want %d", tt.a, tt.b, got, tt.want)
		}
	}
}

func TestSubSat(t *testing.T) {
	tests := []struct{ a, b, want int64 }{
		{10, 3, 7},
		{-5, 0, -5},
		{MinTime, 0, MinTime},
		{MinTime, 1, MinTime},
		{MinTime + 5, 10, MinTime},
		{MinTime + 10, 10, MinTime},
		{MinTime + 11, 10, MinTime + 1},
	}
	for _, tt := range tests {
		if got := SubSat(tt.a, tt.b); got != tt.want {
			t.Errorf("SubSat(%d, %d) = %d, want %d", tt.a, tt.b, got, tt.want)
		}
	}
}
