package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
)

// aggsResult is what aggs prints.
type aggsResult struct {
	Files   int     `json:"files"`
	Rows    int64   `json:"rows"`   // raw_events rows aggregated
	Groups  int64   `json:"groups"` // result rows (window x key)
	Seconds float64 `json:"seconds"`
	SQL     string  `json:"sql"`
}

// aggsCmd computes tidemark's --agg aggregates exactly from raw_events:
// what `tidemark reconcile` makes window_results hold. It reads the input
// columns raw_events keeps for them (as tidemark's exact layer does), or
// with -payload each field out of the raw line.
func aggsCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("aggs", flag.ContinueOnError)
	fs.SetOutput(stderr)
	lake := fs.String("lake", "", "lake directory (holding raw_events/)")
	window := fs.Duration("window", time.Minute, "tumbling window width")
	keys := fs.String("key", "page", "comma-separated key columns")
	aggs := fs.String("agg", "avg(value),p99(value),count_distinct(user_id)", "comma-separated tidemark --agg spellings (flat or dotted fields)")
	payload := fs.Bool("payload", false, "read the fields out of the payload (json_extract) instead of raw_events' input columns")
	threads := fs.Int("threads", 0, "DuckDB threads (0 = all cores)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *lake == "" || *window <= 0 {
		return fmt.Errorf("aggs: -lake and a positive -window are required")
	}
	specs := strings.Split(*aggs, ",")
	var exprs []string
	for _, a := range specs {
		a = strings.TrimSpace(a)
		var e string
		var err error
		if *payload {
			e, err = aggSQL(a, "decode(payload)")
		} else {
			e, err = aggColumnSQL(a, specs)
		}
		if err != nil {
			return fmt.Errorf("aggs: %w", err)
		}
		exprs = append(exprs, e)
	}
	db, err := openDB(*threads)
	if err != nil {
		return err
	}
	defer db.Close()
	began := time.Now()
	_, files, err := activeFiles(ctx, db, *lake, "raw_events")
	if err != nil {
		return fmt.Errorf("aggs: %w", err)
	}
	var kcols []string
	for _, k := range strings.Split(*keys, ",") {
		kcols = append(kcols, strconv.Quote(strings.TrimSpace(k)))
	}
	q := fmt.Sprintf(`SELECT time_bucket(to_microseconds(%d), event_time) AS w, %s, count(*) AS n, %s
FROM read_parquet(%s, hive_partitioning=true, union_by_name=true) GROUP BY ALL`,
		window.Microseconds(), strings.Join(kcols, ", "), strings.Join(exprs, ", "), sqlList(files))
	rows, err := db.QueryContext(ctx, q)
	if err != nil {
		return fmt.Errorf("aggs: %w", err)
	}
	defer rows.Close()
	cols, _ := rows.Columns()
	dest := make([]any, len(cols))
	vals := make([]any, len(cols))
	for i := range dest {
		dest[i] = &vals[i]
	}
	res := aggsResult{Files: len(files), SQL: q}
	nIdx := len(kcols) + 1
	for rows.Next() {
		if err := rows.Scan(dest...); err != nil {
			return fmt.Errorf("aggs: %w", err)
		}
		res.Groups++
		if n, ok := vals[nIdx].(int64); ok {
			res.Rows += n
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("aggs: %w", err)
	}
	res.Seconds = time.Since(began).Seconds()
	return printJSON(stdout, res)
}

