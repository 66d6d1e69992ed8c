package requeue

import (
	"context"
	"fmt"
	"math/rand/v2"
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

// ingestAt is when the test lines were read.
var ingestAt = time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)

// newLake makes a lake keyed by page with value v.
func newLake(t *testing.T) *lake.Lake {
	t.Helper()
	st, err := store.OpenDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	spec, _ := tidemark.NewWindowSpec(time.Minute, 0)
	lk, err := lake.Open(context.Background(), st, lake.Config{Keys: []string{"page"}, ValueField: "v", Window: spec, Clock: func() time.Time { return ingestAt }})
	if err != nil {
		t.Fatal(err)
	}
	return lk
}

// ingestLines decodes lines under cfg as a stream batch read at ingestAt
// would, and commits them (valid ones ok, the rest to quarantine).
func ingestLines(t *testing.T, lk *lake.Lake, batch int64, cfg ingest.DecoderConfig, lines []string) {
	t.Helper()
	cfg.Keys, cfg.ValueField = []string{"page"}, "v"
	dec, err := ingest.NewDecoder(cfg)
	if err != nil {
		t.Fatal(err)
	}
	max := cfg.MaxLineBytes
	if max == 0 {
		max = ingest.DefaultMaxLineBytes
	}
	recs := make([]tidemark.Record, len(lines))
	for i, l := range lines {
		r := &recs[i]
		*r = tidemark.Record{Source: "logs", File: fmt.Sprintf("f%d.ndjson", batch), FileID: fmt.Sprintf("id%d", batch), Offset: int64(i * 1000), Payload: []byte(l), Arrival: ingestAt.UnixMicro()}
		if len(l) > max {
			r.Payload = r.Payload[:max] // as the reader keeps a long line
			r.Reason, r.Err = tidemark.ReasonLineTooLong, fmt.Sprintf("line is %d bytes, over the limit of %d", len(l), max)
			continue
		}
		dec.Decode(r)
	}
	if err := lk.AppendBatch(context.Background(), lake.Batch{AppID: "stream-1", BatchID: batch, Records: recs, IngestTime: ingestAt.UnixMicro()}); err != nil {
		t.Fatal(err)
	}
}

type lineAt struct {
	file   string
	offset int64
}

