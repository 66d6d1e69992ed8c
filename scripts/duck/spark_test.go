package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestSparkReconcileMatchesTidemark checks the logic of
// scripts/spark/reconcile.sql against `tidemark reconcile` (issue 33):
// lakes made by the tidemark binary (tumbling and sliding windows, typed
// keys, a key taking an own column's name, no value column, no key, two
// shards with different watermarks, late rows, days and hours crossed) are
// copied; one copy is reconciled by `tidemark reconcile --from --to`, the
// other's tables are loaded into DuckDB and the script, with the variables
// `tidemark tables --spark` prints, is run on them after the mechanical
// translation of sparkToDuck. Then window_results and reconcile_log must
// hold the same rows (but for computed_at, run_id and corrected_at, which
// are the run's own). Values are multiples of 1/4, so both engines' sums
// are exact and compared exactly. Spark itself is not run: there is none
// here.
func TestSparkReconcileMatchesTidemark(t *testing.T) {
	tidemarkBinary(t)
	base := time.Date(2026, 3, 1, 23, 10, 0, 0, time.UTC) // windows and hours cross midnight
	type shardInput struct {
		name    string
		minutes int // events over this many minutes from base
	}
	tests := []struct {
		name   string
		flags  []string // window, keys, value
		keys   func(rng *rand.Rand) map[string]any
		value  bool
		shards []shardInput
		// idle is tables/reconcile --shard-idle; "" is the default.
		idle string
		// from, to: the range, from base; zero: all of the lake.
		from, to time.Duration
	}{
		{
			name:  "tumbling typed keys",
			flags: []string{"--window", "1m", "--key", "page", "--key", "code", "--value", "v"},
			keys: func(rng *rand.Rand) map[string]any {
				m := map[string]any{"code": []int{200, 404, 500}[rng.IntN(3)]}
				if rng.IntN(6) > 0 {
					m["page"] = fmt.Sprintf("/p%d", rng.IntN(3))
				}
				return m
			},
			value:  true,
			shards: []shardInput{{"solo", 100}},
		},
		{
			name:  "sliding with keys named count and status",
			flags: []string{"--window", "3m", "--slide", "1m", "--key", "count", "--key", "status", "--value", "v"},
			keys: func(rng *rand.Rand) map[string]any {
				return map[string]any{"count": rng.IntN(3), "status": []string{"up", "down"}[rng.IntN(2)]}
			},
			value:  true,
			shards: []shardInput{{"solo", 100}},
		},
		{
			name:  "no value with a boolean key",
			flags: []string{"--window", "5m", "--key", "ok"},
			keys: func(rng *rand.Rand) map[string]any {
				return map[string]any{"ok": rng.IntN(2) == 0}
			},
			shards: []shardInput{{"solo", 100}},
		},
		{
			name:  "two shards with the lowest watermark",
			flags: []string{"--window", "1m", "--key", "page", "--value", "v"},
			keys: func(rng *rand.Rand) map[string]any {
				return map[string]any{"page": fmt.Sprintf("/p%d", rng.IntN(3))}
			},
			value:  true,
			shards: []shardInput{{"lagging", 45}, {"ahead", 100}},
		},
		{
			name:  "two shards with the lagging one idle",
			flags: []string{"--window", "1m", "--key", "page", "--value", "v"},
			keys: func(rng *rand.Rand) map[string]any {
				return map[string]any{"page": fmt.Sprintf("/p%d", rng.IntN(3))}
			},
			value:  true,
			shards: []shardInput{{"lagging", 45}, {"ahead", 100}},
			idle:   "1ms", // "ahead" commits well after "lagging": it is idle
		},
		{
			name:   "no keys",
			flags:  []string{"--window", "2m", "--value", "v"},
			keys:   func(*rand.Rand) map[string]any { return map[string]any{} },
			value:  true,
			shards: []shardInput{{"solo", 100}},
		},
		{
			name:  "sliding in a range inside the lake",
			flags: []string{"--window", "3m", "--slide", "1m", "--key", "page", "--value", "v"},
			keys: func(rng *rand.Rand) map[string]any {
				return map[string]any{"page": fmt.Sprintf("/p%d", rng.IntN(2))}
			},
			value:  true,
			shards: []shardInput{{"solo", 100}},
			from:   25*time.Minute + 30*time.Second,
			to:     65 * time.Minute,
		},
	}
	for ti, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(ti), 33))
			dir := t.TempDir()
			lake := filepath.Join(dir, "lake")
			line := func(ts time.Time, nullKeys bool) []byte {
				obj := tc.keys(rng)
				if nullKeys {
					clear(obj) // a key of its own: null
				}
				obj["event_time"] = ts.Format(time.RFC3339Nano)
				if tc.value && rng.IntN(5) > 0 {
					obj["v"] = float64(rng.IntN(400)) / 4
				}
				b, err := json.Marshal(obj)
				if err != nil {
					t.Fatal(err)
				}
				return append(b, '\n')
			}
			stream := func(sh shardInput, in string) {
				args := append([]string{"stream", "--name", sh.name, "--source", in, "--lake", lake, "--once",
					"--lateness", "30s", "--max-batch-rows", "60", "--progress", "/dev/null"}, tc.flags...)
				runTidemark(t, args...)
			}
			// Phase 1: each shard's events, in order but for a jitter of up
			// to 50 s (the stream marks some of them late).
			ins := make([]string, len(tc.shards))
			for i, sh := range tc.shards {
				ins[i] = filepath.Join(dir, "in-"+sh.name, "events.ndjson")
				os.MkdirAll(filepath.Dir(ins[i]), 0o755)
				var b []byte
				n := sh.minutes * 4
				for j := range n {
					ts := base.Add(time.Duration(j)*time.Duration(sh.minutes)*time.Minute/time.Duration(n) - time.Duration(rng.IntN(50000))*time.Millisecond)
					b = append(b, line(ts, false)...)
				}
				if err := os.WriteFile(ins[i], b, 0o644); err != nil {
					t.Fatal(err)
				}
				stream(sh, ins[i])
			}
			// Phase 2: late lines for the first shard (the last to write
			// when there are two: the lagging one stays behind), some of
			// them in windows nothing else reached (every key null).
			last := len(tc.shards) - 1
			f, err := os.OpenFile(ins[last], os.O_APPEND|os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			for range 40 {
				f.Write(line(base.Add(time.Duration(rng.IntN(40*60))*time.Second), rng.IntN(2) == 0))
			}
			for range 5 { // before every other event: windows of late rows only
				f.Write(line(base.Add(-10*time.Minute-time.Duration(rng.IntN(20*60))*time.Second), false))
			}
			f.Close()
			stream(tc.shards[last], ins[last])

			a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
			copyDir(t, lake, a)
			copyDir(t, lake, b)
			from, to := base.Add(-2*time.Hour), base.Add(4*time.Hour)
			if tc.to != 0 {
				// Inside the lake, across midnight, from unaligned.
				from, to = base.Add(tc.from), base.Add(tc.to)
			}
			idle := []string{}
			if tc.idle != "" {
				idle = []string{"--shard-idle", tc.idle}
			}
			rep := runTidemark(t, append([]string{"reconcile", "--lake", a, "--from", from.Format(time.RFC3339), "--to", to.Format(time.RFC3339), "--format", "json"}, idle...)...)
			var r struct {
				Corrected int   `json:"windows_corrected"`
				Inserted  int   `json:"windows_inserted"`
				Watermark int64 `json:"watermark_us"`
			}
			if err := json.Unmarshal([]byte(rep), &r); err != nil {
				t.Fatalf("reconcile report: %v\n%s", err, rep)
			}
			if r.Corrected == 0 || r.Inserted == 0 {
				t.Fatalf("tidemark reconcile corrected %d and inserted %d windows: the lake tests nothing\n%s", r.Corrected, r.Inserted, rep)
			}

			vars := sparkVars(t, b, idle...)
			if got := mustInt(t, vars["watermark_us"]); got != r.Watermark {
				t.Errorf("tables --spark: watermark_us %d, tidemark reconcile closed windows by %d", got, r.Watermark)
			}
			vars["from_ts"], vars["to_ts"] = from.Format(time.DateTime), to.Format(time.DateTime)
			db := lakeDB(t, b)
			if err := runSparkScript(db, vars); err != nil {
				t.Fatal(err)
			}
			loadDeltaTable(t, db, filepath.Join(a, "window_results"), "a_window_results")
			loadDeltaTable(t, db, filepath.Join(a, "reconcile_log"), "a_reconcile_log")
			// In range: tidemark also corrects the windows of late rows
			// outside it (those since its last run); the script does not.
			inRange := fmt.Sprintf("%s >= TIMESTAMPTZ '%s+00' AND %s < TIMESTAMPTZ '%s+00'",
				duckCol(vars, "c_window_start"), vars["from_ts"], duckCol(vars, "c_window_start"), vars["to_ts"])
			compareTables(t, db, "window_results", "a_window_results", inRange, vars, "computed_at")
			compareTables(t, db, "reconcile_log", "a_reconcile_log", inRange, vars, "run_id", "corrected_at")
			for _, tbl := range []string{"window_results", "reconcile_log"} {
				if got := queryRows(t, db, "SELECT count(*) FROM "+tbl); len(got) != 1 || got[0] == "0" {
					t.Errorf("%s is empty", tbl)
				}
			}
			// One run id, one time, for every log row the script wrote.
			if got := queryRows(t, db, fmt.Sprintf("SELECT count(DISTINCT %s), count(DISTINCT %s), count(*) FILTER (WHERE %s IS NULL) FROM reconcile_log",
				duckCol(vars, "c_run_id"), duckCol(vars, "c_corrected_at"), duckCol(vars, "c_run_id"))); got[0] != "1|1|0" {
				t.Errorf("reconcile_log run ids, times, null ids: %s, want 1|1|0", got[0])
			}
			// A second run finds nothing more to correct: no log row, no
			// change (what a rerun after a complete run finds).
			before := queryRows(t, db, tableText("window_results", "true", vars, "computed_at"))
			logged := queryRows(t, db, "SELECT count(*) FROM reconcile_log")
			if err := runSparkScript(db, vars); err != nil {
				t.Fatal(err)
			}
			if after := queryRows(t, db, tableText("window_results", "true", vars, "computed_at")); !slices.Equal(before, after) {
				t.Errorf("a second run changed window_results:\n%s", diffRows(after, before))
			}
			if again := queryRows(t, db, "SELECT count(*) FROM reconcile_log"); !slices.Equal(again, logged) {
				t.Errorf("a second run logged more: %s rows, then %s", logged[0], again[0])
			}
			if len(tc.shards) > 1 && tc.idle != "" {
				// The lagging shard is idle: the watermark is the other's.
				if hi := highestWatermark(t, db, b); hi != mustInt(t, vars["watermark_us"]) {
					t.Errorf("watermark_us %s with the lagging shard idle, want the other shard's %d", vars["watermark_us"], hi)
				}
			}
			if len(tc.shards) > 1 && tc.idle == "" {
				// The test can fail: the old rule (the highest shard
				// watermark) closes windows tidemark does not.
				hi := highestWatermark(t, db, b)
				if hi <= mustInt(t, vars["watermark_us"]) {
					t.Fatalf("the shards' watermarks are equal (%d): the lake does not test the rule", hi)
				}
				db2 := lakeDB(t, b)
				vars2 := maps.Clone(vars)
				vars2["watermark_us"] = strconv.FormatInt(hi, 10)
				if err := runSparkScript(db2, vars2); err != nil {
					t.Fatal(err)
				}
				loadDeltaTable(t, db2, filepath.Join(a, "window_results"), "a_window_results")
				got := queryRows(t, db2, tableText("window_results", "true", vars, "computed_at"))
				want := queryRows(t, db2, tableText("a_window_results", "true", vars, "computed_at"))
				if slices.Equal(got, want) {
					t.Errorf("with the highest watermark the script still equals tidemark: the lake does not tell the rules apart")
				}
			}
		})
	}
}

