package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// These tests run the real tidemark binary on NDJSON and compare what it
// committed (window_results, read through the Delta log replay of
// deltalog.go) with DuckDB's GROUP BY over the same lines (issue 30).

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

// tidemarkBinary builds cmd/tidemark of the enclosing module once.
func tidemarkBinary(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("full tier: builds and runs the tidemark binary")
	}
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "tidemark-bin-")
		if err != nil {
			buildErr = err
			return
		}
		binPath = filepath.Join(dir, "tidemark")
		cmd := exec.Command("go", "build", "-o", binPath, "./cmd/tidemark")
		cmd.Dir = "../.."
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

func runTidemark(t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.Command(tidemarkBinary(t), args...)
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("tidemark %s: %v\n%s", strings.Join(args, " "), err, errb.String())
	}
	return out.String()
}

// shape is one random log shape: the paths of the time, key and value
// fields, and the kind of values each key holds (keyKinds; nil = text).
type shape struct {
	time, value []string
	keys        [][]string
	kinds       []keyKind
}

// keyKind is the JSON type a key's values have, and the column type
// tidemark infers from them (docs/log-shapes.md, "Typed keys").
type keyKind struct {
	name   string
	vals   []any  // the values lines draw from ("absent": no field); vals[0] is the first line's
	column string // the DuckDB type of the key column in window_results
	cast   string // the DuckDB type the JSON value is read as, "" = text
}

var keyKinds = []keyKind{
	{"text", []any{"a", "b", "500", nil, "absent"}, "VARCHAR", ""},
	{"long", []any{500, 1, -3, 404, nil, "absent"}, "BIGINT", "BIGINT"},
	{"double", []any{0.25, 2.5, -1, 3, nil, "absent"}, "DOUBLE", "DOUBLE"}, // the first line has a fraction: inferred DOUBLE
	{"boolean", []any{true, false, nil, "absent"}, "BOOLEAN", "BOOLEAN"},
	{"mixed", []any{"a", 1, 2.5, true, nil, "absent"}, "VARCHAR", ""},
}

// kind returns the kind of key i.
func (s shape) kind(i int) keyKind {
	if i < len(s.kinds) {
		return s.kinds[i]
	}
	return keyKinds[0]
}

func (s shape) flags() []string {
	f := []string{"--time-field", strings.Join(s.time, "."), "--value", strings.Join(s.value, ".")}
	for _, k := range s.keys {
		f = append(f, "--key", strings.Join(k, "."))
	}
	return f
}

