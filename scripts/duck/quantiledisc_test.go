package main

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// nearestRank is the rule tidemark's batch layer uses for an exact quantile
// (tidemark.AggSpec.QuantileIndex, which batch's exact layer and the live state's small sets use): the value at 0-based index max(1, ceil(n·q)) − 1 of
// the sorted values, with q = num/den computed exactly in integers.
func nearestRank(sorted []float64, num, den int64) float64 {
	n := int64(len(sorted))
	i := (n*num + den - 1) / den // ceil(n·q)
	return sorted[max(1, i)-1]
}

// TestQuantileDiscRule checks the rule against DuckDB's quantile_disc for
// quantiles written as decimal literals (0.999 is DECIMAL(4,3) to DuckDB,
// which then computes the rank in integers), on value counts around the
// ranks where floating point would round the other way.
func TestQuantileDiscRule(t *testing.T) {
	db, err := openDB(1)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	levels := []struct {
		lit      string
		num, den int64
	}{
		{"0", 0, 1}, {"0.001", 1, 1000}, {"0.01", 1, 100}, {"0.07", 7, 100}, {"0.1", 1, 10},
		{"0.25", 1, 4}, {"0.3", 3, 10}, {"0.5", 1, 2}, {"0.7", 7, 10}, {"0.9", 9, 10},
		{"0.95", 95, 100}, {"0.99", 99, 100}, {"0.999", 999, 1000}, {"0.9999", 9999, 10000}, {"1", 1, 1},
	}
	rng := rand.New(rand.NewPCG(7, 11))
	checked, floatDiffers := 0, 0
	for _, n := range []int{1, 2, 3, 7, 10, 20, 99, 100, 101, 300, 1000, 1001, 2000, 10000} {
		vals := make([]float64, n)
		var rows []string
		for i := range vals {
			vals[i] = float64(rng.IntN(1_000_000)) / 8
			rows = append(rows, fmt.Sprintf("(%v)", vals[i]))
		}
		sorted := slices.Clone(vals)
		slices.Sort(sorted)
		var qs []string
		for _, l := range levels {
			qs = append(qs, l.lit)
		}
		q := "SELECT quantile_disc(v::DOUBLE, [" + strings.Join(qs, ", ") + "]) FROM (VALUES " + strings.Join(rows, ", ") + ") t(v)"
		var got any
		if err := db.QueryRow(q).Scan(&got); err != nil {
			t.Fatal(err)
		}
		list, ok := got.([]any)
		if !ok || len(list) != len(levels) {
			t.Fatalf("n=%d: got %v, want a list of %d", n, got, len(levels))
		}
		for i, l := range levels {
			want := nearestRank(sorted, l.num, l.den)
			if fi := int(math.Ceil(float64(n) * (float64(l.num) / float64(l.den)))); sorted[max(1, fi)-1] != want {
				floatDiffers++ // the rank computed in float64 would be off by one here
			}
			if list[i] != want {
				t.Errorf("n=%d q=%s: DuckDB %v, nearest rank %v", n, l.lit, list[i], want)
			}
			checked++
		}
	}
	t.Logf("%d (n, q) pairs agree; a float64 rank would have missed %d of them", checked, floatDiffers)
}

func TestQuantileLiteral(t *testing.T) {
	for pct, want := range map[string]string{"0": "0.00", "5": "0.05", "50": "0.50", "99": "0.99", "99.9": "0.999", "99.99": "0.9999", "100": "1.00", "0.1": "0.001"} {
		got, err := quantileLiteral(pct)
		if err != nil || got != want {
			t.Errorf("quantileLiteral(%q) = %q, %v; want %q", pct, got, err, want)
		}
	}
	for _, bad := range []string{"", "x", "101", "-1", "1e2"} {
		if got, err := quantileLiteral(bad); err == nil {
			t.Errorf("quantileLiteral(%q) = %q, want an error", bad, got)
		}
	}
}
