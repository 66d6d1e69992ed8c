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
	if len(recs) > entry.Rows {
		return fmt.Errorf("replay batch %d: read %d records between the logged positions, the log says %d: the input changed under the checkpoint", entry.BatchID, len(recs), entry.Rows)
	}
	if len(recs) < entry.Rows {
		if err := r.shortReplay(*entry, len(recs)); err != nil {
			return err
		}
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

// shortReplay decides about a replayed batch that found fewer lines than
// it logged. Every source was read to its end (readUntil stops only there),
// so the missing lines are no longer in the input: a file truncated below
// the batch's end offset since it was read — copytruncate's window between
// its copy and its truncation — or deleted. Nothing can bring those lines
// back and they were never committed, so the batch is committed with the
// lines that are still there and the loss is named; refusing to start would
// stop ingestion for good. An unreadable path may still hold them, so then
// the replay waits for the operator instead (an error naming it).
func (r *runner) shortReplay(entry offsetsEntry, got int) error {
	for _, s := range r.sources {
		if sk, ok := s.(ingest.Skipper); ok {
			if u := sk.Unreadable(); len(u) > 0 {
				return fmt.Errorf("replay batch %d: read %d of the %d records it logged, and %s cannot be read now (%s): make it readable and start again", entry.BatchID, got, entry.Rows, u[0].Path, u[0].Error)
			}
		}
	}
	var short []string
	for _, s := range r.sources {
		var end ingest.Position
		if err := json.Unmarshal(entry.End[s.Name()], &end); err != nil {
			return fmt.Errorf("replay batch %d: end position of %s: %w", entry.BatchID, s.Name(), err)
		}
		now := s.Position()
		for _, f := range end.Files {
			if at, ok := readTo(now, f); !ok {
				short = append(short, fmt.Sprintf("%s: gone", f.Path))
			} else if at < f.Offset {
				short = append(short, fmt.Sprintf("%s: ends at byte %d, the batch read to %d", f.Path, at, f.Offset))
			}
		}
	}
	r.cfg.Logger.Warn("replayed batch lost lines that are no longer in the input (a file truncated or deleted since it was read, as copytruncate does between its copy and its truncation); committing the lines still there",
		"batch", entry.BatchID, "logged", entry.Rows, "found", got, "lost", entry.Rows-got, "files", short)
	return nil
}

// readTo is how far the source has read the file f of a logged position
// (by identity, or by path for a position without one).
func readTo(now ingest.Position, f ingest.FilePosition) (int64, bool) {
	for _, g := range now.Files {
		if (f.ID != "" && g.ID == f.ID) || (f.ID == "" && g.Path == f.Path) {
			return g.Offset, true
		}
	}
	return 0, false
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