// windowsVsDuck compares window_results of lake with DuckDB's GROUP BY of
// the NDJSON file in, for windows of size and the shape; it returns the
// rows compared.
func windowsVsDuck(t *testing.T, db *sql.DB, lake, in string, size time.Duration, sh shape) int {
	t.Helper()
	ctx := context.Background()
	snap, err := replay(ctx, db, filepath.Join(lake, "window_results"))
	if err != nil {
		t.Fatal(err)
	}
	var cols map[string]string
	if c := snap.Configuration["tidemark.columns"]; c != "" {
		if err := json.Unmarshal([]byte(c), &cols); err != nil {
			t.Fatal(err)
		}
	}
	col := func(n string) string {
		if p, ok := cols[n]; ok {
			return p
		}
		return n
	}
	var files []string
	for _, a := range snap.Files {
		p, err := a.localPath(snap.Root)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, p)
	}
	us := size.Microseconds()
	// Keys are compared as their types: each key column of window_results
	// must have its kind's type, and DuckDB reads the JSON values as that
	// type, so equal rows hold equal typed values (500 is not "500").
	var keyCols, keyExprs []string
	for i, k := range sh.keys {
		keyCols = append(keyCols, quoteIdent(k[len(k)-1]))
		e := fmt.Sprintf("json_extract_string(json, %s)", sqlString(jsonPath(k)))
		if c := sh.kind(i).cast; c != "" {
			e = fmt.Sprintf("CAST(%s AS %s)", e, c)
		}
		keyExprs = append(keyExprs, e)
	}
	types := map[string]string{}
	for _, r := range queryRows(t, db, fmt.Sprintf(`SELECT column_name, column_type FROM (DESCRIBE SELECT * FROM read_parquet(%s))`, sqlList(files))) {
		name, typ, _ := strings.Cut(r, "|")
		types[name] = typ
	}
	for i, k := range sh.keys {
		if got, want := types[k[len(k)-1]], sh.kind(i).column; got != want {
			t.Errorf("key %s (%s values): window_results column is %s, want %s", strings.Join(k, "."), sh.kind(i).name, got, want)
		}
	}
	got := queryRows(t, db, fmt.Sprintf(`SELECT (epoch_us(%s) // %d)::VARCHAR, %s, %s::VARCHAR, %s::VARCHAR, %s::VARCHAR, %s::VARCHAR FROM read_parquet(%s)`,
		quoteIdent(col("window_start")), us, strings.Join(keyCols, ", "), quoteIdent(col("count")), quoteIdent(col("sum")), quoteIdent(col("min")), quoteIdent(col("max")), sqlList(files)))
	want := queryRows(t, db, fmt.Sprintf(`WITH e AS (
		SELECT CAST(json_extract_string(json, %s) AS TIMESTAMPTZ) AS ts, %s, TRY_CAST(json_extract_string(json, %s) AS DOUBLE) AS v
		FROM read_ndjson_objects(%s))
		SELECT (floor(epoch_us(ts) / %d)::BIGINT)::VARCHAR, %s, count(*)::VARCHAR, sum(v)::VARCHAR, min(v)::VARCHAR, max(v)::VARCHAR FROM e GROUP BY ALL`,
		sqlString(jsonPath(sh.time)), aliased(keyExprs), sqlString(jsonPath(sh.value)), sqlString(in), us, strings.Join(keyAliases(len(sh.keys)), ", ")))
	if !slices.Equal(got, want) {
		t.Errorf("window_results (%d rows) differ from DuckDB's GROUP BY (%d rows):\n%s", len(got), len(want), diffRows(got, want))
	}
	return len(got)
}

func keyAliases(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("k%d", i)
	}
	return out
}

func aliased(exprs []string) string {
	out := make([]string, len(exprs))
	for i, e := range exprs {
		out[i] = fmt.Sprintf("%s AS k%d", e, i)
	}
	return strings.Join(out, ", ")
}

// queryRows returns the rows as sorted "|"-joined text, NULL as ∅.
func queryRows(t *testing.T, db *sql.DB, q string) []string {
	t.Helper()
	rows, err := db.Query(q)
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	defer rows.Close()
	cts, _ := rows.ColumnTypes()
	var out []string
	for rows.Next() {
		vals := make([]sql.NullString, len(cts))
		ptrs := make([]any, len(vals))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			t.Fatal(err)
		}
		cells := make([]string, len(vals))
		for i, v := range vals {
			cells[i] = "∅"
			if v.Valid {
				cells[i] = v.String
			}
		}
		out = append(out, strings.Join(cells, "|"))
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	slices.Sort(out)
	return out
}

func diffRows(got, want []string) string {
	var b strings.Builder
	for _, g := range got {
		if !slices.Contains(want, g) {
			fmt.Fprintf(&b, "  only in window_results: %s\n", g)
		}
	}
	for _, w := range want {
		if !slices.Contains(got, w) {
			fmt.Fprintf(&b, "  only in DuckDB:         %s\n", w)
		}
	}
	return b.String()
}

// ownNames is every column name tidemark uses in its tables (partition
// columns included), and names users have.
var ownNames = []string{
	"event_time", "arrival_time", "ingest_time", "value", "status", "disorder_us", "source", "file", "offset", "batch_id", "payload",
	"event_date", "event_hour", "reason", "error", "ingest_date", "window_start", "window_end", "count", "sum", "min", "max", "final",
	"origin", "revision", "computed_at", "watermark", "window_date", "tidemark_shard", "run_id", "old_count", "new_count", "late_rows",
	"corrected_at", "shard_partial", "Status", "COUNT", "path", "user", "latency_ms",
}

// setIn sets a nested field of obj.
func setIn(obj map[string]any, path []string, v any) {
	for _, p := range path[:len(path)-1] {
		next, ok := obj[p].(map[string]any)
		if !ok {
			next = map[string]any{}
			obj[p] = next
		}
		obj = next
	}
	obj[path[len(path)-1]] = v
}

