package requeue

import (
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"tidemark"
	"tidemark/ingest"
	"tidemark/lake"
	"tidemark/lake/store"
)

// csvLake makes a lake keyed by page with value v that remembers reading
// its lines as format, with the time in event_time.
func csvLake(t *testing.T, format string) *lake.Lake {
	t.Helper()
	st, err := store.OpenDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	spec, _ := tidemark.NewWindowSpec(time.Minute, 0)
	lk, err := lake.Open(context.Background(), st, lake.Config{Keys: []string{"page"}, ValueField: "v", Window: spec,
		Input: lake.Input{Format: format, TimeField: "event_time", TimeUnit: "s"}, Clock: func() time.Time { return ingestAt }})
	if err != nil {
		t.Fatal(err)
	}
	return lk
}

// streamDir reads every file of dir with the real directory source under
// cfg, as one stream batch read at ingestAt, and commits it.
func streamDir(t *testing.T, lk *lake.Lake, dir string, cfg ingest.DecoderConfig) {
	t.Helper()
	cfg.Keys, cfg.ValueField = []string{"page"}, "v"
	src, err := ingest.Open(context.Background(), dir, ingest.SourceConfig{DecoderConfig: cfg, Once: true, Clock: func() time.Time { return ingestAt }}, ingest.Position{})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	var recs []tidemark.Record
	for !src.Exhausted() {
		if recs, err = src.Read(context.Background(), recs, 1000); err != nil {
			t.Fatal(err)
		}
	}
	for i := range recs {
		recs[i].Payload = bytes.Clone(recs[i].Payload)
	}
	if err := lk.AppendBatch(context.Background(), lake.Batch{AppID: "stream-1", BatchID: 0, Records: recs, IngestTime: ingestAt.UnixMicro()}); err != nil {
		t.Fatal(err)
	}
}

// csvData is a CSV file whose time column is ts: read with the default
// --time-field, each record is missing_time. One record has a quoted
// newline.
func csvData(header string) string {
	var b strings.Builder
	b.WriteString(header + "\n")
	for i := range 6 {
		page := fmt.Sprintf("/p%d", i%2)
		if i == 3 {
			page = "\"/multi\nline\""
		}
		fmt.Fprintf(&b, "2026-01-01T11:%02d:00Z,%s,%d\n", i, page, i)
	}
	return b.String()
}

