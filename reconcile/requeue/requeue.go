// Package requeue replays quarantine: it decodes the lake's quarantined
// lines again under the current settings (a fixed --time-layout,
// --time-unit or --time-field, a raised --max-line-bytes) and moves those
// that now parse to raw_events, exactly once, also across a crash (the
// table side and its protocol are in lake/requeue.go).
//
// A moved line gets status late: the stream left it out of its windows,
// whatever its watermark, so it is exactly a row the stream dropped.
// reconcile then corrects its windows once the stream has closed them
// (it tracks late rows in windows still open, SPEC §5).
package requeue

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"regexp"
	"strconv"
	"time"

	"github.com/google/uuid"

	"tidemark"
	"tidemark/ingest"
	"tidemark/lake"
	"tidemark/lake/store"
)

// Config is one requeue run. The decoder's Keys, ValueField and Aggs are the
// lake's (Run sets them); the rest are the settings to decode under.
type Config struct {
	Decoder ingest.DecoderConfig
	// DryRun reports what would move, and moves nothing (an interrupted
	// run is not completed either).
	DryRun bool
	// CSVHeader is the header line for CSV rows whose file's header is
	// found neither in quarantine nor in the file (see csv.go); nil = none.
	// Decoder.Format "" is the format the lake remembers (ndjson if none).
	CSVHeader []byte
	// RunID names the run's intent and txns; "" = a random one.
	RunID  string
	Logger *slog.Logger     // nil discards
	Clock  func() time.Time // nil = time.Now
}

// Report is what a run did (or, with DryRun, would do).
type Report struct {
	RunID    string
	DryRun   bool
	Read     int64                     // quarantine rows read
	Moved    map[tidemark.Reason]int64 // rows moved to raw_events, by their quarantine reason
	Stayed   map[tidemark.Reason]int64 // rows that still fail, by the reason they fail for now
	Finished int                       // interrupted runs completed first
}

// MovedTotal sums Moved.
func (r *Report) MovedTotal() int64 { return sum(r.Moved) }

// StayedTotal sums Stayed.
func (r *Report) StayedTotal() int64 { return sum(r.Stayed) }

func sum(m map[tidemark.Reason]int64) int64 {
	var n int64
	for _, v := range m {
		n += v
	}
	return n
}