// tables reads both tables: each line's place, failing on a line in both.
func tables(t *testing.T, lk *lake.Lake) (raw, quarantine map[lineAt]string) {
	t.Helper()
	ctx := context.Background()
	raw, quarantine = map[lineAt]string{}, map[lineAt]string{}
	err := lk.ScanRaw(ctx, lake.RawQuery{Columns: []string{lake.ColFile, lake.ColOffset, lake.ColStatus}}, func(b lake.RawBatch) error {
		for i := range b.N {
			at := lineAt{b.File[i], b.Offset[i]}
			if _, dup := raw[at]; dup {
				t.Errorf("line %v twice in raw_events", at)
			}
			raw[at] = b.Status[i].String()
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	err = lk.ScanQuarantine(ctx, func(r lake.QuarantineRow) error {
		at := lineAt{r.File, r.Offset}
		if _, dup := quarantine[at]; dup {
			t.Errorf("line %v twice in quarantine", at)
		}
		if _, both := raw[at]; both {
			t.Errorf("line %v in raw_events and quarantine", at)
		}
		quarantine[at] = r.Reason
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return raw, quarantine
}

func line(ts string, extra string) string {
	return fmt.Sprintf(`{%s"page":"/a","v":1%s}`, ts, extra)
}

// Each reason: what the stream quarantined under its settings moves to
// raw_events (as late) under the fixed ones, or stays.
func TestRequeueByReason(t *testing.T) {
	tsRFC := `"ts":"2026-01-01T11:00:00Z",`
	ms := time.Date(2026, 1, 1, 11, 0, 0, 0, time.UTC).UnixMilli()
	long := line(`"event_time":"2026-01-01T11:00:00Z",`, `,"pad":"`+strings.Repeat("x", 200)+`"`)
	tests := []struct {
		name   string
		stream ingest.DecoderConfig
		lines  []string
		fixed  ingest.DecoderConfig
		moved  tidemark.Reason // "" = stays
		stays  tidemark.Reason
	}{
		{"missing_time: --time-field", ingest.DecoderConfig{}, []string{line(tsRFC, "")}, ingest.DecoderConfig{TimeField: "ts"}, tidemark.ReasonMissingTime, ""},
		{"missing_time, still missing", ingest.DecoderConfig{}, []string{line(tsRFC, "")}, ingest.DecoderConfig{TimeField: "time"}, "", tidemark.ReasonMissingTime},
		{"bad_time: --time-layout", ingest.DecoderConfig{}, []string{line(`"event_time":"01/Jan/2026:11:00:00 +0000",`, "")}, ingest.DecoderConfig{TimeLayout: "02/Jan/2006:15:04:05 -0700"}, tidemark.ReasonBadTime, ""},
		{"future_time: --time-unit ms", ingest.DecoderConfig{}, []string{line(fmt.Sprintf(`"event_time":%d,`, ms), "")}, ingest.DecoderConfig{TimeUnit: "ms"}, tidemark.ReasonFutureTime, ""},
		{"future_time: --max-future", ingest.DecoderConfig{}, []string{line(`"event_time":"2026-01-01T14:00:00Z",`, "")}, ingest.DecoderConfig{MaxFuture: 3 * time.Hour}, tidemark.ReasonFutureTime, ""},
		{"too_old: floor lowered", ingest.DecoderConfig{MinEventTime: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}, []string{line(`"event_time":"2025-06-01T00:00:00Z",`, "")}, ingest.DecoderConfig{}, tidemark.ReasonTooOld, ""},
		{"malformed stays", ingest.DecoderConfig{}, []string{`{"event_time":`}, ingest.DecoderConfig{TimeField: "ts"}, "", tidemark.ReasonMalformed},
		{"bad_value stays", ingest.DecoderConfig{}, []string{`{"event_time":"2026-01-01T11:00:00Z","page":"/a","v":"x"}`}, ingest.DecoderConfig{}, "", tidemark.ReasonBadValue},
		{"line_too_long was cut", ingest.DecoderConfig{MaxLineBytes: 100}, []string{long}, ingest.DecoderConfig{MaxLineBytes: 1000}, "", ReasonCut},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			lk := newLake(t)
			good := line(`"event_time":"2026-01-01T11:00:00Z",`, "")
			ingestLines(t, lk, 0, tc.stream, append([]string{good}, tc.lines...))
			dry, err := Run(context.Background(), lk, Config{Decoder: tc.fixed, DryRun: true})
			if err != nil {
				t.Fatal(err)
			}
			rep, err := Run(context.Background(), lk, Config{Decoder: tc.fixed})
			if err != nil {
				t.Fatal(err)
			}
			if dry.MovedTotal() != rep.MovedTotal() || dry.StayedTotal() != rep.StayedTotal() {
				t.Errorf("dry run said %v moved / %v stayed, the run %v / %v", dry.Moved, dry.Stayed, rep.Moved, rep.Stayed)
			}
			raw, q := tables(t, lk)
			if tc.moved != "" {
				if rep.Moved[tc.moved] != 1 || rep.StayedTotal() != 0 {
					t.Errorf("moved %v, stayed %v; want 1 %s moved", rep.Moved, rep.Stayed, tc.moved)
				}
				if len(raw) != 2 || len(q) != 0 || raw[lineAt{"f0.ndjson", 1000}] != "late" {
					t.Errorf("raw %v, quarantine %v: want the line in raw_events as late", raw, q)
				}
			} else {
				if rep.Stayed[tc.stays] != 1 || rep.MovedTotal() != 0 {
					t.Errorf("moved %v, stayed %v; want 1 staying as %s", rep.Moved, rep.Stayed, tc.stays)
				}
				if len(raw) != 1 || len(q) != 1 {
					t.Errorf("raw %v, quarantine %v: want the line still in quarantine", raw, q)
				}
			}
		})
	}
}

// The quarantine rows that stay keep their file_id when requeue rewrites
// their file without the rows that moved (it was written empty, or with
// a stale chunk buffer's bytes, before colfile checked the values' count).
func TestRequeueKeepsFileID(t *testing.T) {
	lk := newLake(t)
	moves := line(`"ts":"2026-01-01T11:00:00Z",`, "")
	ingestLines(t, lk, 3, ingest.DecoderConfig{}, []string{moves, `{"event_time":`, `{"event_time":1`})
	if _, err := Run(context.Background(), lk, Config{Decoder: ingest.DecoderConfig{TimeField: "ts"}}); err != nil {
		t.Fatal(err)
	}
	n := 0
	err := lk.ScanQuarantine(context.Background(), func(r lake.QuarantineRow) error {
		n++
		if r.FileID != "id3" {
			t.Errorf("quarantine row at %s:%d has file_id %q, want id3", r.File, r.Offset, r.FileID)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n != 2 {
		t.Errorf("%d rows stayed in quarantine, want 2", n)
	}
}

// A run killed between its raw_events commit and its quarantine commit:
// no reader counts the moved lines twice meanwhile, and the next run
// completes it, under the settings the first run recorded.
func TestRequeueCompletesAnInterruptedRun(t *testing.T) {
	ctx := context.Background()
	lk := newLake(t)
	var lines []string
	for i := range 10 {
		lines = append(lines, line(fmt.Sprintf(`"ts":"2026-01-01T11:%02d:00Z",`, i), ""))
	}
	ingestLines(t, lk, 0, ingest.DecoderConfig{}, lines)
	cfg := ingest.DecoderConfig{TimeField: "ts", Keys: []string{"page"}, ValueField: "v"}
	dec, _ := ingest.NewDecoder(cfg)
	var moved []lake.Moved
	in := lake.RequeueIntent{RunID: "killed", Settings: []byte(`{"TimeField":"ts","Keys":["page"],"ValueField":"v"}`)}
	lk.ScanQuarantine(ctx, func(r lake.QuarantineRow) error {
		rec, why := decode(dec, cfg, r, nil)
		if why != "" {
			t.Fatalf("row %v: %s", r.ID(), why)
		}
		moved = append(moved, lake.Moved{ID: r.ID(), Record: rec})
		in.Rows = append(in.Rows, r.ID())
		return nil
	})
	if err := lk.BeginRequeue(ctx, in); err != nil {
		t.Fatal(err)
	}
	if err := lk.AppendRequeueRawOnly(ctx, in, moved); err != nil { // the kill comes here
		t.Fatal(err)
	}
	raw, q := tables(t, lk) // fails on a line in both
	if len(raw)+len(q) != 10 || len(raw) != 10 {
		t.Errorf("in between: raw %d + quarantine %d, want 10 + 0", len(raw), len(q))
	}
	// The next run, with other settings, first completes the killed one.
	rep, err := Run(ctx, lk, Config{Decoder: ingest.DecoderConfig{TimeField: "other"}})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Finished != 1 || rep.Read != 0 {
		t.Errorf("finished %d, read %d; want 1 completed run, nothing left to read", rep.Finished, rep.Read)
	}
	raw, q = tables(t, lk)
	if len(raw) != 10 || len(q) != 0 {
		t.Errorf("after: raw %d, quarantine %d; want 10, 0", len(raw), len(q))
	}
	if rep, err := Run(ctx, lk, Config{Decoder: ingest.DecoderConfig{TimeField: "ts"}}); err != nil || rep.Finished != 0 || rep.MovedTotal() != 0 {
		t.Errorf("a third run: %+v, %v; want nothing to do", rep, err)
	}
}

// Property: whatever the mix of lines and the sequence of settings, every
// line is in exactly one table after each run, the accounting identity
// holds, and what moved matches what the dry run said.
func TestRequeueIdentityProperty(t *testing.T) {
	ctx := context.Background()
	settings := []ingest.DecoderConfig{
		{}, {TimeField: "ts"}, {TimeUnit: "ms"}, {TimeField: "ts", TimeUnit: "ms"},
		{TimeLayout: "2006/01/02 15:04:05"}, {MaxFuture: 48 * time.Hour}, {MaxLineBytes: 80},
	}
	kinds := []func(r *rand.Rand) string{
		func(r *rand.Rand) string { return line(`"event_time":"2026-01-01T11:00:00Z",`, "") },
		func(r *rand.Rand) string { return line(`"ts":"2026-01-01T11:00:00Z",`, "") },
		func(r *rand.Rand) string {
			return line(fmt.Sprintf(`"event_time":%d,`, 1767265200000+r.Int64N(1000)), "")
		},
		func(r *rand.Rand) string { return line(fmt.Sprintf(`"ts":%d,`, 1767265200000+r.Int64N(1000)), "") },
		func(r *rand.Rand) string { return line(`"event_time":"2026/01/01 11:00:00",`, "") },
		func(r *rand.Rand) string { return line(`"event_time":"2026-01-02T11:00:00Z",`, "") },
		func(r *rand.Rand) string { return `{"event_time":"2026-01-01T11:00:00Z","page":` },
		func(r *rand.Rand) string {
			return line(`"event_time":"2026-01-01T11:00:00Z",`, `,"pad":"`+strings.Repeat("y", 60+r.IntN(40))+`"`)
		},
	}
	for seed := range uint64(20) {
		r := rand.New(rand.NewPCG(seed, 7))
		lk := newLake(t)
		total := 0
		for b := range int64(1 + r.IntN(3)) {
			n := 5 + r.IntN(30)
			lines := make([]string, n)
			for i := range lines {
				lines[i] = kinds[r.IntN(len(kinds))](r)
			}
			ingestLines(t, lk, b, settings[r.IntN(len(settings))], lines)
			total += n
		}
		for range 1 + r.IntN(4) {
			s := settings[r.IntN(len(settings))]
			rawBefore, _ := tables(t, lk)
			dry, err := Run(ctx, lk, Config{Decoder: s, DryRun: true})
			if err != nil {
				t.Fatal(err)
			}
			rep, err := Run(ctx, lk, Config{Decoder: s})
			if err != nil {
				t.Fatalf("seed %d, settings %+v: %v", seed, s, err)
			}
			raw, q := tables(t, lk)
			if len(raw)+len(q) != total {
				t.Fatalf("seed %d: raw %d + quarantine %d != %d lines", seed, len(raw), len(q), total)
			}
			if int64(len(raw)-len(rawBefore)) != rep.MovedTotal() || dry.MovedTotal() != rep.MovedTotal() || rep.Read != rep.MovedTotal()+rep.StayedTotal() {
				t.Fatalf("seed %d: raw grew %d, run moved %d, dry run said %d, read %d", seed, len(raw)-len(rawBefore), rep.MovedTotal(), dry.MovedTotal(), rep.Read)
			}
		}
	}
}

// A line quarantined as too long kept only its first bytes: with a raised
// --max-line-bytes requeue reads it again whole from its file and moves it
// (payload byte-exact); from a file rewritten since, it stays.
func TestRequeueLineTooLongRereadsTheFile(t *testing.T) {
	ctx := context.Background()
	for _, rewritten := range []bool{false, true} {
		lk := newLake(t)
		dir := t.TempDir()
		good := line(`"event_time":"2026-01-01T11:00:00Z",`, "")
		long := line(`"event_time":"2026-01-01T11:00:01Z",`, `,"pad":"`+strings.Repeat("z", 300)+`"`)
		path := filepath.Join(dir, "a.ndjson")
		if err := os.WriteFile(path, []byte(good+"\n"+long+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		const max = 100
		recs := []tidemark.Record{
			{Source: dir, File: "a.ndjson", Offset: 0, Payload: []byte(good), Arrival: ingestAt.UnixMicro()},
			{Source: dir, File: "a.ndjson", Offset: int64(len(good) + 1), Payload: []byte(long[:max]), Arrival: ingestAt.UnixMicro(),
				Reason: tidemark.ReasonLineTooLong, Err: fmt.Sprintf("line is %d bytes, over the limit of %d", len(long), max)},
		}
		dec, _ := ingest.NewDecoder(ingest.DecoderConfig{Keys: []string{"page"}, ValueField: "v"})
		dec.Decode(&recs[0])
		if err := lk.AppendBatch(ctx, lake.Batch{AppID: "s", BatchID: 0, Records: recs, IngestTime: ingestAt.UnixMicro()}); err != nil {
			t.Fatal(err)
		}
		if rewritten {
			if err := os.WriteFile(path, []byte(strings.Repeat("x", 2000)), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		rep, err := Run(ctx, lk, Config{Decoder: ingest.DecoderConfig{MaxLineBytes: 1000}})
		if err != nil {
			t.Fatal(err)
		}
		if rewritten {
			if rep.Stayed[ReasonCut] != 1 || rep.MovedTotal() != 0 {
				t.Errorf("rewritten file: moved %v, stayed %v; want it to stay as cut", rep.Moved, rep.Stayed)
			}
			continue
		}
		if rep.Moved[tidemark.ReasonLineTooLong] != 1 {
			t.Fatalf("moved %v, stayed %v; want the long line moved", rep.Moved, rep.Stayed)
		}
		var payloads []string
		lk.ScanRaw(ctx, lake.RawQuery{Columns: []string{lake.ColPayload}}, func(b lake.RawBatch) error {
			for i := range b.N {
				payloads = append(payloads, string(b.Payload[i]))
			}
			return nil
		})
		if !slices.Contains(payloads, long) {
			t.Errorf("raw_events payloads %q lack the whole long line", payloads)
		}
	}
}
