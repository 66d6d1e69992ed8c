package lake

import (
	"context"
	"fmt"
)

// QuarantineRow is one row of the quarantine table: a line that was not a
// valid event, and why.
type QuarantineRow struct {
	Reason     string
	Error      string
	Source     string
	File       string
	FileID     string // the file's identity; "" in rows written before file_id
	Offset     int64
	IngestTime int64
	BatchID    int64
	Payload    []byte // valid only during the callback
}

// ScanQuarantine calls fn with every quarantine row of the latest version,
// one file and row group at a time (bounded memory). Rows a requeue run has
// already added to raw_events and not yet removed here are left out
// (requeue.go), so no line is counted in both tables.
func (l *Lake) ScanQuarantine(ctx context.Context, fn func(QuarantineRow) error) error {
	h := l.tables[TableQuarantine]
	snap, err := h.dt.Snapshot(ctx, -1)
	if err != nil {
		return fmt.Errorf("scan quarantine: %w", err)
	}
	skip, err := l.inFlightRequeues(ctx, snap)
	if err != nil {
		return fmt.Errorf("scan quarantine: %w", err)
	}
	for i := range snap.Files {
		if err := ctx.Err(); err != nil {
			return err
		}
		err := l.readQuarantineFile(ctx, snap.Files[i].Key(h.dt.Path()), func(r QuarantineRow) error {
			if skip[r.ID()] {
				return nil
			}
			return fn(r)
		})
		if err != nil {
			return fmt.Errorf("scan quarantine: %w", err)
		}
	}
	return nil
}

// readQuarantineFile calls fn with every row of one quarantine data file.
func (l *Lake) readQuarantineFile(ctx context.Context, key string, fn func(QuarantineRow) error) error {
	h := l.tables[TableQuarantine]
	cols := h.def.cols
	data := make([]colData, len(cols))
	at := func(name string) *colData { return &data[h.def.col(name)] }
	fr, err := openFileReader(ctx, l.st, key)
	if err != nil {
		return err
	}
	defer fr.Close()
	for rg := range fr.numRowGroups() {
		n, err := fr.readRowGroup(rg, cols, data)
		if err != nil {
			return err
		}
		for r := range n {
			row := QuarantineRow{
				Reason:     string(at("reason").bytes[r]),
				Error:      string(at("error").bytes[r]),
				Source:     string(at("source").bytes[r]),
				File:       string(at("file").bytes[r]),
				FileID:     string(at(ColFileID).bytes[r]),
				Offset:     at("offset").ints[r],
				IngestTime: at("ingest_time").ints[r],
				BatchID:    at("batch_id").ints[r],
				Payload:    at("payload").bytes[r],
			}
			if err := fn(row); err != nil {
				return err
			}
		}
	}
	return nil
}
