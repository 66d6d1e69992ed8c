package reconcile_test

import (
	"context"
	"errors"
	"os"
	"regexp"
	"slices"
	"testing"
	"time"

	"tidemark"
	"tidemark/lake"
	"tidemark/lake/store"
	"tidemark/reconcile"
)

// TestSparkVariables: the variables of scripts/spark/reconcile.sql for a
// lake whose key takes an own column's name (count: stored as _tm_count),
// typed keys and no value column; the run sequence follows the Spark runs
// window_results records; a session lake is refused. (That watermark_us is
// the watermark reconcile closes windows by, on solo and shared lakes, is
// checked against `tidemark reconcile` in scripts/duck's
// TestSparkReconcileMatchesTidemark.)
func TestSparkVariables(t *testing.T) {
	ctx := context.Background()
	st, err := store.OpenDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	spec, err := tidemark.NewWindowSpec(10*time.Minute, 5*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	lk, err := lake.Open(ctx, st, lake.Config{Keys: []string{"count", "page"}, KeyTypes: []lake.KeyType{lake.KeyLong, lake.KeyString}, Window: spec})
	if err != nil {
		t.Fatal(err)
	}
	vars, err := reconcile.SparkVariables(ctx, lk)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, v := range vars {
		got[v.Name] = v.Value
	}
	want := map[string]string{
		"window_us":      "600000000",
		"slide_us":       "300000000",
		"watermark_us":   "-62135596800000000", // no stream yet: only final windows are closed
		"run_seq":        "1",
		"k_cols":         ", `count`, `page`",
		"k_cols_s":       ", s.`count`, s.`page`",
		"k_join":         " AND t.`count` <=> s.`count` AND t.`page` <=> s.`page`",
		"c_value":        "CAST(NULL AS DOUBLE)",
		"c_count":        "`_tm_count`",
		"c_old_count":    "`old_count`",
		"c_window_start": "`window_start`",
		"c_event_hour":   "`event_hour`",
	}
	for name, w := range want {
		if got[name] != w {
			t.Errorf("%s = %q, want %q", name, got[name], w)
		}
	}
	if err := lk.RecordTxn(ctx, lake.TableWindowResults, reconcile.AppSpark, 3); err != nil {
		t.Fatal(err)
	}
	vars, err = reconcile.SparkVariables(ctx, lk)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range vars {
		if v.Name == "run_seq" && v.Value != "4" {
			t.Errorf("run_seq after Spark run 3: %s, want 4", v.Value)
		}
	}

	sst, err := store.OpenDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	slk, err := lake.Open(ctx, sst, lake.Config{Keys: []string{"page"}, ValueField: "v", SessionGap: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := reconcile.SparkVariables(ctx, slk); !errors.Is(err, reconcile.ErrSparkSessions) {
		t.Errorf("session lake: got %v, want ErrSparkSessions", err)
	}
}

// TestSparkVariablesAreTheScripts: SparkVariables gives every variable
// scripts/spark/reconcile.sql uses but the three the user gives, and none
// it does not use.
func TestSparkVariablesAreTheScripts(t *testing.T) {
	script, err := os.ReadFile("../scripts/spark/reconcile.sql")
	if err != nil {
		t.Fatal(err)
	}
	used := map[string]bool{}
	for _, m := range regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)\}`).FindAllStringSubmatch(string(script), -1) {
		used[m[1]] = true
	}
	for _, v := range []string{"lake", "from_ts", "to_ts"} {
		if !used[v] {
			t.Errorf("the script does not use ${%s}", v)
		}
		delete(used, v)
	}
	st, err := store.OpenDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	lk, err := lake.Open(context.Background(), st, lake.Config{Keys: []string{"page"}, ValueField: "v", Window: tidemark.WindowSpec{Size: 60_000_000}})
	if err != nil {
		t.Fatal(err)
	}
	vars, err := reconcile.SparkVariables(context.Background(), lk)
	if err != nil {
		t.Fatal(err)
	}
	var given []string
	for _, v := range vars {
		given = append(given, v.Name)
		if !used[v.Name] {
			t.Errorf("SparkVariables gives %s, which the script does not use", v.Name)
		}
		delete(used, v.Name)
	}
	for v := range used {
		t.Errorf("the script uses ${%s}, which SparkVariables does not give", v)
	}
	if u := slices.Compact(slices.Sorted(slices.Values(given))); len(u) != len(given) {
		t.Errorf("a variable given twice: %v", given)
	}
}
