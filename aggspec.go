package tidemark

import (
	"encoding/json"
	"fmt"
	"math/big"
	"strconv"
	"strings"
)

// AggFunc is what one aggregate computes over a window's rows.
type AggFunc uint8

// Aggregate functions (--agg). AggCount is the row count every window has
// (the count column); the others read one field.
const (
	AggCount    AggFunc = iota // count: rows
	AggSum                     // sum(f): compensated sum of f's numbers
	AggMin                     // min(f)
	AggMax                     // max(f)
	AggAvg                     // avg(f): sum(f) / the rows where f is a number
	AggQuantile                // pNN(f): the NN-th percentile, estimated live, nearest rank when exact
	AggDistinct                // count_distinct(f): distinct non-null values of f
)

var aggNames = [...]string{AggCount: "count", AggSum: "sum", AggMin: "min", AggMax: "max", AggAvg: "avg", AggQuantile: "p", AggDistinct: "count_distinct"}

// AggSpec is one aggregate of a lake's list: a function over a field.
//
// Spelling (--agg): count, sum(f), min(f), max(f), avg(f), pNN(f) with NN
// a percentile from 0 to 100, fractions allowed (p99.9), and
// count_distinct(f). f is a field spec as --key takes it (ParseField):
// a nested path (request.latency_ms), and name= to name it otherwise in
// the column. Function names are case-insensitive.
type AggSpec struct {
	Func  AggFunc
	Field Field // zero for count
	// Pct is the percentile of AggQuantile, 0..100, in its canonical
	// decimal text ("95", "99.9"), which names the column.
	Pct string
}

// Quantile returns AggQuantile's quantile, 0..1.
func (a AggSpec) Quantile() float64 {
	p, _ := strconv.ParseFloat(a.Pct, 64)
	return p / 100
}

// QuantileIndex is the 0-based index of AggQuantile's value among n sorted
// values as DuckDB's quantile_disc (and Spark's percentile_disc) picks it:
// the nearest rank, max(1, ⌈n·q⌉) − 1, with q the exact decimal Pct/100, in
// integers (a float64 n·q lands one rank off for some n).
func (a AggSpec) QuantileIndex(n int) int {
	if n <= 0 {
		return 0
	}
	q, ok := new(big.Rat).SetString(a.Pct)
	if !ok {
		return 0
	}
	num := new(big.Int).Mul(q.Num(), big.NewInt(int64(n)))
	den := new(big.Int).Mul(q.Denom(), big.NewInt(100))
	rank, rem := new(big.Int).QuoRem(num, den, new(big.Int))
	if rem.Sign() > 0 {
		rank.Add(rank, big.NewInt(1))
	}
	return min(max(1, int(rank.Int64())), n) - 1
}

// ParseAgg parses one --agg spelling.
func ParseAgg(s string) (AggSpec, error) {
	t := strings.TrimSpace(s)
	open := strings.IndexByte(t, '(')
	if open < 0 {
		if strings.EqualFold(t, "count") {
			return AggSpec{Func: AggCount}, nil
		}
		return AggSpec{}, fmt.Errorf("--agg %q: want count, sum(f), min(f), max(f), avg(f), pNN(f) (p95, p99.9) or count_distinct(f)", s)
	}
	if !strings.HasSuffix(t, ")") {
		return AggSpec{}, fmt.Errorf("--agg %q: missing ')' at the end", s)
	}
	name, arg := strings.ToLower(strings.TrimSpace(t[:open])), strings.TrimSpace(t[open+1:len(t)-1])
	var a AggSpec
	switch name {
	case "sum":
		a.Func = AggSum
	case "min":
		a.Func = AggMin
	case "max":
		a.Func = AggMax
	case "avg":
		a.Func = AggAvg
	case "count_distinct":
		a.Func = AggDistinct
	case "count":
		return AggSpec{}, fmt.Errorf("--agg %q: count takes no field (it counts rows, the count column); for the rows of one field use count_distinct(f) or avg(f)'s denominator, sum(f)/avg(f)", s)
	default:
		pct, ok := strings.CutPrefix(name, "p")
		if !ok {
			return AggSpec{}, fmt.Errorf("--agg %q: unknown function %q; want sum, min, max, avg, pNN (p95, p99.9) or count_distinct", s, name)
		}
		canon, err := canonicalPct(pct)
		if err != nil {
			return AggSpec{}, fmt.Errorf("--agg %q: %w", s, err)
		}
		a.Func, a.Pct = AggQuantile, canon
	}
	if arg == "" {
		return AggSpec{}, fmt.Errorf("--agg %q: %s needs a field: %s(latency_ms)", s, name, name)
	}
	f, err := ParseField(arg)
	if err != nil {
		return AggSpec{}, fmt.Errorf("--agg %q: %w", s, err)
	}
	a.Field = f
	return a, nil
}

