package main

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const golden = "../../../shared/delta-golden" // /work/shared beside /work/main

func goldenDir(t *testing.T, name string) string {
	t.Helper()
	for _, d := range []string{os.Getenv("DELTA_GOLDEN"), golden, "/work/shared/delta-golden"} {
		if d == "" {
			continue
		}
		if _, err := os.Stat(filepath.Join(d, name)); err == nil {
			return filepath.Join(d, name)
		}
	}
	t.Skipf("delta-golden/%s not found (set DELTA_GOLDEN)", name)
	return ""
}

// Expected facts from delta-golden/README.md (latest versions).
func TestReplayGolden(t *testing.T) {
	tests := []struct {
		table            string
		version, files   int64
		rows             int64
		checkpoint       int64
		refused          string // substring of the error, if it must be refused
		partitionColumns int
	}{
		{table: "spark-unpartitioned-deletes-checkpoint", version: 13, files: 7, rows: 41, checkpoint: 10},
		{table: "spark-overwrite-restore-checkpoint", version: 3, files: 4, rows: 200, checkpoint: 3},
		{table: "spark-multipart-checkpoint", version: 1, files: 10, rows: 31, checkpoint: 1},
		{table: "spark-partitioned-int-string", version: 0, files: 3, rows: 3, checkpoint: -1, partitionColumns: 2},
		{table: "spark-partition-values-all-types-null", version: 0, files: 3, rows: 3, checkpoint: -1, partitionColumns: 12},
		{table: "spark-partitioned-timestamp", version: 0, files: 2, rows: 2, checkpoint: -1, partitionColumns: 1},
		{table: "spark-streaming-txn", version: 3, files: 3, rows: 6, checkpoint: 3},
		{table: "delta-rs-checkpoint", version: 1, files: 2, rows: 6, checkpoint: 0},
		{table: "spark-deletion-vectors", refused: "deletion vector"},
		{table: "spark-column-mapping-name", refused: "minReaderVersion 2"},
	}
	db, err := openDB(1)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()
	for _, tt := range tests {
		t.Run(tt.table, func(t *testing.T) {
			dir := goldenDir(t, tt.table)
			s, err := replay(ctx, db, dir)
			if tt.refused != "" {
				if err == nil || !strings.Contains(err.Error(), tt.refused) {
					t.Fatalf("got error %v, want one containing %q", err, tt.refused)
				}
				return
			}
			if err != nil {
				t.Fatalf("replay: %v", err)
			}
			if s.Version != tt.version || int64(len(s.Files)) != tt.files || s.FromCheckpoint != tt.checkpoint {
				t.Errorf("got version %d, %d files, checkpoint %d; want %d, %d, %d", s.Version, len(s.Files), s.FromCheckpoint, tt.version, tt.files, tt.checkpoint)
			}
			if len(s.PartitionColumns) != tt.partitionColumns {
				t.Errorf("got partition columns %v, want %d", s.PartitionColumns, tt.partitionColumns)
			}
			rep := newTestReport()
			tr := checkTable(ctx, db, rep, tt.table, dir, nil)
			if tr.Rows != tt.rows {
				t.Errorf("got %d rows, want %d", tr.Rows, tt.rows)
			}
			if rep.FailureCount != 0 {
				t.Errorf("got failures %v, want none", rep.Failures)
			}
		})
	}
	if s, err := replay(ctx, db, goldenDir(t, "spark-streaming-txn")); err == nil {
		if got := s.Txns["e4a20b59-dd0e-4c50-b074-e8ae4786df30"]; got != 0 || len(s.Txns) != 1 {
			t.Errorf("got txns %v, want the streaming query at version 0", s.Txns)
		}
	}
}

func newTestReport() *interopReport {
	return &interopReport{maxPerTable: 100, tableFailures: map[string]int{}}
}

// The input lines of the synthetic lake: two hours, one bad line.
var testInput = []string{
	`{"event_time":"2026-01-01T10:59:58.000Z","arrival_time":"2026-01-01T10:59:59.000Z","page":"/p/1","value":1.5}`,
	`{"event_time":"2026-01-01T11:00:01.000Z","arrival_time":"2026-01-01T11:00:02.000Z","page":"/p/2","value":2}`,
	`not json`,
	`{"event_time":"2026-01-01T10:59:57.000Z","arrival_time":"2026-01-01T11:00:03.000Z","page":"/p/1","value":4}`,
	`{"event_time":"2026-01-01T11:00:02.500Z","arrival_time":"2026-01-01T11:00:04.000Z","page":"/p/2"}`,
}

