package stream

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"tidemark"
	"tidemark/ingest"
)

// drain closes every open window (--once --drain). The checkpoint keeps the
// watermark at the end of the last drained window rather than +infinity, so
// a later run still accepts events for newer windows; events for the
// drained windows are late from then on, and reconcile absorbs them.
func (r *runner) drain(ctx context.Context) error {
	ctx = context.WithoutCancel(ctx)
	pos, err := marshalPositions(r.sources)
	if err != nil {
		return err
	}
	entry := offsetsEntry{BatchID: r.nextID, ReadTime: r.cfg.Clock().UnixMicro(), Start: pos, End: pos, Drain: true}
	if err := r.ck.write(ctx, batchKey("offsets", entry.BatchID), entry); err != nil {
		return err
	}
	return r.finishDrain(ctx, entry)
}

func (r *runner) finishDrain(ctx context.Context, entry offsetsEntry) error {
	res, after := r.engine.DrainForCheckpoint()
	if err := r.afterProcess(); err != nil {
		return err
	}
	if err := r.commit(ctx, entry, nil, res, after); err != nil {
		return err
	}
	if err := r.publish(entry, nil, countRecords(nil), res, r.engine.SourceMarks(time.UnixMicro(entry.ReadTime)), 0); err != nil {
		return err
	}
	// The engine now holds W = +inf; reload the saved state so a caller that
	// keeps going sees what the checkpoint holds.
	return r.reload(after)
}

// replay redoes a batch the previous run logged but did not commit, reading
// exactly the records between its start and end positions.
func (r *runner) replay(ctx context.Context, entry *offsetsEntry) error {
	if entry.Drain {
		return r.finishDrain(ctx, *entry)
	}
	frozen := time.UnixMicro(entry.ReadTime)
	r.readTime.Store(entry.ReadTime)
	var recs []tidemark.Record
	for _, s := range r.sources {
		var end ingest.Position
		if err := json.Unmarshal(entry.End[s.Name()], &end); err != nil {
			return fmt.Errorf("replay batch %d: end position of %s: %w", entry.BatchID, s.Name(), err)
		}
		if l, ok := s.(ingest.Limiter); ok {
			l.Limit(end) // the same bounds: aligned reading takes the records in the same order
		}
		var err error
		if recs, err = readUntil(ctx, s, recs, end, entry.SourceRows[s.Name()]); err != nil {
			return fmt.Errorf("replay batch %d from %s: %w", entry.BatchID, s.Name(), err)
		}
	}
	if len(recs) != entry.Rows {
		return fmt.Errorf("replay batch %d: read %d records between the logged positions, the log says %d: the input changed under the checkpoint", entry.BatchID, len(recs), entry.Rows)
	}
	res, err := r.processInMemory(*entry, recs)
	if err != nil {
		return fmt.Errorf("replay batch %d: %w", entry.BatchID, err)
	}
	if err := r.commit(ctx, *entry, recs, res, nil); err != nil {
		return err
	}
	counts := countRecords(recs)
	r.sum.count(counts)
	if err := r.publish(*entry, recs, counts, res, r.engine.SourceMarks(frozen), 0); err != nil {
		return err
	}
	return r.openSources(ctx, entry.End)
}

// readUntil reads from s every record before the end position: the records
// a logged batch held. Files that appeared since (not in end) and bytes past
// end's offsets are read and discarded; the caller reopens at end.
func readUntil(ctx context.Context, s ingest.Source, dst []tidemark.Record, end ingest.Position, want int) ([]tidemark.Record, error) {
	// By file identity where the position has one (a file renamed or
	// compressed since the batch was logged is the same file), by path for
	// a batch logged before file identity.
	byID := make(map[string]int64, len(end.Files))
	byPath := make(map[string]int64, len(end.Files))
	for _, f := range end.Files {
		if f.ID != "" {
			byID[f.ID] = max(byID[f.ID], f.Offset)
		} else {
			byPath[f.Path] = f.Offset
		}
	}
	limit := func(rec *tidemark.Record) (int64, bool) {
		if off, ok := byID[rec.FileID]; ok && rec.FileID != "" {
			return off, true
		}
		off, ok := byPath[rec.File]
		return off, ok
	}
	var chunk []tidemark.Record
	for got := 0; got < want; {
		var err error
		chunk, err = s.Read(ctx, chunk[:0], min(4096, want-got))
		if err != nil {
			return dst, err
		}
		if len(chunk) == 0 {
			return dst, nil
		}
		for _, rec := range chunk {
			if off, ok := limit(&rec); ok && rec.Offset < off {
				dst = append(dst, rec)
				got++
			}
		}
	}
	return dst, nil
}
