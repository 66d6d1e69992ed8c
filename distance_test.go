package tidemark

import "testing"

func TestEditDistance(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want int
	}{{"", "", 0}, {"window", "windw", 1}, {"lateness", "lateenss", 1}, {"abc", "xyz", 3}, {"key", "", 3}, {"path", "pth", 1}} {
		if got := EditDistance(tc.a, tc.b); got != tc.want {
			t.Errorf("EditDistance(%q, %q) = %d, want %d", tc.a, tc.b, got, tc.want)
		}
	}
}