// canonicalPct checks a percentile's text (digits, an optional fraction)
// and returns it canonical: no leading zeros, no trailing fraction zeros.
func canonicalPct(s string) (string, error) {
	if s == "" {
		return "", fmt.Errorf("a percentile needs its number: p95, p99.9")
	}
	for i := 0; i < len(s); i++ {
		if (s[i] < '0' || s[i] > '9') && s[i] != '.' {
			return "", fmt.Errorf("percentile %q is not a number from 0 to 100 (p95, p99.9)", s)
		}
	}
	p, err := strconv.ParseFloat(s, 64)
	if err != nil || strings.Count(s, ".") > 1 || s[0] == '.' || s[len(s)-1] == '.' {
		return "", fmt.Errorf("percentile %q is not a number from 0 to 100 (p95, p99.9)", s)
	}
	if p > 100 {
		return "", fmt.Errorf("percentile %s is above 100", s)
	}
	return strconv.FormatFloat(p, 'f', -1, 64), nil
}

// String renders the spec as ParseAgg reads it back, canonical: the same
// aggregate always renders the same.
func (a AggSpec) String() string {
	switch a.Func {
	case AggCount:
		return "count"
	case AggQuantile:
		return "p" + a.Pct + "(" + a.Field.String() + ")"
	}
	return aggNames[a.Func] + "(" + a.Field.String() + ")"
}

// Column returns the window_results column of the aggregate: the
// function, an underscore and the field's name (avg_latency_ms,
// p99_9_latency_ms, count_distinct_user); count is the count column.
func (a AggSpec) Column() string {
	switch a.Func {
	case AggCount:
		return "count"
	case AggQuantile:
		return "p" + strings.ReplaceAll(a.Pct, ".", "_") + "_" + a.Field.Name
	}
	return aggNames[a.Func] + "_" + a.Field.Name
}

// Integer reports whether the aggregate's column is BIGINT (counts)
// rather than DOUBLE.
func (a AggSpec) Integer() bool { return a.Func == AggCount || a.Func == AggDistinct }

// Text reports whether the aggregate reads its field as text (distinct
// values) rather than as a number.
func (a AggSpec) Text() bool { return a.Func == AggDistinct }

// AggInput is one field the aggregates read, as a number or as text:
// what the decoder extracts from each line into Record.Fields.
type AggInput struct {
	Field Field
	// Text: the field's canonical text (strings as they are, numbers as
	// key parts render them, true/false; null is absent), for distinct
	// counts. Otherwise a number: a value that is not a number (nor null)
	// quarantines the line as bad_value, as --value does.
	Text bool
}

// String names the input in messages: the field spec, and "as text" for
// text inputs.
func (in AggInput) String() string {
	if in.Text {
		return in.Field.String() + " (as text)"
	}
	return in.Field.String()
}

// AggValue is one AggInput's value on one record. Present is false where
// the field is absent or null; then Num and Text are zero.
type AggValue struct {
	Num     float64
	Text    string
	Present bool
}

// AggList is a lake's aggregate list: the --agg specs in order, and the
// inputs they read. The zero AggList (no --agg) asks for nothing beyond
// count (and --value's sum, min and max), and its lakes keep the schema
// they had before --agg.
type AggList struct {
	Specs []AggSpec
	// Inputs are the distinct (field path, text) pairs the specs read, in
	// first-use order: Record.Fields holds one value per input.
	Inputs []AggInput
	// specInput is each spec's index in Inputs (-1 for count).
	specInput []int
	// numeric[i] is Inputs[i]'s index among the numeric inputs (the
	// state's Moments), sketch[i] among the sketched ones (Sketches),
	// -1 where none; distinct[i] among the text inputs (Distinct).
	numeric, sketch, distinct    []int
	nNumeric, nSketch, nDistinct int
}