// TestSparkReconcileRefusesSessions: `tables --spark` refuses a session
// lake, and the script's guard fails on one before writing anything, when
// given the variables of a window lake of the gap's length by hand.
func TestSparkReconcileRefusesSessions(t *testing.T) {
	tidemarkBinary(t)
	dir := t.TempDir()
	in := filepath.Join(dir, "in", "events.ndjson")
	os.MkdirAll(filepath.Dir(in), 0o755)
	var b []byte
	base := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	for i := range 200 {
		b = fmt.Appendf(b, `{"event_time":%q,"page":"/p%d","v":%d}`+"\n", base.Add(time.Duration(i*7)*time.Second+time.Duration(i%5)*time.Second).Format(time.RFC3339), i%3, i)
	}
	if err := os.WriteFile(in, b, 0o644); err != nil {
		t.Fatal(err)
	}
	lake := filepath.Join(dir, "lake")
	runTidemark(t, "stream", "--source", filepath.Dir(in), "--lake", lake, "--once", "--drain", "--session-gap", "1m", "--key", "page", "--value", "v")
	cmd := exec.Command(tidemarkBinary(t), "tables", "--lake", lake, "--spark")
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "session windows") {
		t.Errorf("tables --spark on a session lake: %v\n%s\nwant a refusal naming session windows", err, out)
	}
	// By hand, as if it were a 1m tumbling lake.
	vars := map[string]string{"lake": lake, "window_us": "60000000", "slide_us": "60000000", "watermark_us": strconv.FormatInt(base.Add(time.Hour).UnixMicro(), 10),
		"run_seq": "1", "k_cols": ", `page`", "k_cols_s": ", s.`page`", "k_join": " AND t.`page` <=> s.`page`",
		"from_ts": "2026-03-01 00:00:00", "to_ts": "2026-03-02 00:00:00"}
	for _, c := range sparkColumnNames {
		vars["c_"+c] = "`" + c + "`"
	}
	vars["c_value"] = "`value`"
	db := lakeDB(t, lake)
	before := queryRows(t, db, "SELECT * FROM window_results")
	err = runSparkScript(db, vars)
	if err == nil || !strings.Contains(err.Error(), "not one of the windows of window_us=60000000") || !strings.Contains(err.Error(), "session lake") {
		t.Fatalf("the script on a session lake: %v, want the guard's error", err)
	}
	if after := queryRows(t, db, "SELECT * FROM window_results"); !slices.Equal(before, after) {
		t.Errorf("the guard failed after window_results changed")
	}
	if got := queryRows(t, db, "SELECT count(*) FROM reconcile_log"); got[0] != "0" {
		t.Errorf("the guard failed after %s reconcile_log rows were written", got[0])
	}
}