// Run completes any interrupted run (under the settings it recorded), then
// moves the quarantine rows that decode to valid events under cfg. It
// holds the lake's requeue lock meanwhile.
func Run(ctx context.Context, lk *lake.Lake, cfg Config) (_ *Report, err error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Clock == nil {
		cfg.Clock = time.Now
	}
	if cfg.RunID == "" {
		cfg.RunID = uuid.NewString()
	}
	lc := lk.Config()
	cfg.Decoder.Keys, cfg.Decoder.ValueField, cfg.Decoder.Aggs = lc.Keys, lc.ValueField, lc.Aggs.Inputs
	if in, ok := lk.Input(); ok && cfg.Decoder.Format == "" {
		cfg.Decoder.Format = in.Format
	}
	if cfg.Decoder.Format == "" {
		cfg.Decoder.Format = ingest.FormatNDJSON
	}
	if err := cfg.Decoder.Validate(); err != nil {
		return nil, fmt.Errorf("requeue: %w", err)
	}
	csv := cfg.Decoder.Format == ingest.FormatCSV
	if cfg.CSVHeader != nil && !csv {
		return nil, fmt.Errorf("requeue: a CSV header is given, but the lines are read as %s (the lake's format; --format csv reads them as CSV)", cfg.Decoder.Format)
	}
	var dec ingest.Decoder
	var headers *csvHeaders
	if csv {
		headers, err = newCSVHeaders(ctx, lk, cfg)
	} else {
		dec, err = ingest.NewDecoder(cfg.Decoder)
	}
	if err != nil {
		return nil, fmt.Errorf("requeue: %w", err)
	}
	rep := &Report{RunID: cfg.RunID, DryRun: cfg.DryRun, Moved: map[tidemark.Reason]int64{}, Stayed: map[tidemark.Reason]int64{}}
	if !cfg.DryRun {
		host, _ := os.Hostname()
		lease, err := store.AcquireLease(ctx, lk.Store(), store.LeaseConfig{Key: lake.RequeueLockKey, Owner: host, ID: cfg.RunID, TTL: time.Minute, Clock: cfg.Clock})
		if err != nil {
			return nil, fmt.Errorf("requeue: take lock %s: %w", lake.RequeueLockKey, err)
		}
		defer func() {
			if rerr := lease.Release(context.WithoutCancel(ctx)); rerr != nil {
				err = errors.Join(err, fmt.Errorf("requeue: release lock: %w", rerr))
			}
		}()
		if rep.Finished, err = finishInterrupted(ctx, lk, cfg.Logger); err != nil {
			return nil, err
		}
	}
	var moved []lake.Moved
	var headerOf []int // CSV: each moved row's header
	whole := map[int][]byte{}
	err = lk.ScanQuarantine(ctx, func(row lake.QuarantineRow) error {
		rep.Read++
		d, hi, full := dec, -1, []byte(nil)
		if csv {
			// A CSV line too long is not read again: a record may hold
			// quoted newlines, which ReadLineAt would cut at.
			if row.Offset == 0 {
				rep.Stayed[ReasonCSVHeader]++
				return nil
			}
			i, ok, err := headers.of(row)
			if err != nil {
				return err
			}
			if !ok {
				rep.Stayed[ReasonNoHeader]++
				return nil
			}
			d, hi = headers.decs[i], i
		} else {
			full = wholeLine(row, cfg.Decoder)
		}
		rec, why := decode(d, cfg.Decoder, row, full)
		if why == tidemark.ReasonNone && lc.CheckKey(&rec) != "" {
			why = tidemark.ReasonBadKey // its key still does not fit the lake's key types
		}
		if why != tidemark.ReasonNone {
			rep.Stayed[why]++
			return nil
		}
		rep.Moved[tidemark.Reason(row.Reason)]++
		if !cfg.DryRun {
			if full != nil {
				whole[len(moved)] = full
			}
			moved = append(moved, lake.Moved{ID: row.ID(), Record: rec})
			if csv {
				headerOf = append(headerOf, hi)
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("requeue: %w", err)
	}
	if cfg.DryRun || len(moved) == 0 {
		return rep, nil
	}
	settings, err := json.Marshal(cfg.Decoder)
	if err != nil {
		return nil, fmt.Errorf("requeue: %w", err)
	}
	in := lake.RequeueIntent{RunID: cfg.RunID, Created: cfg.Clock().UnixMicro(), Settings: settings, Rows: make([]lake.QuarantineID, len(moved))}
	if len(whole) > 0 {
		in.Payloads = whole
	}
	if csv {
		in.CSVHeaders, in.HeaderOf = headers.headers, headerOf
	}
	for i, m := range moved {
		in.Rows[i] = m.ID
	}
	if err := lk.BeginRequeue(ctx, in); err != nil {
		return nil, fmt.Errorf("requeue: %w", err)
	}
	if err := lk.CommitRequeue(ctx, in, moved); err != nil {
		return nil, fmt.Errorf("requeue: %w", err)
	}
	cfg.Logger.Info("requeue committed", "run_id", cfg.RunID, "moved", len(moved))
	return rep, nil
}

// finishInterrupted completes the intents whose quarantine commit has not
// landed, decoding their rows under the settings each recorded.
func finishInterrupted(ctx context.Context, lk *lake.Lake, log *slog.Logger) (int, error) {
	intents, done, err := lk.RequeueIntents(ctx)
	if err != nil {
		return 0, fmt.Errorf("requeue: %w", err)
	}
	n := 0
	for i, in := range intents {
		if done[i] {
			continue
		}
		var dc ingest.DecoderConfig
		if err := json.Unmarshal(in.Settings, &dc); err != nil {
			return n, fmt.Errorf("requeue: settings of interrupted run %s: %w", in.RunID, err)
		}
		decs, err := intentDecoders(dc, in)
		if err != nil {
			return n, fmt.Errorf("requeue: settings of interrupted run %s: %w", in.RunID, err)
		}
		rows, err := lk.RequeueRows(ctx, in)
		if err != nil {
			return n, fmt.Errorf("requeue: complete run %s: %w", in.RunID, err)
		}
		moved := make([]lake.Moved, len(rows))
		for j, row := range rows {
			k := 0
			if dc.Format == ingest.FormatCSV {
				if j >= len(in.HeaderOf) {
					return n, fmt.Errorf("requeue: complete run %s: row %v has no CSV header in the intent", in.RunID, row.ID())
				}
				k = in.HeaderOf[j]
			}
			if k < 0 || k >= len(decs) {
				return n, fmt.Errorf("requeue: complete run %s: row %v: no decoder %d in the intent", in.RunID, row.ID(), k)
			}
			dec := decs[k]
			rec, why := decode(dec, dc, row, in.Payloads[j])
			if why != tidemark.ReasonNone {
				return n, fmt.Errorf("requeue: complete run %s: row %v no longer decodes (%s)", in.RunID, row.ID(), why)
			}
			moved[j] = lake.Moved{ID: row.ID(), Record: rec}
		}
		if err := lk.CommitRequeue(ctx, in, moved); err != nil {
			return n, fmt.Errorf("requeue: complete run %s: %w", in.RunID, err)
		}
		log.Info("completed an interrupted requeue run", "run_id", in.RunID, "moved", len(moved))
		n++
	}
	return n, nil
}

// intentDecoders makes the decoders an intent's rows were decoded with:
// one per CSV header it recorded, or the one NDJSON decoder.
func intentDecoders(dc ingest.DecoderConfig, in lake.RequeueIntent) ([]ingest.Decoder, error) {
	if dc.Format != ingest.FormatCSV {
		dec, err := ingest.NewDecoder(dc)
		return []ingest.Decoder{dec}, err
	}
	decs := make([]ingest.Decoder, len(in.CSVHeaders))
	for i, h := range in.CSVHeaders {
		dec, err := ingest.NewCSVDecoder(dc, h)
		if err != nil {
			return nil, err
		}
		decs[i] = dec
	}
	return decs, nil
}

// ReasonCut is the reason a line_too_long row stays: quarantine kept only
// its first --max-line-bytes bytes, and its file could not be read again
// (gone, compressed, an S3 object, rewritten, or the line is still longer
// than --max-line-bytes).
const ReasonCut tidemark.Reason = "line_too_long (cut when quarantined)"

var lineLength = regexp.MustCompile(`^line is (\d+) bytes`)

// wholeLine reads again from its local file the whole line of a row
// quarantined as too long (quarantine kept its first bytes); nil when the
// row is not such a row or the line cannot be read (ingest.ReadLineAt).
func wholeLine(row lake.QuarantineRow, cfg ingest.DecoderConfig) []byte {
	if tidemark.Reason(row.Reason) != tidemark.ReasonLineTooLong {
		return nil
	}
	max := cfg.MaxLineBytes
	if max == 0 {
		max = ingest.DefaultMaxLineBytes
	}
	full, err := ingest.ReadLineAt(row.Source, row.File, row.Offset, row.Payload, max)
	if err != nil {
		return nil
	}
	return full
}

// decode decodes one quarantine row as the stream would have: the line
// (full, when read again whole, else the row's payload) read at the row's
// ingest time (its arrival, unless an arrival field says otherwise). It
// returns the valid record, or the reason it still fails.
func decode(dec ingest.Decoder, cfg ingest.DecoderConfig, row lake.QuarantineRow, full []byte) (tidemark.Record, tidemark.Reason) {
	payload := row.Payload
	if full != nil {
		payload = full
	} else if tidemark.Reason(row.Reason) == tidemark.ReasonLineTooLong {
		m := lineLength.FindStringSubmatch(row.Error)
		n, err := strconv.Atoi(cmpOr(m))
		if err != nil || n != len(payload) {
			return tidemark.Record{}, ReasonCut
		}
	}
	max := cfg.MaxLineBytes
	if max == 0 {
		max = ingest.DefaultMaxLineBytes
	}
	if len(payload) > max {
		return tidemark.Record{}, tidemark.ReasonLineTooLong
	}
	rec := tidemark.Record{Source: row.Source, File: row.File, FileID: row.FileID, Offset: row.Offset, Payload: append([]byte(nil), payload...), Arrival: row.IngestTime}
	dec.Decode(&rec)
	if !rec.Valid() {
		return tidemark.Record{}, rec.Reason
	}
	rec.Status, rec.Disorder = tidemark.StatusLate, 0
	return rec, tidemark.ReasonNone
}

func cmpOr(m []string) string {
	if len(m) < 2 {
		return ""
	}
	return m[1]
}