// lakeOpts mutates the synthetic lake to provoke one failure each.
type lakeOpts struct {
	naiveTimestamps bool   // event_time as TIMESTAMP (not UTC-adjusted)
	wrongStats      bool   // numRecords off by one
	wrongPartition  bool   // one add says event_hour=12
	shiftOffset     bool   // offsets off by one byte
	noQuarantine    bool   // the bad line is nowhere
	partitionInData bool   // event_date stored in the files too
	extraTable      string // an additional non-tidemark table name to create
}

// buildLake writes the input file and a tidemark-shaped lake made by DuckDB
// (raw_events partitioned by event_date/event_hour, quarantine by
// ingest_date), with a hand-written Delta log.
func buildLake(t *testing.T, o lakeOpts) (lake, input string) {
	t.Helper()
	root := t.TempDir()
	input, lake = filepath.Join(root, "in"), filepath.Join(root, "lake")
	for _, d := range []string{input, lake, filepath.Join(lake, o.extraTable)} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	data := strings.Join(testInput, "\n") + "\n"
	if err := os.WriteFile(filepath.Join(input, "events-00000.ndjson"), []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
	db, err := openDB(1)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var raw, bad []string
	off := 0
	prevMax := ""
	for _, l := range testInput {
		o2 := off
		if o.shiftOffset {
			o2++
		}
		var ev struct {
			EventTime   string   `json:"event_time"`
			ArrivalTime string   `json:"arrival_time"`
			Page        string   `json:"page"`
			Value       *float64 `json:"value"`
		}
		if json.Unmarshal([]byte(l), &ev) != nil {
			bad = append(bad, fmt.Sprintf("('malformed', 'not JSON', 'src', 'events-00000.ndjson', %d, TIMESTAMPTZ '2026-01-01 12:00:00+00', 1, encode(%s))", o2, sqlString(l)))
		} else {
			val := "NULL"
			if ev.Value != nil {
				val = fmt.Sprint(*ev.Value)
			}
			disorder := "0"
			if prevMax > ev.EventTime {
				disorder = fmt.Sprintf("epoch_us(TIMESTAMPTZ %s) - epoch_us(TIMESTAMPTZ %s)", sqlString(prevMax), sqlString(ev.EventTime))
			} else {
				prevMax = ev.EventTime
			}
			raw = append(raw, fmt.Sprintf("(TIMESTAMPTZ %s, TIMESTAMPTZ %s, TIMESTAMPTZ '2026-01-01 12:00:00+00', %s, %s, 'ok', %s, 'src', 'events-00000.ndjson', %d, 1, encode(%s))",
				sqlString(ev.EventTime), sqlString(ev.ArrivalTime), sqlString(ev.Page), val, disorder, o2, sqlString(l)))
		}
		off += len(l) + 1
	}
	ts := "event_time"
	if o.naiveTimestamps {
		ts = "event_time::TIMESTAMP AS event_time"
	}
	keep := "WRITE_PARTITION_COLUMNS false"
	if o.partitionInData {
		keep = "WRITE_PARTITION_COLUMNS true"
	}
	exec := func(q string) {
		t.Helper()
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("%.200s: %v", q, err)
		}
	}
	exec(`CREATE TABLE raw AS SELECT * FROM (VALUES ` + strings.Join(raw, ",") + `) v(event_time, arrival_time, ingest_time, page, value, status, disorder_us, source, file, "offset", batch_id, payload)`)
	exec(fmt.Sprintf(`COPY (SELECT * EXCLUDE (event_time), %s, strftime(event_time, '%%Y-%%m-%%d') AS event_date, strftime(event_time, '%%H') AS event_hour FROM raw)
		TO %s (FORMAT parquet, COMPRESSION zstd, PARTITION_BY (event_date, event_hour), %s)`, ts, sqlString(filepath.Join(lake, "raw_events")), keep))
	writeLog(t, db, filepath.Join(lake, "raw_events"), rawSchema, []string{"event_date", "event_hour"}, o)
	if !o.noQuarantine {
		exec(`CREATE TABLE q AS SELECT * FROM (VALUES ` + strings.Join(bad, ",") + `) v(reason, error, source, file, "offset", ingest_time, batch_id, payload)`)
		exec(fmt.Sprintf(`COPY (SELECT *, strftime(ingest_time, '%%Y-%%m-%%d') AS ingest_date FROM q) TO %s (FORMAT parquet, PARTITION_BY (ingest_date))`, sqlString(filepath.Join(lake, "quarantine"))))
		writeLog(t, db, filepath.Join(lake, "quarantine"), quarantineSchema, []string{"ingest_date"}, lakeOpts{})
	}
	if o.extraTable != "" {
		exec(fmt.Sprintf(`COPY (SELECT 1::INTEGER AS x) TO %s (FORMAT parquet)`, sqlString(filepath.Join(lake, o.extraTable, "part-0.parquet"))))
		writeLog(t, db, filepath.Join(lake, o.extraTable), `[{"name":"x","type":"integer","nullable":true,"metadata":{}}]`, nil, lakeOpts{})
	}
	return lake, input
}

