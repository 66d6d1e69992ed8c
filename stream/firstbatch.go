package stream

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"tidemark"
	"tidemark/ingest"
	"tidemark/lake"
	"tidemark/lake/store"
)

// The first-batch check (ingest.Diagnose): a new stream — its checkpoint
// holds no committed batch — reads its first batch, and only if that
// batch shows no configuration mistake does it open the lake (creating
// the tables, which remember the keys and settings) and go on. A mistake
// stops the stream before anything is written to the lake, so the run
// with the right flags finds no lake made with the wrong ones. Past the
// first batch bad data never stops a stream (SPEC §1): a key or value
// field missing from every row of a batch is a warning instead
// (warnMissing).

// FirstBatchError is the error of a stream stopped by its first batch.
type FirstBatchError struct {
	Mistake *ingest.Mistake
}

func (e *FirstBatchError) Error() string {
	return fmt.Sprintf("stream stopped before writing anything: %s: %s (the lake is untouched; run again with the fix, or with --no-first-batch-check to take the lines as they are)",
		e.Mistake.Problem, e.Mistake.Hint)
}

func (e *FirstBatchError) Unwrap() error { return e.Mistake }

// deferLake makes a new stream open its lake only once its first batch
// passed the check: it keeps the store until then.
func (r *runner) deferLake(st store.Store) {
	r.lakeStore = st
}

// checkFirstBatch checks the first batch of a new stream and then starts
// opening the lake. It is a no-op for every other batch.
func (r *runner) checkFirstBatch(ctx context.Context, b readBatch) error {
	st := r.lakeStore
	if st == nil {
		return nil
	}
	if m := ingest.Diagnose(r.cfg.Decoder, b.recs, csvHeaders(b.entry.End)); m != nil {
		return &FirstBatchError{Mistake: m}
	}
	r.lakeStore = nil
	r.keyTypes = inferKeyTypes(len(r.cfg.Decoder.Keys), b.recs)
	r.openLake(ctx, st)
	// Waited for here, not after the engine: a new stream on an existing
	// lake takes the lake's key types, and its first batch's keys are
	// checked against them (checkKeys) before the engine sees them.
	return r.awaitLake(ctx)
}

// inferKeyTypes fixes a new lake's key column types from its first batch's
// valid records (lake.InferKeyType): a key all of whose non-null values
// are integral JSON numbers is BIGINT, numbers with a fraction DOUBLE,
// booleans BOOLEAN, anything else (or no value at all) text. So every
// record of the first batch fits; later ones that do not are bad_key.
func inferKeyTypes(nkeys int, recs []tidemark.Record) []lake.KeyType {
	if nkeys == 0 {
		return nil
	}
	kinds := make([][]tidemark.KeyKind, nkeys)
	seen := make([][4]bool, nkeys)
	for j := range recs {
		r := &recs[j]
		if !r.Valid() {
			continue
		}
		for i, p := range r.Key.Parts() {
			if i >= nkeys || p.Null {
				continue
			}
			if k := r.KeyKindOf(i); !seen[i][k] {
				seen[i][k] = true
				kinds[i] = append(kinds[i], k)
			}
		}
	}
	types := make([]lake.KeyType, nkeys)
	for i := range types {
		types[i] = lake.InferKeyType(kinds[i])
	}
	return types
}

// checkKeys quarantines, as bad_key, the valid records whose key does not
// fit the lake's key column types (a string where the lake holds BIGINT,
// ...), before the engine or the lake sees them.
func checkKeys(cfg lake.Config, recs []tidemark.Record) {
	for i := range recs {
		r := &recs[i]
		if !r.Valid() {
			continue
		}
		if msg := cfg.CheckKey(r); msg != "" {
			r.Reason, r.Err = tidemark.ReasonBadKey, msg
		}
	}
}

// openDeferredLake opens the lake of a new stream that read no batch (an
// empty --once run still makes its lake, and --drain needs it).
func (r *runner) openDeferredLake(ctx context.Context) error {
	st := r.lakeStore
	if st == nil {
		return nil
	}
	r.lakeStore = nil
	r.openLake(ctx, st)
	return r.awaitLake(ctx)
}

// csvHeaders collects the CSV header lines the batch's end positions hold,
// by file path.
func csvHeaders(end map[string]json.RawMessage) map[string][]byte {
	out := map[string][]byte{}
	for _, raw := range end {
		var pos ingest.Position
		if json.Unmarshal(raw, &pos) != nil {
			continue
		}
		for _, f := range pos.Files {
			if f.Header != nil {
				out[f.Path] = f.Header
			}
		}
	}
	return out
}

// missingEvery is how often a persisting missing field is logged again.
const missingEvery = 10 * time.Minute

// warnMissing logs the key, value and --agg fields missing from every row of a
// batch: at once when the set changes, then at most every missingEvery.
func (r *runner) warnMissing(batchID int64, fields []string, now time.Time) {
	if len(fields) == 0 {
		r.missing = nil
		return
	}
	if slices.Equal(fields, r.missing) && now.Sub(r.missingLogged) < missingEvery {
		return
	}
	r.missing, r.missingLogged = slices.Clone(fields), now
	r.cfg.Logger.Warn("key or value fields missing (or null) in every row of the batch (or --agg fields): those rows group under null or carry no value; check --key/--value/--agg",
		"batch_id", batchID, "fields", strings.Join(fields, ","))
}

// missingFields is ingest.MissingFields of a batch's records.
func (r *runner) missingFields(recs []tidemark.Record) []string {
	return ingest.MissingFields(r.cfg.Decoder, recs)
}
