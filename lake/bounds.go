package lake

import (
	"context"
	"fmt"

	"tidemark"
)

// EventTimeRange returns the smallest and the largest event time in
// raw_events (hi exclusive), from the files' Delta stats or, for a file
// without stats, its event_date/event_hour partition. ok is false when the
// table holds no rows.
func (l *Lake) EventTimeRange(ctx context.Context) (lo, hi int64, ok bool, err error) {
	h := l.tables[TableRawEvents]
	snap, err := h.dt.Snapshot(ctx, -1)
	if err != nil {
		return 0, 0, false, fmt.Errorf("event time range: %w", err)
	}
	for i := range snap.Files {
		a := &snap.Files[i]
		flo, fhi, fok := fileTimeRange(a, l.phys(ColEventTime))
		if !fok {
			d, hr := a.PartitionValues[l.phys("event_date")], a.PartitionValues[l.phys("event_hour")]
			if d == nil || hr == nil {
				continue
			}
			start, sok := hourStart(*d, *hr)
			if !sok {
				continue
			}
			flo, fhi = start, start+tidemark.MicrosPerHour
		}
		if !ok || flo < lo {
			lo = flo
		}
		if !ok || fhi > hi {
			hi = fhi
		}
		ok = true
	}
	return lo, hi, ok, nil
}

// WindowStartRange returns the smallest and the largest window_start in
// window_results (hi exclusive), from the files' Delta stats or, for a file
// without stats, its window_date partition (a whole day). ok is false when
// the table holds no rows. Reconcile widens its range by it, so a window
// whose raw rows were all lost (repair) is still found, at either end.
func (l *Lake) WindowStartRange(ctx context.Context) (lo, hi int64, ok bool, err error) {
	snap, err := l.tables[TableWindowResults].dt.Snapshot(ctx, -1)
	if err != nil {
		return 0, 0, false, fmt.Errorf("window start range: %w", err)
	}
	for i := range snap.Files {
		a := &snap.Files[i]
		flo, fhi, fok := fileTimeRange(a, l.phys("window_start"))
		if !fok {
			d := a.PartitionValues[l.phys("window_date")]
			if d == nil {
				continue
			}
			start, err := parseDate(*d)
			if err != nil {
				continue
			}
			flo, fhi = start, start+tidemark.MicrosPerDay
		}
		if !ok || flo < lo {
			lo = flo
		}
		if !ok || fhi > hi {
			hi = fhi
		}
		ok = true
	}
	return lo, hi, ok, nil
}
