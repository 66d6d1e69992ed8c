package main

import (
	"fmt"
	"regexp"
	"strings"
)

// sparkToDuck turns a Spark SQL script (scripts/spark/reconcile.sql) into
// DuckDB statements, so its logic can be run here, where there is no
// Spark. It is mechanical and covers only the constructs that script uses:
//
//   - ${name} is replaced by vars[name], as spark-sql -d does; a name
//     without a value is an error (Spark would leave it and fail to parse);
//   - the script is split into statements at ';' outside quotes and
//     comments; -- comments go;
//   - SET spark.* and RESET spark.* statements (session confs: time zone,
//     Parquet timestamp type, Delta's txn) are dropped: DuckDB runs in UTC
//     and writes no Delta table; the caller checks they are there;
//   - CACHE TABLE x AS q becomes CREATE OR REPLACE TEMP TABLE x AS q;
//   - delta.`<path>/<table>` becomes the DuckDB table <table> (the caller
//     loads the lake's tables into DuckDB tables of those names);
//   - `ident` becomes "ident" (a doubled backquote is one backquote);
//   - a <=> b becomes a IS NOT DISTINCT FROM b (null-safe equality);
//   - functions: unix_micros -> epoch_us, timestamp_micros ->
//     make_timestamp, raise_error -> error, explode -> unnest, sequence ->
//     generate_series (both bounds inclusive in both).
//
// Everything else (CAST(x AS STRING), count_if, lpad, hour, concat,
// greatest, uuid(), current_timestamp, MERGE INTO ... WHEN [NOT] MATCHED,
// % on integers, explode in a select list) means the same in both engines.
func sparkToDuck(script string, vars map[string]string) ([]string, error) {
	sub, err := substituteVars(script, vars)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, st := range splitStatements(sub) {
		if sessionConf.MatchString(st) {
			continue
		}
		out = append(out, translateStatement(st))
	}
	return out, nil
}

var (
	varRef      = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)\}`)
	sessionConf = regexp.MustCompile(`(?is)^\s*(SET|RESET)\s+spark\.`)
	cacheTable  = regexp.MustCompile(`(?is)^\s*CACHE\s+TABLE\s+`)
	sparkFuncs  = map[string]string{
		"unix_micros":      "epoch_us",
		"timestamp_micros": "make_timestamp",
		"raise_error":      "error",
		"explode":          "unnest",
		"sequence":         "generate_series",
	}
	funcCall = regexp.MustCompile(`(?i)\b(unix_micros|timestamp_micros|raise_error|explode|sequence)\s*\(`)
	deltaRef = regexp.MustCompile(`(?i)\bdelta\.$`)
)

// substituteVars replaces every ${name} by vars[name].
func substituteVars(s string, vars map[string]string) (string, error) {
	var missing []string
	out := varRef.ReplaceAllStringFunc(s, func(m string) string {
		name := varRef.FindStringSubmatch(m)[1]
		v, ok := vars[name]
		if !ok {
			missing = append(missing, name)
			return m
		}
		return v
	})
	if len(missing) > 0 {
		return "", fmt.Errorf("spark sql: no value for %s", strings.Join(missing, ", "))
	}
	return out, nil
}

// splitStatements splits at ';' outside '...' strings, `...` identifiers
// and -- comments, dropping the comments and empty statements.
func splitStatements(s string) []string {
	var out []string
	var cur strings.Builder
	flush := func() {
		if st := strings.TrimSpace(cur.String()); st != "" {
			out = append(out, st)
		}
		cur.Reset()
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '-' && i+1 < len(s) && s[i+1] == '-':
			for i < len(s) && s[i] != '\n' {
				i++
			}
			cur.WriteByte('\n')
		case c == '\'' || c == '`':
			j := closingQuote(s, i)
			cur.WriteString(s[i:j])
			i = j - 1
		case c == ';':
			flush()
		default:
			cur.WriteByte(c)
		}
	}
	flush()
	return out
}

// closingQuote returns the index just past the quoted token that starts at
// s[i] (a doubled quote stays inside it), or len(s) when it is unclosed.
func closingQuote(s string, i int) int {
	q := s[i]
	for j := i + 1; j < len(s); j++ {
		if s[j] != q {
			continue
		}
		if j+1 < len(s) && s[j+1] == q {
			j++
			continue
		}
		return j + 1
	}
	return len(s)
}

// translateStatement rewrites one statement (see sparkToDuck); string
// literals are left as they are.
func translateStatement(st string) string {
	st = cacheTable.ReplaceAllString(st, "CREATE OR REPLACE TEMP TABLE ")
	var b strings.Builder
	code := func(seg string) {
		seg = strings.ReplaceAll(seg, "<=>", " IS NOT DISTINCT FROM ")
		seg = funcCall.ReplaceAllStringFunc(seg, func(m string) string {
			name := strings.TrimSpace(strings.TrimSuffix(m, "("))
			return sparkFuncs[strings.ToLower(name)] + "("
		})
		b.WriteString(seg)
	}
	start := 0
	for i := 0; i < len(st); i++ {
		c := st[i]
		if c != '\'' && c != '`' {
			continue
		}
		j := closingQuote(st, i)
		seg := st[start:i]
		tok := st[i:j]
		switch {
		case c == '\'':
			code(seg)
			b.WriteString(tok)
		case deltaRef.MatchString(seg):
			// delta.`path/table`: the DuckDB table named like the last
			// path element.
			code(deltaRef.ReplaceAllString(seg, ""))
			path := strings.TrimSuffix(unquoteBack(tok), "/")
			b.WriteString(duckIdent(path[strings.LastIndex(path, "/")+1:]))
		default:
			code(seg)
			b.WriteString(duckIdent(unquoteBack(tok)))
		}
		start, i = j, j-1
	}
	code(st[start:])
	return strings.TrimSpace(b.String())
}

// unquoteBack returns the name a `...` token quotes.
func unquoteBack(tok string) string {
	tok = strings.TrimPrefix(tok, "`")
	tok = strings.TrimSuffix(tok, "`")
	return strings.ReplaceAll(tok, "``", "`")
}

// duckIdent quotes a name as DuckDB quotes identifiers.
func duckIdent(s string) string { return `"` + strings.ReplaceAll(s, `"`, `""`) + `"` }
