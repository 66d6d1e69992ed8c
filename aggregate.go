package tidemark

// Agg is the aggregate of one (window, key): count, and over the rows that
// carry a value, sum, min and max. Values == 0 means sum/min/max are null.
type Agg struct {
	Count  int64
	Values int64 // rows that contributed to Sum, Min and Max
	Sum    float64
	Min    float64
	Max    float64
}

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
	a.Sum += v
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
	a.Sum += b.Sum
}

// Result is one window's aggregate for one key, as emitted and stored.
type Result struct {
	Window Window
	Key    Key
	Agg    Agg
	Final  bool
}
