package main

import (
	"context"
	"slices"
	"strings"
	"testing"
)

func TestSparkToDuck(t *testing.T) {
	script := "SET spark.sql.session.timeZone=UTC;\n" +
		"-- a comment; with a semicolon\n" +
		"CACHE TABLE c AS SELECT unix_micros(`a``b`) AS x, 'it''s; `not` <=> an ident' AS s FROM delta.`${lake}/window_results` t\n" +
		"  WHERE t.`k` <=> ${v} ;\n" +
		"SELECT raise_error('x') , explode(sequence(0, 2)), timestamp_micros(0) FROM delta.`s3a://b/l/raw_events/`;\n" +
		"RESET spark.databricks.delta.write.txnAppId;"
	got, err := sparkToDuck(script, map[string]string{"lake": "/tmp/l", "v": "1"})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		`CREATE OR REPLACE TEMP TABLE c AS SELECT epoch_us("a` + "`" + `b") AS x, 'it''s; ` + "`not` <=> an ident" + `' AS s FROM "window_results" t
  WHERE t."k"  IS NOT DISTINCT FROM  1`,
		`SELECT error('x') , unnest(generate_series(0, 2)), make_timestamp(0) FROM "raw_events"`,
	}
	if !slices.Equal(got, want) {
		t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n---\n"), strings.Join(want, "\n---\n"))
	}
	if _, err := sparkToDuck("SELECT ${nope}", nil); err == nil || !strings.Contains(err.Error(), "nope") {
		t.Errorf("a variable without a value: got %v, want an error naming it", err)
	}
}

// TestSparkFunctionsInDuckDB checks that the translated functions mean in
// DuckDB what they mean in Spark, on values whose Spark results the Spark
// docs give: unix_micros/timestamp_micros round trips (before 1970 too),
// sequence's inclusive end, % truncating toward zero (Java's remainder),
// and the same CAST/date/hour rendering the partition filters use.
func TestSparkFunctionsInDuckDB(t *testing.T) {
	db, err := openDB(1)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	sts, err := sparkToDuck("SELECT unix_micros(TIMESTAMP '1969-12-31 23:59:59.5'), CAST(timestamp_micros(-1) AS STRING), "+
		"CAST(sequence(0, 2) AS STRING), -7 % 3, CAST(CAST(TIMESTAMP '2026-03-01 23:59:59' AS DATE) AS STRING), "+
		"lpad(CAST(hour(TIMESTAMP '2026-03-01 07:10:00') AS STRING), 2, '0'), CAST(count_if(true) AS STRING), NOT (NULL <=> 1), CAST(ceil(600 / 60) AS BIGINT)", nil)
	if err != nil {
		t.Fatal(err)
	}
	var us, ts, seq, mod, date, hour, n, ne, ceil string
	if err := db.QueryRowContext(context.Background(), sts[0]).Scan(&us, &ts, &seq, &mod, &date, &hour, &n, &ne, &ceil); err != nil {
		t.Fatalf("%s: %v", sts[0], err)
	}
	got := strings.Join([]string{us, ts, seq, mod, date, hour, n, ne, ceil}, " | ")
	want := "-500000 | 1969-12-31 23:59:59.999999 | [0, 1, 2] | -1 | 2026-03-01 | 07 | 1 | true | 10"
	if got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}