const rawSchema = `[{"name":"event_time","type":"timestamp","nullable":true,"metadata":{}},{"name":"arrival_time","type":"timestamp","nullable":true,"metadata":{}},{"name":"ingest_time","type":"timestamp","nullable":true,"metadata":{}},{"name":"page","type":"string","nullable":true,"metadata":{}},{"name":"value","type":"double","nullable":true,"metadata":{}},{"name":"status","type":"string","nullable":true,"metadata":{}},{"name":"disorder_us","type":"long","nullable":true,"metadata":{}},{"name":"source","type":"string","nullable":true,"metadata":{}},{"name":"file","type":"string","nullable":true,"metadata":{}},{"name":"offset","type":"long","nullable":true,"metadata":{}},{"name":"batch_id","type":"long","nullable":true,"metadata":{}},{"name":"payload","type":"binary","nullable":true,"metadata":{}},{"name":"event_date","type":"string","nullable":true,"metadata":{}},{"name":"event_hour","type":"string","nullable":true,"metadata":{}}]`

const quarantineSchema = `[{"name":"reason","type":"string","nullable":true,"metadata":{}},{"name":"error","type":"string","nullable":true,"metadata":{}},{"name":"source","type":"string","nullable":true,"metadata":{}},{"name":"file","type":"string","nullable":true,"metadata":{}},{"name":"offset","type":"long","nullable":true,"metadata":{}},{"name":"ingest_time","type":"timestamp","nullable":true,"metadata":{}},{"name":"batch_id","type":"long","nullable":true,"metadata":{}},{"name":"payload","type":"binary","nullable":true,"metadata":{}},{"name":"ingest_date","type":"string","nullable":true,"metadata":{}}]`

