package reconcile

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"tidemark/lake"
)

// AppSpark is the txn appId under which scripts/spark/reconcile.sql commits
// its reconcile_log rows and its window_results MERGE (Delta's idempotent
// writes: spark.databricks.delta.write.txnAppId/txnVersion), so that a
// rerun of a job killed between the two commits skips the one that landed.
// It is not AppRun: a Spark run must never complete the pending log rows of
// an interrupted tidemark run (FinishReconcileLog), nor they its.
const AppSpark = "tidemark-reconcile.spark"

// ErrSparkSessions is SparkVariables' error on a session lake.
var ErrSparkSessions = errors.New("reconcile: scripts/spark/reconcile.sql handles window lakes only; this lake holds session windows: run `tidemark reconcile` on it")

// noWatermark is watermark_us when no stream recorded a watermark:
// 0001-01-01T00:00:00Z, which no window ends before (only final windows
// are closed), and which Spark's timestamps can still hold.
const noWatermark = -62135596800000000

// SparkVariable is one variable (spark-sql -d name=value) of
// scripts/spark/reconcile.sql.
type SparkVariable struct{ Name, Value string }

// sparkColumns are the logical names of the lake's own columns the script
// names; each is a variable c_<name> holding its quoted physical name
// (lake.Config.Column: _tm_<name> where a key took the name).
var sparkColumns = []string{
	"event_time", "status", "event_date", "event_hour",
	"window_start", "window_end", "count", "sum", "min", "max", "final", "origin", "revision", "computed_at", "watermark", "window_date",
	"run_id", "old_count", "new_count", "old_sum", "new_sum", "old_min", "new_min", "old_max", "new_max", "late_rows", "corrected_at",
}

// SparkVariables returns the variables scripts/spark/reconcile.sql needs
// for the lake lk, but for lake, from_ts and to_ts (the caller's): the
// window and slide; watermark_us, the watermark that closes windows, by
// the rule a `tidemark reconcile` run would use now (the streams'
// watermark — on a lake several streams write, the lowest of the active
// shards', idle ones by lk's ShardIdle — never below the one the last
// reconcile saw); run_seq, the txn version of the run (AppSpark: one past
// window_results' last, so a job killed between its two commits is rerun
// under the same version); the key columns as lists and as the null-safe
// match; c_value (NULL on a lake without values) and c_<column> for each
// own column, quoted as Spark quotes identifiers. A session lake is
// refused (ErrSparkSessions).
func SparkVariables(ctx context.Context, lk *lake.Lake) ([]SparkVariable, error) {
	cfg := lk.Config()
	if cfg.SessionGap > 0 {
		return nil, ErrSparkSessions
	}
	p, err := readPriorRuns(ctx, lk)
	if err != nil {
		return nil, err
	}
	w, ok, err := p.closing(ctx)
	if err != nil {
		return nil, err
	}
	if !ok || w < noWatermark {
		w = noWatermark
	}
	wtx, err := lk.Txns(ctx, lake.TableWindowResults)
	if err != nil {
		return nil, fmt.Errorf("read the Spark runs: %w", err)
	}
	spec := cfg.Window.Normalized()
	vars := []SparkVariable{
		{"window_us", strconv.FormatInt(spec.Size, 10)},
		{"slide_us", strconv.FormatInt(spec.Slide, 10)},
		{"watermark_us", strconv.FormatInt(w, 10)},
		{"run_seq", strconv.FormatInt(wtx[AppSpark]+1, 10)},
	}
	var cols, colsS, join strings.Builder
	for _, k := range cfg.KeyNames() {
		q := sparkIdent(k)
		fmt.Fprintf(&cols, ", %s", q)
		fmt.Fprintf(&colsS, ", s.%s", q)
		fmt.Fprintf(&join, " AND t.%s <=> s.%s", q, q)
	}
	vars = append(vars,
		SparkVariable{"k_cols", cols.String()},
		SparkVariable{"k_cols_s", colsS.String()},
		SparkVariable{"k_join", join.String()},
	)
	value := "CAST(NULL AS DOUBLE)"
	if cfg.ValueField != "" {
		value = sparkIdent(cfg.Column("value"))
	}
	vars = append(vars, SparkVariable{"c_value", value})
	for _, c := range sparkColumns {
		vars = append(vars, SparkVariable{"c_" + c, sparkIdent(cfg.Column(c))})
	}
	return vars, nil
}

// sparkIdent quotes a column name as Spark SQL does: in backquotes, a
// backquote doubled.
func sparkIdent(name string) string {
	return "`" + strings.ReplaceAll(name, "`", "``") + "`"
}