// sparkColumnNames are the own columns the script names as c_<name>
// (reconcile.sparkColumns).
var sparkColumnNames = []string{
	"event_time", "status", "event_date", "event_hour",
	"window_start", "window_end", "count", "sum", "min", "max", "final", "origin", "revision", "computed_at", "watermark", "window_date",
	"run_id", "old_count", "new_count", "old_sum", "new_sum", "old_min", "new_min", "old_max", "new_max", "late_rows", "corrected_at",
}

// runSparkScript runs scripts/spark/reconcile.sql, translated, on db.
func runSparkScript(db *sql.DB, vars map[string]string) error {
	script, err := os.ReadFile("../spark/reconcile.sql")
	if err != nil {
		return err
	}
	for _, conf := range []string{"SET spark.sql.parquet.outputTimestampType=TIMESTAMP_MICROS;", "SET spark.sql.session.timeZone=UTC;"} {
		if !strings.Contains(string(script), conf) {
			return fmt.Errorf("reconcile.sql lacks %q", conf)
		}
	}
	sts, err := sparkToDuck(string(script), vars)
	if err != nil {
		return err
	}
	for _, st := range sts {
		if _, err := db.Exec(st); err != nil {
			return fmt.Errorf("%w\nin:\n%s", err, st)
		}
	}
	return nil
}