func gzipped(t *testing.T, s string) string {
	var b bytes.Buffer
	z := gzip.NewWriter(&b)
	z.Write([]byte(s))
	if err := z.Close(); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// CSV rows are decoded with the header of their file, found in the file
// (plain or compressed, still holding the row's bytes), in quarantine (the
// file was read as NDJSON), or given; where it is found nowhere the rows
// stay, as ReasonNoHeader, and a file's first line stays as its header.
func TestRequeueCSV(t *testing.T) {
	const header = "ts,page,v"
	data := csvData(header)
	tests := []struct {
		name     string
		file     string                       // the file's name in the source
		body     string                       // its bytes
		format   string                       // the lake's (and the stream's) format
		after    func(t *testing.T, p string) // done to the file after the stream read it
		given    string                       // Config.CSVHeader
		moved    int64
		stayed   map[tidemark.Reason]int64
		asFormat string // Config.Decoder.Format; "" = the lake's
	}{
		{name: "header from the file", file: "a.csv", body: data, format: ingest.FormatCSV, moved: 6},
		{name: "header from the gzip file", file: "a.csv.gz", body: gzipped(t, data), format: ingest.FormatCSV, moved: 6},
		{name: "file gone, header given", file: "a.csv", body: data, format: ingest.FormatCSV, after: remove, given: header, moved: 6},
		{name: "file gone, no header", file: "a.csv", body: data, format: ingest.FormatCSV, after: remove,
			stayed: map[tidemark.Reason]int64{ReasonNoHeader: 6}},
		{name: "file rewritten", file: "a.csv", body: data, format: ingest.FormatCSV, after: rewrite,
			stayed: map[tidemark.Reason]int64{ReasonNoHeader: 6}},
		{name: "file rewritten, header given", file: "a.csv", body: data, format: ingest.FormatCSV, after: rewrite, given: header, moved: 6},
		// Read as NDJSON, every line (header too) is malformed; --format
		// csv finds the header in quarantine, even with the file gone. The
		// record with a quoted newline was cut in two lines: they stay.
		{name: "read as ndjson, header in quarantine", file: "a.csv", body: data, format: ingest.FormatNDJSON, after: remove,
			asFormat: ingest.FormatCSV, moved: 5, stayed: map[tidemark.Reason]int64{ReasonCSVHeader: 1, tidemark.ReasonMalformed: 2}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			lk := csvLake(t, tc.format)
			dir := t.TempDir()
			path := filepath.Join(dir, tc.file)
			if err := os.WriteFile(path, []byte(tc.body), 0o644); err != nil {
				t.Fatal(err)
			}
			streamDir(t, lk, dir, ingest.DecoderConfig{Format: tc.format})
			// As NDJSON, the header and the quoted newline's two lines are
			// lines too.
			if _, q := tables(t, lk); len(q) != 6 && tc.format == ingest.FormatCSV || len(q) != 8 && tc.format != ingest.FormatCSV {
				t.Fatalf("the stream quarantined %d lines", len(q))
			}
			if tc.after != nil {
				tc.after(t, path)
			}
			cfg := Config{Decoder: ingest.DecoderConfig{TimeField: "ts", Format: tc.asFormat}}
			if tc.given != "" {
				cfg.CSVHeader = []byte(tc.given)
			}
			dry := cfg
			dry.DryRun = true
			drep, err := Run(context.Background(), lk, dry)
			if err != nil {
				t.Fatal(err)
			}
			rep, err := Run(context.Background(), lk, cfg)
			if err != nil {
				t.Fatal(err)
			}
			if rep.MovedTotal() != tc.moved || fmt.Sprint(rep.Stayed) != fmt.Sprint(nonNil(tc.stayed)) {
				t.Errorf("moved %v, stayed %v; want %d moved, %v stayed", rep.Moved, rep.Stayed, tc.moved, tc.stayed)
			}
			if drep.MovedTotal() != rep.MovedTotal() || drep.StayedTotal() != rep.StayedTotal() {
				t.Errorf("dry run: %v / %v, run: %v / %v", drep.Moved, drep.Stayed, rep.Moved, rep.Stayed)
			}
			if raw, _ := tables(t, lk); int64(len(raw)) != tc.moved {
				t.Errorf("raw_events holds %d rows, want the %d moved", len(raw), tc.moved)
			}
			if tc.moved != 6 {
				return
			}
			// The moved rows are the file's records, decoded under its
			// header: keys, values and times, the quoted newline kept.
			var got []string
			err = lk.ScanRaw(context.Background(), lake.RawQuery{Columns: []string{lake.ColEventTime, lake.ColKey, lake.ColValue, lake.ColStatus}}, func(b lake.RawBatch) error {
				for i := range b.N {
					got = append(got, fmt.Sprintf("%s %s %v %s", tidemark.FormatTime(b.EventTime[i]), b.Key[i].String(), b.Value[i], b.Status[i]))
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			want := "2026-01-01T11:00:00Z /p0 0 late|2026-01-01T11:01:00Z /p1 1 late|2026-01-01T11:02:00Z /p0 2 late|" +
				"2026-01-01T11:03:00Z /multi\nline 3 late|2026-01-01T11:04:00Z /p0 4 late|2026-01-01T11:05:00Z /p1 5 late"
			if g := strings.Join(slices.Sorted(slices.Values(got)), "|"); g != want {
				t.Errorf("raw_events:\n%s\nwant\n%s", g, want)
			}
		})
	}
}

func remove(t *testing.T, p string) {
	if err := os.Remove(p); err != nil {
		t.Fatal(err)
	}
}

// rewrite replaces the file with another of the same size.
func rewrite(t *testing.T, p string) {
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, bytes.Repeat([]byte("x"), len(b)), 0o644); err != nil {
		t.Fatal(err)
	}
}

func nonNil(m map[tidemark.Reason]int64) map[tidemark.Reason]int64 {
	if m == nil {
		return map[tidemark.Reason]int64{}
	}
	return m
}

// A CSV run killed between its two commits is completed by the next run
// with the headers its intent recorded, though the file is gone by then.
func TestRequeueCSVCompletesFromTheIntent(t *testing.T) {
	ctx := context.Background()
	lk := csvLake(t, ingest.FormatCSV)
	dir := t.TempDir()
	path := filepath.Join(dir, "a.csv")
	if err := os.WriteFile(path, []byte(csvData("ts,page,v")), 0o644); err != nil {
		t.Fatal(err)
	}
	streamDir(t, lk, dir, ingest.DecoderConfig{Format: ingest.FormatCSV})
	cfg := ingest.DecoderConfig{Format: ingest.FormatCSV, TimeField: "ts", Keys: []string{"page"}, ValueField: "v"}
	dec, err := ingest.NewCSVDecoder(cfg, []byte("ts,page,v"))
	if err != nil {
		t.Fatal(err)
	}
	in := lake.RequeueIntent{RunID: "killed", Settings: []byte(`{"Format":"csv","TimeField":"ts","Keys":["page"],"ValueField":"v"}`),
		CSVHeaders: [][]byte{[]byte("ts,page,v")}}
	var moved []lake.Moved
	lk.ScanQuarantine(ctx, func(r lake.QuarantineRow) error {
		rec, why := decode(dec, cfg, r, nil)
		if why != "" {
			t.Fatalf("row %v: %s", r.ID(), why)
		}
		moved = append(moved, lake.Moved{ID: r.ID(), Record: rec})
		in.Rows, in.HeaderOf = append(in.Rows, r.ID()), append(in.HeaderOf, 0)
		return nil
	})
	if err := lk.BeginRequeue(ctx, in); err != nil {
		t.Fatal(err)
	}
	if err := lk.AppendRequeueRawOnly(ctx, in, moved); err != nil { // the kill comes here
		t.Fatal(err)
	}
	remove(t, path)
	rep, err := Run(ctx, lk, Config{Decoder: ingest.DecoderConfig{TimeField: "ts"}})
	if err != nil {
		t.Fatal(err)
	}
	raw, q := tables(t, lk)
	if rep.Finished != 1 || len(raw) != 6 || len(q) != 0 {
		t.Errorf("finished %d; raw %d, quarantine %d; want 1 completed run, 6, 0", rep.Finished, len(raw), len(q))
	}
}

// A CSV header given to a lake read as NDJSON is a mistake.
func TestRequeueCSVHeaderNeedsCSV(t *testing.T) {
	lk := csvLake(t, ingest.FormatNDJSON)
	_, err := Run(context.Background(), lk, Config{Decoder: ingest.DecoderConfig{TimeField: "ts"}, CSVHeader: []byte("ts,page,v")})
	if err == nil || !strings.Contains(err.Error(), "--format csv") {
		t.Errorf("got %v, want an error naming --format csv", err)
	}
}