// ParseAggs parses --agg spellings into a list. count is dropped (every
// window has its count column); an aggregate given twice and two that
// make one column (ignoring case, as Spark and DuckDB match names) are
// refused, saying how to tell them apart.
func ParseAggs(specs []string) (AggList, error) {
	var l AggList
	seen := map[string]string{}
	for _, s := range specs {
		a, err := ParseAgg(s)
		if err != nil {
			return AggList{}, err
		}
		if a.Func == AggCount {
			continue
		}
		col := strings.ToLower(a.Column())
		if prev, ok := seen[col]; ok {
			if prev == a.String() {
				return AggList{}, fmt.Errorf("--agg %q given twice", s)
			}
			return AggList{}, fmt.Errorf("--agg %q and --agg %q both make the column %q; name one field: --agg '%s'", prev, a.String(), a.Column(), renamed(a))
		}
		seen[col] = a.String()
		l.Specs = append(l.Specs, a)
	}
	l.index()
	return l, nil
}

// renamed spells a with its field named after its whole path.
func renamed(a AggSpec) string {
	b := a
	b.Field.Name = strings.Join(a.Field.Path, "_")
	if b.Field.Name == a.Field.Name {
		b.Field.Name += "2"
	}
	return b.String()
}

// index derives Inputs and the state layout from Specs.
func (l *AggList) index() {
	l.Inputs, l.specInput = nil, make([]int, len(l.Specs))
	l.numeric, l.sketch, l.distinct = nil, nil, nil
	l.nNumeric, l.nSketch, l.nDistinct = 0, 0, 0
	for i, a := range l.Specs {
		if a.Func == AggCount {
			l.specInput[i] = -1
			continue
		}
		in := AggInput{Field: a.Field, Text: a.Text()}
		j := -1
		for k, have := range l.Inputs {
			if have.Text == in.Text && samePath(have.Field.Path, in.Field.Path) {
				j = k
				break
			}
		}
		if j < 0 {
			j = len(l.Inputs)
			l.Inputs = append(l.Inputs, in)
			l.numeric, l.sketch, l.distinct = append(l.numeric, -1), append(l.sketch, -1), append(l.distinct, -1)
			if in.Text {
				l.distinct[j] = l.nDistinct
				l.nDistinct++
			} else {
				l.numeric[j] = l.nNumeric
				l.nNumeric++
			}
		}
		if a.Func == AggQuantile && l.sketch[j] < 0 {
			l.sketch[j] = l.nSketch
			l.nSketch++
		}
		l.specInput[i] = j
	}
}

func samePath(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// SpecInput returns the index in Inputs of the input Specs[i] reads.
func (l AggList) SpecInput(i int) int { return l.specInput[i] }

// Empty reports whether the list asks for nothing beyond count.
func (l AggList) Empty() bool { return len(l.Specs) == 0 }

// Strings returns the specs' canonical spellings, in order.
func (l AggList) Strings() []string {
	out := make([]string, len(l.Specs))
	for i, a := range l.Specs {
		out[i] = a.String()
	}
	return out
}

// Columns returns the specs' window_results columns, in order.
func (l AggList) Columns() []string {
	out := make([]string, len(l.Specs))
	for i, a := range l.Specs {
		out[i] = a.Column()
	}
	return out
}

// Equal reports whether two lists ask for the same aggregates in the same
// order (the same columns).
func (l AggList) Equal(o AggList) bool {
	if len(l.Specs) != len(o.Specs) {
		return false
	}
	for i := range l.Specs {
		if l.Specs[i].String() != o.Specs[i].String() {
			return false
		}
	}
	return true
}

// MarshalJSON renders the list as a JSON array of canonical spellings,
// how a lake remembers it.
func (l AggList) MarshalJSON() ([]byte, error) { return json.Marshal(l.Strings()) }

// UnmarshalJSON reads what MarshalJSON wrote.
func (l *AggList) UnmarshalJSON(b []byte) error {
	var specs []string
	if err := json.Unmarshal(b, &specs); err != nil {
		return fmt.Errorf("aggregate list: %w", err)
	}
	got, err := ParseAggs(specs)
	if err != nil {
		return fmt.Errorf("aggregate list: %w", err)
	}
	*l = got
	return nil
}

// Describe renders the list as the flags that ask for it
// ("--agg 'p95(latency_ms)' --agg ..."), for messages; "no --agg" when empty.
func (l AggList) Describe() string {
	if l.Empty() {
		return "no --agg"
	}
	parts := make([]string, len(l.Specs))
	for i, s := range l.Strings() {
		parts[i] = "--agg '" + s + "'"
	}
	return strings.Join(parts, " ")
}