// sparkVars runs `tidemark tables --spark` and parses its -d 'name=value' \
// lines.
func sparkVars(t *testing.T, lake string, extra ...string) map[string]string {
	t.Helper()
	out := runTidemark(t, append([]string{"tables", "--lake", lake, "--spark"}, extra...)...)
	vars := map[string]string{}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	for i, l := range lines {
		if i < len(lines)-1 {
			var ok bool
			if l, ok = strings.CutSuffix(l, " \\"); !ok {
				t.Fatalf("tables --spark: line %q does not continue with a backslash", l)
			}
		}
		arg, ok := strings.CutPrefix(l, "-d ")
		if !ok || len(arg) < 2 || arg[0] != '\'' || arg[len(arg)-1] != '\'' {
			t.Fatalf("tables --spark: line %q is not -d 'name=value'", l)
		}
		arg = strings.ReplaceAll(arg[1:len(arg)-1], `'\''`, `'`)
		name, value, _ := strings.Cut(arg, "=")
		vars[name] = value
	}
	return vars
}

// lakeDB opens a DuckDB holding the lake's raw_events, window_results and
// reconcile_log as tables of those names.
func lakeDB(t *testing.T, lake string) *sql.DB {
	t.Helper()
	db, err := openDB(1)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	for _, tbl := range []string{"raw_events", "window_results", "reconcile_log"} {
		loadDeltaTable(t, db, filepath.Join(lake, tbl), tbl)
	}
	return db
}