// writeLog writes commit 0 of a table: protocol, metaData and one add per
// Parquet file found under dir.
func writeLog(t *testing.T, db *sql.DB, dir, fields string, partCols []string, o lakeOpts) {
	t.Helper()
	var files []string
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && strings.HasSuffix(p, ".parquet") {
			files = append(files, p)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	pc, _ := json.Marshal(append([]string{}, partCols...))
	schema, _ := json.Marshal(`{"type":"struct","fields":` + fields + `}`)
	var log bytes.Buffer
	log.WriteString(`{"protocol":{"minReaderVersion":1,"minWriterVersion":2}}` + "\n")
	fmt.Fprintf(&log, `{"metaData":{"id":"test","format":{"provider":"parquet","options":{}},"schemaString":%s,"partitionColumns":%s,"configuration":{},"createdTime":0}}`+"\n", schema, pc)
	for i, f := range files {
		rel, _ := filepath.Rel(dir, f)
		pv := map[string]string{}
		for _, seg := range strings.Split(filepath.Dir(rel), string(filepath.Separator)) {
			if k, v, ok := strings.Cut(seg, "="); ok {
				pv[k] = v
			}
		}
		if o.wrongPartition && i == 0 {
			pv["event_hour"] = "12"
		}
		var n int64
		if err := db.QueryRow("SELECT count(*) FROM read_parquet(" + sqlString(f) + ")").Scan(&n); err != nil {
			t.Fatal(err)
		}
		if o.wrongStats && i == 0 {
			n++
		}
		st, _ := os.Stat(f)
		add := map[string]any{"path": filepath.ToSlash(rel), "partitionValues": pv, "size": st.Size(), "modificationTime": 0, "dataChange": true,
			"stats": fmt.Sprintf(`{"numRecords":%d}`, n)}
		b, _ := json.Marshal(map[string]any{"add": add})
		log.Write(append(b, '\n'))
	}
	if err := os.MkdirAll(filepath.Join(dir, "_delta_log"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "_delta_log", "00000000000000000000.json"), log.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestInteropSyntheticLake(t *testing.T) {
	tests := []struct {
		name string
		opts lakeOpts
		want []string // substrings of the failures; none = must pass
	}{
		{name: "good"},
		{name: "good with another table", opts: lakeOpts{extraTable: "other"}},
		{name: "naive timestamps", opts: lakeOpts{naiveTimestamps: true}, want: []string{`"event_time" (Delta timestamp) reads as TIMESTAMP,`, "want TIMESTAMP(MICROS, isAdjustedToUTC=true)"}},
		{name: "wrong stats", opts: lakeOpts{wrongStats: true}, want: []string{"stats.numRecords is"}},
		{name: "wrong partition value", opts: lakeOpts{wrongPartition: true}, want: []string{`event_hour is "12" in the log, "10" in the directory`, `partition event_hour="12", but event_time gives "10"`}},
		{name: "partition column in data", opts: lakeOpts{partitionInData: true}, want: []string{`partition column "event_date" is stored in the data file`}},
		{name: "shifted offsets", opts: lakeOpts{shiftOffset: true}, want: []string{"differs from the input", "line not in raw_events or quarantine"}},
		{name: "lost bad line", opts: lakeOpts{noQuarantine: true}, want: []string{`events-00000.ndjson:218: line not in raw_events or quarantine: "not json\n"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			lake, input := buildLake(t, tt.opts)
			var out, errb bytes.Buffer
			err := run(context.Background(), []string{"interop", "-lake", lake, "-input", input}, &out, &errb)
			if len(tt.want) == 0 {
				if err != nil {
					t.Fatalf("got %v, want no failures; report:\n%s%s", err, out.String(), errb.String())
				}
				if !strings.Contains(out.String(), "input: 5 lines, 5 found exactly once") {
					t.Errorf("report does not say all 5 lines were found:\n%s", out.String())
				}
				return
			}
			if err == nil {
				t.Fatalf("got no error, want failures %q; report:\n%s", tt.want, out.String())
			}
			for _, w := range tt.want {
				if !strings.Contains(out.String(), w) {
					t.Errorf("report lacks %q:\n%s", w, out.String())
				}
			}
		})
	}
}

func TestGroupbyAndQuantiles(t *testing.T) {
	lake, _ := buildLake(t, lakeOpts{})
	var out, errb bytes.Buffer
	if err := run(context.Background(), []string{"groupby", "-lake", lake, "-window", "1m", "-threads", "1"}, &out, &errb); err != nil {
		t.Fatalf("groupby: %v: %s", err, errb.String())
	}
	var g groupbyResult
	if err := json.Unmarshal(out.Bytes(), &g); err != nil {
		t.Fatal(err)
	}
	// Windows 10:59 (/p/1 x2) and 11:00 (/p/2 x2).
	if g.Rows != 4 || g.Groups != 2 || g.Files != 2 {
		t.Errorf("got rows %d, groups %d, files %d; want 4, 2, 2", g.Rows, g.Groups, g.Files)
	}
	out.Reset()
	if err := run(context.Background(), []string{"quantiles", "-lake", lake, "-threads", "1"}, &out, &errb); err != nil {
		t.Fatalf("quantiles: %v: %s", err, errb.String())
	}
	var q quantilesResult
	if err := json.Unmarshal(out.Bytes(), &q); err != nil {
		t.Fatal(err)
	}
	// Lags 1 s, 1 s, 6 s, 1.5 s; disorder 0, 0, 3 s (10:59:57 after 11:00:01... ), 0.
	if q.Rows != 4 || q.LagUS.Min != 1_000_000 || q.LagUS.Max != 6_000_000 || q.LagUS.P["p50"] != 1_000_000 {
		t.Errorf("got %+v, want 4 rows, lag min 1s, p50 1s, max 6s", q)
	}
	if q.DisorderUS.Max != 4_000_000 || q.DisorderUS.P["p50"] != 0 {
		t.Errorf("got disorder %+v, want max 4s, p50 0", q.DisorderUS)
	}
}

func TestIngest(t *testing.T) {
	_, input := buildLake(t, lakeOpts{noQuarantine: true})
	out := filepath.Join(t.TempDir(), "x.parquet")
	for _, schema := range []string{"typed", "auto"} {
		var stdout, errb bytes.Buffer
		if err := run(context.Background(), []string{"ingest", "-in", input, "-out", out, "-schema", schema}, &stdout, &errb); err != nil {
			t.Fatalf("ingest -schema %s: %v: %s", schema, err, errb.String())
		}
		var r ingestResult
		if err := json.Unmarshal(stdout.Bytes(), &r); err != nil {
			t.Fatal(err)
		}
		// ignore_errors makes DuckDB null out what it cannot parse, not
		// drop the line: every line is a row.
		if r.Rows != 5 {
			t.Errorf("-schema %s: got %d rows, want 5", schema, r.Rows)
		}
	}
}
