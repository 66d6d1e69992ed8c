package batch

import (
	"slices"

	"tidemark"
)

// exactPlan is how an AggList's aggregates are computed exactly: for each
// input, whether it is text (distinct counts keep the set of values) and
// whether a percentile reads it (its values are kept, to be sorted).
type exactPlan struct {
	list tidemark.AggList
	text []bool
	keep []bool
}

func newExactPlan(l tidemark.AggList) *exactPlan {
	if l.Empty() {
		return nil
	}
	p := &exactPlan{list: l, text: make([]bool, len(l.Inputs)), keep: make([]bool, len(l.Inputs))}
	for i, in := range l.Inputs {
		p.text[i] = in.Text
	}
	for i, a := range l.Specs {
		if a.Func == tidemark.AggQuantile {
			p.keep[l.SpecInput(i)] = true
		}
	}
	return p
}

// exactCell is the exact state of one window×key's aggregates: per input,
// its moments (numbers), its values (numbers a percentile reads) or its
// distinct values (text).
type exactCell struct {
	moments  []tidemark.Agg
	values   [][]float64
	distinct []map[string]struct{}
}

func (p *exactPlan) newCell() *exactCell {
	n := len(p.text)
	return &exactCell{moments: make([]tidemark.Agg, n), values: make([][]float64, n), distinct: make([]map[string]struct{}, n)}
}

// cellBlock allocates cells for a plan in blocks: one allocation per
// cellBlockSize cells of each part instead of four per cell.
type cellBlock struct {
	p        *exactPlan
	cells    []exactCell
	moments  []tidemark.Agg
	values   [][]float64
	distinct []map[string]struct{}
}

const cellBlockSize = 256

func (b *cellBlock) next() *exactCell {
	n := len(b.p.text)
	if len(b.cells) == 0 {
		b.cells = make([]exactCell, cellBlockSize)
		b.moments = make([]tidemark.Agg, n*cellBlockSize)
		b.values = make([][]float64, n*cellBlockSize)
		b.distinct = make([]map[string]struct{}, n*cellBlockSize)
	}
	c := &b.cells[0]
	b.cells = b.cells[1:]
	c.moments, b.moments = b.moments[:n:n], b.moments[n:]
	c.values, b.values = b.values[:n:n], b.values[n:]
	c.distinct, b.distinct = b.distinct[:n:n], b.distinct[n:]
	return c
}

// add folds row r of a batch's input columns (lake.RawBatch.Fields) into c.
func (p *exactPlan) add(c *exactCell, fields [][]tidemark.AggValue, r int) {
	for i := range p.text {
		in := fields[i][r]
		if !in.Present {
			continue
		}
		if p.text[i] {
			m := c.distinct[i]
			if m == nil {
				m = map[string]struct{}{}
				c.distinct[i] = m
			}
			m[in.Text] = struct{}{}
			continue
		}
		v := in.Num
		c.moments[i].Add(v, true)
		if p.keep[i] {
			c.values[i] = append(c.values[i], v)
		}
	}
}

// merge folds o into c (o is not used afterwards).
func (c *exactCell) merge(o *exactCell) {
	for i := range o.moments {
		c.moments[i].Merge(o.moments[i])
		c.values[i] = append(c.values[i], o.values[i]...)
		if c.distinct[i] == nil {
			c.distinct[i] = o.distinct[i]
			continue
		}
		for s := range o.distinct[i] {
			c.distinct[i][s] = struct{}{}
		}
	}
}

// out returns the exact aggregates, in the list's Specs order: sum, min,
// max and avg from the compensated moments (as the stream computes them),
// a percentile as DuckDB's quantile_disc (QuantileIndex), a distinct count
// as COUNT(DISTINCT). It sorts c's values in place.
func (p *exactPlan) out(c *exactCell) []tidemark.AggOut {
	out := make([]tidemark.AggOut, len(p.list.Specs))
	sorted := make([]bool, len(p.text))
	for i, a := range p.list.Specs {
		j := p.list.SpecInput(i)
		if j < 0 {
			continue
		}
		if a.Func == tidemark.AggDistinct {
			out[i] = tidemark.AggOut{V: float64(len(c.distinct[j])), Valid: true}
			continue
		}
		m := c.moments[j]
		if m.Values == 0 {
			continue
		}
		switch a.Func {
		case tidemark.AggSum:
			out[i] = tidemark.AggOut{V: m.Total(), Valid: true}
		case tidemark.AggMin:
			out[i] = tidemark.AggOut{V: m.Min, Valid: true}
		case tidemark.AggMax:
			out[i] = tidemark.AggOut{V: m.Max, Valid: true}
		case tidemark.AggAvg:
			out[i] = tidemark.AggOut{V: m.Total() / float64(m.Values), Valid: true}
		case tidemark.AggQuantile:
			vs := c.values[j]
			if !sorted[j] {
				slices.Sort(vs)
				sorted[j] = true
			}
			out[i] = tidemark.AggOut{V: vs[a.QuantileIndex(len(vs))], Valid: true}
		}
	}
	return out
}