// loadDeltaTable creates the DuckDB table name with the Delta table's
// schema (partition columns included) and its rows at the latest version
// (partition values from the log).
func loadDeltaTable(t *testing.T, db *sql.DB, dir, name string) {
	t.Helper()
	ctx := context.Background()
	s, err := replay(ctx, db, dir)
	if err != nil {
		t.Fatal(err)
	}
	types := map[string]string{"string": "VARCHAR", "long": "BIGINT", "integer": "INTEGER", "double": "DOUBLE",
		"boolean": "BOOLEAN", "timestamp": "TIMESTAMPTZ", "binary": "BLOB"}
	var cols []string
	for _, f := range s.Schema {
		typ, ok := types[f.Type]
		if !ok {
			t.Fatalf("%s: column %s of type %s", dir, f.Name, f.Type)
		}
		cols = append(cols, duckIdent(f.Name)+" "+typ)
	}
	if _, err := db.Exec(fmt.Sprintf("CREATE TABLE %s (%s)", duckIdent(name), strings.Join(cols, ", "))); err != nil {
		t.Fatal(err)
	}
	for _, a := range s.Files {
		p, err := a.localPath(s.Root)
		if err != nil {
			t.Fatal(err)
		}
		sel := "*"
		for _, c := range s.PartitionColumns {
			v := "NULL"
			if pv := a.PartitionValues[c]; pv != nil {
				v = sqlString(*pv)
			}
			sel += fmt.Sprintf(", %s AS %s", v, duckIdent(c))
		}
		if _, err := db.Exec(fmt.Sprintf("INSERT INTO %s BY NAME SELECT %s FROM read_parquet(%s, hive_partitioning = false)", duckIdent(name), sel, sqlString(p))); err != nil {
			t.Fatal(err)
		}
	}
}

// duckCol is the DuckDB name of the column a c_ variable names.
func duckCol(vars map[string]string, v string) string {
	return duckIdent(unquoteBack(vars[v]))
}

// tableText is the query of a table's rows where where holds, but for the
// columns except.
func tableText(tbl, where string, vars map[string]string, except ...string) string {
	var ex []string
	for _, e := range except {
		ex = append(ex, duckCol(vars, "c_"+e))
	}
	return fmt.Sprintf("SELECT * EXCLUDE (%s) FROM %s WHERE %s", strings.Join(ex, ", "), tbl, where)
}

// compareTables requires the DuckDB tables got and want to hold the same
// rows, but for the columns except (logical names).
func compareTables(t *testing.T, db *sql.DB, got, want, where string, vars map[string]string, except ...string) {
	t.Helper()
	g := queryRows(t, db, tableText(got, where, vars, except...))
	w := queryRows(t, db, tableText(want, where, vars, except...))
	if !slices.Equal(g, w) {
		t.Errorf("%s after the Spark SQL (%d rows) differs from tidemark reconcile's (%d rows):\n%s", got, len(g), len(w),
			strings.NewReplacer("only in window_results", "only the Spark SQL", "only in DuckDB:        ", "only tidemark:").Replace(diffRows(g, w)))
	}
}

// highestWatermark is the highest watermark any shard recorded (the
// tidemark.watermark.<id> txns of raw_events): what the old script used.
func highestWatermark(t *testing.T, db *sql.DB, lake string) int64 {
	t.Helper()
	s, err := replay(context.Background(), db, filepath.Join(lake, "raw_events"))
	if err != nil {
		t.Fatal(err)
	}
	var hi int64
	for id, v := range s.Txns {
		if strings.HasPrefix(id, "tidemark-watermark:") && v > hi {
			hi = v
		}
	}
	return hi
}

func mustInt(t *testing.T, s string) int64 {
	t.Helper()
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// copyDir copies the directory tree src to dst.
func copyDir(t *testing.T, src, dst string) {
	t.Helper()
	if out, err := exec.Command("cp", "-a", src, dst).CombinedOutput(); err != nil {
		t.Fatalf("cp -a %s %s: %v\n%s", src, dst, err, out)
	}
}