// TestWindowsMatchDuckDBGroupBy is issue 30's property: random field
// names drawn from every column name tidemark uses, as time, keys and
// value, flat and nested, with number, string, boolean and null key values
// (and missing fields), each key's values of one kind (text, integers,
// numbers with a fraction, booleans, or a mix): after stream --drain and
// reconcile, window_results equals DuckDB's GROUP BY over the same NDJSON,
// types included (each key column has its kind's type, compared with the
// JSON values read as that type).
func TestWindowsMatchDuckDBGroupBy(t *testing.T) {
	tidemarkBinary(t)
	db, err := openDB(1)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for it := range 6 {
		rng := rand.New(rand.NewPCG(uint64(it), 30))
		names := slices.Clone(ownNames)
		rng.Shuffle(len(names), func(i, j int) { names[i], names[j] = names[j], names[i] })
		next := func() string { n := names[0]; names = names[1:]; return n }
		path := func() []string {
			if rng.IntN(2) == 0 {
				return []string{next()}
			}
			return []string{next(), next()}
		}
		sh := shape{time: path(), value: path()}
		seen := map[string]bool{}
		for range 1 + rng.IntN(3) {
			k := path()
			if low := strings.ToLower(k[len(k)-1]); !seen[low] && !slices.Equal(k[:1], sh.time[:1]) && !slices.Equal(k[:1], sh.value[:1]) {
				seen[low] = true
				sh.keys = append(sh.keys, k)
			}
		}
		if len(sh.keys) == 0 {
			sh.keys = [][]string{{"k_" + next()}}
		}
		for i := range sh.keys {
			// The first key takes each kind in turn over the runs, the
			// others one at random.
			sh.kinds = append(sh.kinds, keyKinds[(it+i*rng.IntN(len(keyKinds)))%len(keyKinds)])
		}
		t.Run(fmt.Sprint(it, sh.flags()), func(t *testing.T) {
			dir := t.TempDir()
			in := filepath.Join(dir, "in", "events.ndjson")
			os.MkdirAll(filepath.Dir(in), 0o755)
			var lines []byte
			base := time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC)
			for i := range 300 {
				obj := map[string]any{}
				setIn(obj, sh.time, base.Add(time.Duration(i*2+rng.IntN(40))*time.Second).Format(time.RFC3339))
				for j, k := range sh.keys {
					vals := sh.kind(j).vals
					v := vals[0]
					if i > 0 {
						v = vals[rng.IntN(len(vals))]
					}
					if v != "absent" {
						setIn(obj, k, v)
					}
				}
				switch rng.IntN(4) {
				case 0:
				case 1:
					setIn(obj, sh.value, nil)
				default:
					setIn(obj, sh.value, float64(rng.IntN(100))/4)
				}
				b, err := json.Marshal(obj)
				if err != nil {
					t.Fatal(err)
				}
				lines = append(append(lines, b...), '\n')
			}
			if err := os.WriteFile(in, lines, 0o644); err != nil {
				t.Fatal(err)
			}
			lake := filepath.Join(dir, "lake")
			args := append([]string{"stream", "--source", filepath.Dir(in), "--lake", lake, "--once", "--drain", "--window", "1m", "--max-batch-rows", "37"}, sh.flags()...)
			runTidemark(t, args...)
			runTidemark(t, "reconcile", "--lake", lake)
			if n := windowsVsDuck(t, db, lake, in, time.Minute, sh); n < 10 {
				t.Errorf("only %d windows compared", n)
			}
		})
	}
}

