package tidemark

import (
	"cmp"
	"math"
)

// Agg is the aggregate of one (window, key): count, and over the rows that
// carry a value, sum, min and max. Values == 0 means sum/min/max are null.
//
// The sum is compensated (Neumaier's variant of Kahan summation): Comp holds
// the low-order bits lost by Sum, and Total is the sum to report. The
// stream adds rows in arrival order and the batch layer in file order, and
// with compensation both land on the correctly rounded sum in all but
// pathological cases, so the two layers agree on sums too.
type Agg struct {
	Count  int64
	Values int64 // rows that contributed to Sum, Min and Max
	Sum    float64
	Comp   float64 // compensation: the error of Sum; 0 for aggregates read back from the lake
	Min    float64
	Max    float64
}

// Total returns the compensated sum.
func (a *Agg) Total() float64 { return a.Sum + a.Comp }

// Add folds one row into the aggregate.
func (a *Agg) Add(v float64, hasValue bool) {
	a.Count++
	if !hasValue {
		return
	}
	if a.Values == 0 || v < a.Min {
		a.Min = v
	}
	if a.Values == 0 || v > a.Max {
		a.Max = v
	}
	a.Values++
	a.addSum(v)
}

// addSum is one Neumaier step: Sum+Comp gains v with its rounding error kept.
func (a *Agg) addSum(v float64) {
	t := a.Sum + v
	if math.Abs(a.Sum) >= math.Abs(v) {
		a.Comp += (a.Sum - t) + v
	} else {
		a.Comp += (v - t) + a.Sum
	}
	a.Sum = t
}

// Merge folds another aggregate into a.
func (a *Agg) Merge(b Agg) {
	a.Count += b.Count
	if b.Values == 0 {
		return
	}
	if a.Values == 0 || b.Min < a.Min {
		a.Min = b.Min
	}
	if a.Values == 0 || b.Max > a.Max {
		a.Max = b.Max
	}
	a.Values += b.Values
	a.addSum(b.Sum)
	a.Comp += b.Comp
}

// Result is one window's aggregate for one key, as emitted and stored.
type Result struct {
	Window Window
	Key    Key
	Agg    Agg
	Final  bool
	// State holds the --agg aggregates' state (AggList.Values reads
	// them); nil without --agg.
	State *AggState
}

// CompareResults orders results by window start, then window end, then key:
// the one order in which results are emitted, stored and reported.
func CompareResults(a, b Result) int {
	if c := cmp.Compare(a.Window.Start, b.Window.Start); c != 0 {
		return c
	}
	if c := cmp.Compare(a.Window.End, b.Window.End); c != 0 {
		return c
	}
	return a.Key.Compare(b.Key)
}
