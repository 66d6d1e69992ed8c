package lake

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"

	"tidemark"
	"tidemark/lake/delta"
)

// The questions the jobs above the lake (batch, reconcile) ask about its
// tables: which raw_events files a version holds per event hour, the txn
// versions recorded as progress, and the watermarks the streams left. They
// go through the lake's own table handles (its clock, logger and snapshot
// caches), so no job opens a Delta table or parses file stats itself.

// RawHour is what one event-hour partition of raw_events holds.
type RawHour struct {
	Start int64 // µs, the hour's first instant
	Files int64
	Bytes int64
}

// RawLayout is how raw_events is laid out at one version.
type RawLayout struct {
	// Version is the raw_events version the layout was read at.
	Version int64
	// Partitioned is false when some file sits outside an
	// event_date/event_hour partition (a table not written by tidemark);
	// Hours is then nil and only the totals below say what is there.
	Partitioned bool
	// Hours are the event hours holding files, sorted by Start.
	Hours []RawHour
	// Files, Bytes and Partitions count every file of the version and its
	// distinct partitions.
	Files, Bytes, Partitions int64
}

// RawLayout returns the layout of raw_events at version (<= 0: latest).
// A missing table has an empty layout at version 0.
func (l *Lake) RawLayout(ctx context.Context, version int64) (*RawLayout, error) {
	if version <= 0 {
		version = -1
	}
	snap, err := l.tables[TableRawEvents].dt.Snapshot(ctx, version)
	if errors.Is(err, delta.ErrNoTable) {
		return &RawLayout{Partitioned: true}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read raw events log: %w", err)
	}
	out := &RawLayout{Version: snap.Version, Partitioned: true}
	hours := map[int64]*RawHour{}
	parts := map[string]bool{}
	for i := range snap.Files {
		a := &snap.Files[i]
		out.Files++
		out.Bytes += a.Size
		if pk := fmt.Sprint(a.PartitionValues); !parts[pk] {
			parts[pk] = true
			out.Partitions++
		}
		if !out.Partitioned {
			continue
		}
		d, hr := a.PartitionValues[l.phys("event_date")], a.PartitionValues[l.phys("event_hour")]
		var start int64
		ok := d != nil && hr != nil
		if ok {
			start, ok = hourStart(*d, *hr)
		}
		if !ok {
			out.Partitioned = false
			continue
		}
		h := hours[start]
		if h == nil {
			h = &RawHour{Start: start}
			hours[start] = h
		}
		h.Files++
		h.Bytes += a.Size
	}
	if out.Partitioned {
		out.Hours = make([]RawHour, 0, len(hours))
		for _, h := range hours {
			out.Hours = append(out.Hours, *h)
		}
		slices.SortFunc(out.Hours, func(a, b RawHour) int { return cmp.Compare(a.Start, b.Start) })
	}
	return out, nil
}

// Version returns the latest version of a table (TableRawEvents, ...).
func (l *Lake) Version(ctx context.Context, table string) (int64, error) {
	snap, err := l.snapshot(ctx, table)
	if err != nil {
		return 0, err
	}
	return snap.Version, nil
}

// Txns returns the latest txn version per appId recorded in a table: the
// progress its writers recorded (a stream's batch ids, reconcile's runs).
func (l *Lake) Txns(ctx context.Context, table string) (map[string]int64, error) {
	snap, err := l.snapshot(ctx, table)
	if err != nil {
		return nil, err
	}
	out := make(map[string]int64, len(snap.Txns))
	for id, t := range snap.Txns {
		out[id] = t.Version
	}
	return out, nil
}

// RecordTxn commits a txn-only version to a table: appID has reached
// version. A version already recorded at or above it is fine (nothing is
// committed), as is a racing writer that recorded it first.
func (l *Lake) RecordTxn(ctx context.Context, table, appID string, version int64) error {
	h, err := l.handle(table)
	if err != nil {
		return err
	}
	_, err = h.dt.Update(ctx, func(snap *delta.Snapshot) (*delta.Transaction, error) {
		if snap == nil {
			return nil, fmt.Errorf("%s missing", table)
		}
		if v, ok := snap.TxnVersion(appID); ok && v >= version {
			return nil, nil
		}
		return &delta.Transaction{
			Operation:           "SET TRANSACTION",
			OperationParameters: map[string]string{"appId": appID, "version": fmt.Sprint(version)},
			Txn:                 &delta.Txn{AppID: appID, Version: version},
		}, nil
	})
	if err != nil && !errors.Is(err, delta.ErrAlreadyCommitted) {
		return fmt.Errorf("record %s=%d: %w", appID, version, err)
	}
	return nil
}

// WindowsWatermark returns the highest watermark recorded in
// window_results, from the files' Delta stats (no data read). The stats keep
// milliseconds, truncated, so the value may be up to 1 ms low. A file
// without usable stats has its window_date partition read instead.
func (l *Lake) WindowsWatermark(ctx context.Context) (int64, bool, error) {
	snap, err := l.tables[TableWindowResults].dt.Snapshot(ctx, -1)
	if err != nil {
		return 0, false, fmt.Errorf("read window results log: %w", err)
	}
	var w int64
	has := false
	note := func(v int64) {
		if !has || v > w {
			w, has = v, true
		}
	}
	for i := range snap.Files {
		a := &snap.Files[i]
		s, err := delta.ParseStats(a.Stats)
		if a.Stats == "" || err != nil {
			v, ok, err := l.watermarkOfFile(ctx, a)
			if err != nil {
				return 0, false, err
			}
			if ok {
				note(v)
			}
			continue
		}
		if v, ok := parseStatsTime(s.MaxValues[l.phys("watermark")]); ok {
			note(v)
		}
	}
	return w, has, nil
}

// watermarkOfFile reads the rows of a window_results partition when a file
// has no stats.
func (l *Lake) watermarkOfFile(ctx context.Context, a *delta.Add) (int64, bool, error) {
	d := a.PartitionValues[l.phys("window_date")]
	if d == nil {
		return 0, false, nil
	}
	from, err := parseDate(*d)
	if err != nil {
		return 0, false, nil
	}
	rows, err := l.Windows(ctx, from, from+tidemark.MicrosPerDay, 0)
	if err != nil {
		return 0, false, err
	}
	var w int64
	has := false
	for _, r := range rows {
		if r.Watermark != nil && (!has || *r.Watermark > w) {
			w, has = *r.Watermark, true
		}
	}
	return w, has, nil
}

func (l *Lake) handle(table string) (*handle, error) {
	h := l.tables[table]
	if h == nil {
		return nil, fmt.Errorf("lake: no table %q", table)
	}
	return h, nil
}

func (l *Lake) snapshot(ctx context.Context, table string) (*delta.Snapshot, error) {
	h, err := l.handle(table)
	if err != nil {
		return nil, err
	}
	snap, err := h.dt.Snapshot(ctx, -1)
	if err != nil {
		return nil, fmt.Errorf("read %s log: %w", table, err)
	}
	return snap, nil
}