// TestPre1970MatchesDuckDB: events before, at and after the epoch, late
// rows among them, through stream, reconcile, recompute and lateness, all
// equal to DuckDB over the same lines (issue 30: a zero time bound meant
// "no bound" in the raw scans, so recompute counted rows twice and
// reconcile never found late rows before 1970).
func TestPre1970MatchesDuckDB(t *testing.T) {
	tidemarkBinary(t)
	db, err := openDB(1)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, base := range []time.Time{time.Unix(-600, 0).UTC(), time.Date(1960, 1, 1, 0, 0, 0, 0, time.UTC)} {
		t.Run(base.Format(time.RFC3339), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(base.Unix()), 1970))
			dir := t.TempDir()
			in := filepath.Join(dir, "in", "events.ndjson")
			os.MkdirAll(filepath.Dir(in), 0o755)
			var lines []byte
			for i := range 400 {
				ts := base.Add(time.Duration(i*3-rng.IntN(120)) * time.Second)
				// Arrival times near the events: the lateness report leaves
				// rows that arrived decades late out as bad timestamps.
				arr := base.Add(time.Duration(i*3) * time.Second)
				lines = fmt.Appendf(lines, `{"ts":%q,"arr":%q,"page":"/p%d","ms":%d}`+"\n", ts.Format(time.RFC3339), arr.Format(time.RFC3339), rng.IntN(3), rng.IntN(50))
			}
			lines = fmt.Appendf(lines, `{"ts":"1970-01-01T00:00:00Z","arr":"1970-01-01T00:00:00Z","page":"/p0","ms":1}`+"\n")
			if err := os.WriteFile(in, lines, 0o644); err != nil {
				t.Fatal(err)
			}
			lake := filepath.Join(dir, "lake")
			sh := shape{time: []string{"ts"}, value: []string{"ms"}, keys: [][]string{{"page"}}}
			args := append([]string{"stream", "--source", filepath.Dir(in), "--lake", lake, "--once", "--drain", "--window", "1m", "--lateness", "20s", "--max-batch-rows", "25", "--arrival-field", "arr"}, sh.flags()...)
			runTidemark(t, args...)
			rep := runTidemark(t, "reconcile", "--lake", lake, "--format", "json")
			if !strings.Contains(rep, `"late_rows"`) && !strings.Contains(rep, "late") {
				t.Logf("reconcile: %s", rep)
			}
			windowsVsDuck(t, db, lake, in, time.Minute, sh)

			// recompute over raw_events equals DuckDB's GROUP BY.
			out := runTidemark(t, "recompute", "--lake", lake, "--format", "csv")
			var got []string
			for _, l := range strings.Split(strings.TrimSpace(out), "\n")[1:] {
				f := strings.Split(l, ",")
				got = append(got, strings.Join(f[:4], "|"))
			}
			slices.Sort(got)
			want := queryRows(t, db, fmt.Sprintf(`SELECT strftime(time_bucket(INTERVAL 1 minute, ts), '%%Y-%%m-%%dT%%H:%%M:%%SZ'),
				strftime(time_bucket(INTERVAL 1 minute, ts) + INTERVAL 1 minute, '%%Y-%%m-%%dT%%H:%%M:%%SZ'), page, count(*)::VARCHAR
				FROM (SELECT CAST(json_extract_string(json, '$.ts') AS TIMESTAMPTZ) AS ts, json_extract_string(json, '$.page') AS page FROM read_ndjson_objects(%s)) GROUP BY ALL`, sqlString(in)))
			if !slices.Equal(got, want) {
				t.Errorf("recompute (%d rows) differs from DuckDB (%d rows):\n%s", len(got), len(want), diffRows(got, want))
			}

			// lateness reads every row, and a range ending at the epoch is a bound.
			for _, tc := range []struct {
				flags []string
				where string
			}{
				{nil, "true"},
				{[]string{"--to", "1970-01-01T00:00:00Z"}, "ts < TIMESTAMPTZ '1970-01-01 00:00:00+00'"},
				{[]string{"--from", "1970-01-01T00:00:00Z"}, "ts >= TIMESTAMPTZ '1970-01-01 00:00:00+00'"},
			} {
				out := runTidemark(t, append([]string{"lateness", "--lake", lake, "--format", "json"}, tc.flags...)...)
				var r struct{ Groups []struct{ Rows int64 } }
				if err := json.Unmarshal([]byte(out), &r); err != nil {
					t.Fatalf("lateness %v: %v\n%s", tc.flags, err, out)
				}
				var rows int64
				for _, g := range r.Groups {
					rows += g.Rows
				}
				w := queryRows(t, db, fmt.Sprintf(`SELECT count(*) FROM (SELECT CAST(json_extract_string(json, '$.ts') AS TIMESTAMPTZ) AS ts FROM read_ndjson_objects(%s)) WHERE %s`, sqlString(in), tc.where))
				if fmt.Sprint(rows) != w[0] {
					t.Errorf("lateness %v: %d rows, DuckDB counts %s", tc.flags, rows, w[0])
				}
			}
		})
	}
}