// aggSQL translates one tidemark --agg spelling into the DuckDB aggregate
// that computes it exactly over JSON text in the column expression json:
// avg/sum/min/max of the field as DOUBLE, pNN as quantile_disc at NN/100
// written as a decimal literal (DuckDB then ranks in integers, as tidemark
// does), count_distinct as count(DISTINCT) of the field's text. A field
// is a dotted path (no name=, no backticks: the yardstick's inputs do not
// need them).
func aggSQL(spec, json string) (string, error) {
	open := strings.IndexByte(spec, '(')
	if open < 0 || !strings.HasSuffix(spec, ")") {
		return "", fmt.Errorf("aggregate %q: want f(field)", spec)
	}
	fn, field := strings.ToLower(spec[:open]), spec[open+1:len(spec)-1]
	path := jsonPath(strings.Split(field, "."))
	text := fmt.Sprintf("json_extract_string(%s, %s)", json, sqlString(path))
	num := fmt.Sprintf("TRY_CAST(%s AS DOUBLE)", text)
	switch fn {
	case "avg", "sum", "min", "max":
		return fmt.Sprintf("%s(%s)", fn, num), nil
	case "count_distinct":
		// JSON text: a string's value, a number's literal. tidemark's text
		// of a number is canonical (500.0 is "500"); the inputs the
		// yardstick compares give each field one spelling per value.
		return fmt.Sprintf("count(DISTINCT %s)", text), nil
	}
	pct, ok := strings.CutPrefix(fn, "p")
	if !ok {
		return "", fmt.Errorf("aggregate %q: unknown function %q", spec, fn)
	}
	lit, err := quantileLiteral(pct)
	if err != nil {
		return "", fmt.Errorf("aggregate %q: %w", spec, err)
	}
	return fmt.Sprintf("quantile_disc(%s, %s)", num, lit), nil
}

// aggColumnSQL translates one --agg spelling into the DuckDB aggregate
// over raw_events' input column of its field: named after the field (flat
// fields), with _text for a distinct count's when another aggregate of
// specs reads the same field as a number (tidemark's inputNames).
func aggColumnSQL(spec string, specs []string) (string, error) {
	open := strings.IndexByte(spec, '(')
	if open < 0 || !strings.HasSuffix(spec, ")") {
		return "", fmt.Errorf("aggregate %q: want f(field)", spec)
	}
	fn, field := strings.ToLower(spec[:open]), spec[open+1:len(spec)-1]
	col := quoteIdent(field)
	switch fn {
	case "avg", "sum", "min", "max":
		return fmt.Sprintf("%s(%s)", fn, col), nil
	case "count_distinct":
		for _, o := range specs {
			o = strings.TrimSpace(o)
			if i := strings.IndexByte(o, '('); i > 0 && !strings.EqualFold(o[:i], "count_distinct") && strings.EqualFold(strings.TrimSuffix(o[i+1:], ")"), field) {
				col = quoteIdent(field + "_text")
				break
			}
		}
		return fmt.Sprintf("count(DISTINCT %s)", col), nil
	}
	pct, ok := strings.CutPrefix(fn, "p")
	if !ok {
		return "", fmt.Errorf("aggregate %q: unknown function %q", spec, fn)
	}
	lit, err := quantileLiteral(pct)
	if err != nil {
		return "", fmt.Errorf("aggregate %q: %w", spec, err)
	}
	return fmt.Sprintf("quantile_disc(%s, %s)", col, lit), nil
}

// quantileLiteral turns a percentile's text (99.9) into the decimal
// literal of its quantile (0.999), without going through a float.
func quantileLiteral(pct string) (string, error) {
	whole, frac, _ := strings.Cut(pct, ".")
	if whole == "" || strings.Trim(whole+frac, "0123456789") != "" {
		return "", fmt.Errorf("percentile %q is not a number", pct)
	}
	for len(whole) < 3 {
		whole = "0" + whole
	}
	digits := whole[:len(whole)-2] + "." + whole[len(whole)-2:] + frac
	v, err := strconv.ParseFloat(digits, 64)
	if err != nil || v > 1 {
		return "", fmt.Errorf("percentile %q is not from 0 to 100", pct)
	}
	digits = strings.TrimLeft(digits, "0")
	if strings.HasPrefix(digits, ".") {
		digits = "0" + digits
	}
	return digits, nil
}

// jsonPath renders a field path as a DuckDB JSON path: $."a"."b".
func jsonPath(path []string) string {
	var b strings.Builder
	b.WriteString("$")
	for _, p := range path {
		b.WriteString(`."` + strings.ReplaceAll(p, `"`, `\"`) + `"`)
	}
	return b.String()
}

// quoteIdent quotes a SQL identifier.
func quoteIdent(s string) string { return `"` + strings.ReplaceAll(s, `"`, `""`) + `"` }
