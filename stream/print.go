package stream

import (
	"bufio"
	"encoding/json"
	"io"
	"math"
	"strconv"

	"tidemark"
	"tidemark/lake"
)

// print writes the batch's emitted windows on --print. On a lake other
// streams write too, each line ends with "shard_partial":true: the values
// are this stream's partial, window_results holds the merge.
func (r *runner) print(batchID int64, results []tidemark.Result) error {
	cfg := r.lake.Config()
	return printResults(r.cfg.Print, cfg.KeyNames(), cfg.KeyType, cfg.Column, r.cfg.Decoder.ValueField != "", cfg.Aggs, r.shardsOf(batchID) != nil, results)
}

// printResults writes emitted windows as JSON lines (SPEC §3):
// window_start, window_end, one property per key, count, sum/min/max (with a
// value field; null when no row had a value), the --agg aggregates under
// their columns' names (estimates: window_results' exact is false), final,
// and with partial "shard_partial":true. The properties other than the keys are named as
// window_results' columns are (col: a key named count moves the count to
// _tm_count), so a line never names one property twice.
func printResults(w io.Writer, keys []string, keyType func(int) lake.KeyType, col func(string) string, withValue bool, aggs tidemark.AggList, partial bool, results []tidemark.Result) error {
	bw := bufio.NewWriter(w)
	buf := make([]byte, 0, 256)
	name := func(buf []byte, logical string) []byte {
		buf = strconv.AppendQuote(buf, col(logical))
		return append(buf, ':')
	}
	for _, res := range results {
		buf = append(buf[:0], '{')
		buf = name(buf, "window_start")
		buf = append(buf, '"')
		buf = append(buf, tidemark.FormatTime(res.Window.Start)...)
		buf = append(buf, '"', ',')
		buf = name(buf, "window_end")
		buf = append(buf, '"')
		buf = append(buf, tidemark.FormatTime(res.Window.End)...)
		buf = append(buf, '"')
		parts := res.Key.Parts()
		for i, k := range keys {
			buf = append(buf, ',')
			buf = strconv.AppendQuote(buf, k)
			buf = append(buf, ':')
			if i >= len(parts) || parts[i].Null {
				buf = append(buf, "null"...)
			} else if keyType(i) != lake.KeyString {
				buf = append(buf, parts[i].Value...) // a number or boolean column: canonical JSON
			} else {
				kb, _ := json.Marshal(parts[i].Value)
				buf = append(buf, kb...)
			}
		}
		buf = name(append(buf, ','), "count")
		buf = strconv.AppendInt(buf, res.Agg.Count, 10)
		if withValue {
			for _, f := range []struct {
				name string
				v    float64
			}{{"sum", res.Agg.Total()}, {"min", res.Agg.Min}, {"max", res.Agg.Max}} {
				buf = name(append(buf, ','), f.name)
				if res.Agg.Values == 0 {
					buf = append(buf, "null"...)
				} else {
					buf = appendFloat(buf, f.v)
				}
			}
		}
		if !aggs.Empty() {
			buf = appendAggs(buf, aggs, res.State)
		}
		buf = name(append(buf, ','), "final")
		buf = strconv.AppendBool(buf, res.Final)
		if partial {
			buf = append(name(append(buf, ','), "shard_partial"), "true"...)
		}
		buf = append(buf, "}\n"...)
		if _, err := bw.Write(buf); err != nil {
			return err
		}
	}
	return bw.Flush()
}

// appendFloat writes a float as JSON: shortest round-trip form, and never
// NaN or Inf (not JSON), which become null.
func appendFloat(buf []byte, v float64) []byte {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return append(buf, "null"...)
	}
	return strconv.AppendFloat(buf, v, 'g', -1, 64)
}

// appendAggs writes the --agg aggregates of state as JSON properties, each
// named by its column: counts as integers, null over no values.
func appendAggs(buf []byte, aggs tidemark.AggList, state *tidemark.AggState) []byte {
	for i, v := range aggs.Values(state) {
		buf = append(buf, ',')
		buf = strconv.AppendQuote(buf, aggs.Specs[i].Column())
		buf = append(buf, ':')
		switch {
		case !v.Valid:
			buf = append(buf, "null"...)
		case aggs.Specs[i].Integer():
			buf = strconv.AppendInt(buf, int64(v.V), 10)
		default:
			buf = appendFloat(buf, v.V)
		}
	}
	return buf
}
