package lake

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"tidemark"
	"tidemark/lake/delta"
)

// WindowRow is one row of window_results: a window's aggregate for one key
// and how it got there.
//
// The table keeps count, sum, min and max; Agg.Values is not stored, so a
// row read back has Values = Count when sum is non-null and 0 otherwise.
type WindowRow struct {
	tidemark.Result
	Origin     string // "stream" or "batch"
	Revision   int64  // 1 at first emission, +1 per correction
	ComputedAt int64  // µs
	Watermark  *int64 // W when emitted; nil for batch
	// Shard is the stream id a window_partials row belongs to; "" in
	// window_results, whose rows are the merge of every shard's.
	Shard string
	// Aggs are the --agg aggregates' values, in the lake's list order;
	// nil means "from Result.State" (the stream's estimates), which
	// writing fills in. Rows read back have them as stored.
	Aggs []tidemark.AggOut
	// Exact: Aggs were computed from every raw row (batch, reconcile),
	// not estimated from the sketches of Result.State.
	Exact bool
}

// Origins of window rows.
const (
	OriginStream = "stream"
	OriginBatch  = "batch"
)

// windowID identifies a row of window_results: at every version each
// appears at most once.
type windowID struct {
	start, end int64
	key        tidemark.Key
	shard      string // window_partials only
}

func (r *WindowRow) id() windowID { return windowID{r.Window.Start, r.Window.End, r.Key, r.Shard} }

// partition returns the partition values of the row in table h.
func (h *handle) partition(r *WindowRow) map[string]*string {
	pv := map[string]*string{h.def.phys("window_date"): strp(dateOf(r.Window.Start))}
	if h.def.name == TableWindowPartials {
		pv[h.def.phys(colShard)] = strp(r.Shard)
	}
	return pv
}

// partitionDir renders partition values as the directory of their files,
// in the table's partition column order.
func (h *handle) partitionDir(pv map[string]*string) string {
	parts := make([]string, len(h.def.partCols))
	for i, c := range h.def.partCols {
		parts[i] = c + "=" + *pv[c]
	}
	return strings.Join(parts, "/")
}

func sortWindowRows(rows []WindowRow) {
	slices.SortFunc(rows, compareRows)
}

// compareRows orders window rows of one partition by window and key.
func compareRows(a, b WindowRow) int { return tidemark.CompareResults(a.Result, b.Result) }

// partRows are the rows to upsert into one partition of a window table,
// sorted by window and key, one per key.
type partRows struct {
	pv     map[string]*string
	rows   []WindowRow
	remove []WindowRow // rows to delete, sorted likewise (mergeSpec.remove)
	// shared: rows is part of the caller's slice (it came sorted), copied
	// before a revision in it changes, so a retried attempt and the caller
	// see the rows as given.
	shared bool
}

// probe returns the rows a file must be able to hold to take part in the
// upsert of p, sorted by window start: the new and the removed ones.
func (p *partRows) probe() []WindowRow {
	if len(p.remove) == 0 {
		return p.rows
	}
	return mergeSorted(p.rows, p.remove)
}

// withRemovals joins the partitions of the rows to remove (grouped as
// groupByPartition groups) to those of the new rows, in partition order.
func (h *handle) withRemovals(parts, removals []partRows) []partRows {
	if len(removals) == 0 {
		return parts
	}
	byDir := make(map[string]int, len(parts))
	for i := range parts {
		byDir[h.partitionDir(parts[i].pv)] = i
	}
	for _, r := range removals {
		if i, ok := byDir[h.partitionDir(r.pv)]; ok {
			parts[i].remove = r.rows
			continue
		}
		parts = append(parts, partRows{pv: r.pv, remove: r.rows})
	}
	slices.SortFunc(parts, func(a, b partRows) int { return strings.Compare(h.partitionDir(a.pv), h.partitionDir(b.pv)) })
	return parts
}

// groupByPartition groups rows into their partitions of table h (by
// window_date, and shard in window_partials), each sorted by window and key
// with the last row of a key kept: partition values are made per
// partition, not per row, and nothing is hashed. Rows that come sorted are
// not copied (partRows.shared): copying a drain's 222k rows, pointers and
// all, was ~0.3 CPU-s of a per-user run, and an emission of new windows
// changes none of them.
func (h *handle) groupByPartition(rows []WindowRow) []partRows {
	partials := h.def.name == TableWindowPartials
	compare := func(a, b *WindowRow) int {
		if partials {
			if c := strings.Compare(a.Shard, b.Shard); c != 0 {
				return c
			}
		}
		return tidemark.CompareResults(a.Result, b.Result)
	}
	sorted := true
	for i := 1; i < len(rows) && sorted; i++ {
		sorted = compare(&rows[i-1], &rows[i]) < 0
	}
	out := rows
	if !sorted { // the usual case is sorted: an engine emits in this order
		idx := make([]int, len(rows))
		for i := range idx {
			idx[i] = i
		}
		slices.SortFunc(idx, func(a, b int) int { return cmp.Or(compare(&rows[a], &rows[b]), cmp.Compare(a, b)) })
		out = make([]WindowRow, 0, len(rows))
		for k, i := range idx {
			if k+1 < len(idx) && compare(&rows[i], &rows[idx[k+1]]) == 0 {
				continue // a later row of the same key wins
			}
			out = append(out, rows[i])
		}
	}
	var parts []partRows
	for lo := 0; lo < len(out); {
		day := tidemark.FloorDiv(out[lo].Window.Start, tidemark.MicrosPerDay)
		hi := lo + 1
		for hi < len(out) && tidemark.FloorDiv(out[hi].Window.Start, tidemark.MicrosPerDay) == day && (!partials || out[hi].Shard == out[lo].Shard) {
			hi++
		}
		parts = append(parts, partRows{pv: h.partition(&out[lo]), rows: out[lo:hi:hi], shared: sorted})
		lo = hi
	}
	return parts
}

// replaceRows walks old (one file's rows of a partition) beside news (the
// partition's new rows, sorted): an old row no new row replaces is appended
// to kept; with bump, a new row that replaces one gets its revision from it
// (nextRevision), in a copy of news.rows if they are shared.
func replaceRows(news *partRows, old, kept []WindowRow, bump bool) []WindowRow {
	if !slices.IsSortedFunc(old, compareRows) { // a file tidemark did not write
		sortWindowRows(old)
	}
	j := 0
	for i := range old {
		for j < len(news.rows) && compareRows(news.rows[j], old[i]) < 0 {
			j++
		}
		if j < len(news.rows) && compareRows(news.rows[j], old[i]) == 0 {
			if rev := nextRevision(&old[i], &news.rows[j]); bump && rev != news.rows[j].Revision {
				if news.shared {
					news.rows, news.shared = slices.Clone(news.rows), false
				}
				news.rows[j].Revision = rev
			}
			continue
		}
		kept = append(kept, old[i])
	}
	return kept
}

// mergeSorted returns news and kept (disjoint keys) as one slice sorted by
// window and key; news is sorted, kept sorted per file it came from.
func mergeSorted(news, kept []WindowRow) []WindowRow {
	if len(kept) == 0 {
		return news
	}
	if !slices.IsSortedFunc(kept, compareRows) {
		sortWindowRows(kept)
	}
	out := make([]WindowRow, 0, len(news)+len(kept))
	i, j := 0, 0
	for i < len(news) && j < len(kept) {
		if compareRows(news[i], kept[j]) < 0 {
			out = append(out, news[i])
			i++
		} else {
			out = append(out, kept[j])
			j++
		}
	}
	out = append(out, news[i:]...)
	return append(out, kept[j:]...)
}

// writeWindowRows writes rows (all of the partition pv) as one file of the
// window table h (window_results or window_partials).
func (l *Lake) writeWindowRows(ctx context.Context, h *handle, rows []WindowRow, pv map[string]*string) (addFile, error) {
	t := h.def
	w, err := newFileWriter(t)
	if err != nil {
		return addFile{}, err
	}
	keyCol := t.keyCols()
	cStart, cEnd, cCount := t.col("window_start"), t.col("window_end"), t.col("count")
	cSum, cMin, cMax, cFinal := t.col("sum"), t.col("min"), t.col("max"), t.col("final")
	cOrigin, cRev, cComputed, cWM := t.col("origin"), t.col("revision"), t.col("computed_at"), t.col("watermark")
	aggs := l.cfg.Aggs
	cExact, cState := -1, -1
	if !aggs.Empty() {
		cExact, cState = t.col(ColExact), t.col(ColAggState)
	}
	var state []byte
	for i := range rows {
		r := &rows[i]
		if cExact >= 0 {
			vals := r.Aggs
			if vals == nil {
				vals = aggs.Values(r.State)
			}
			for j, c := range t.user {
				if j < len(vals) && vals[j].Valid {
					if aggs.Specs[j].Integer() {
						w.long(c, int64(vals[j].V))
					} else {
						w.double(c, vals[j].V)
					}
				} else {
					w.null(c)
				}
			}
			w.boolean(cExact, r.Exact)
			if r.State != nil {
				// One buffer per row: the writer keeps the bytes until
				// the chunk is encoded.
				if state, err = r.State.AppendBinary(nil); err != nil {
					w.abort()
					return addFile{}, fmt.Errorf("encode the aggregate state of window %d key %s: %w", r.Window.Start, r.Key, err)
				}
				w.bytes(cState, state)
			} else {
				w.null(cState)
			}
		}
		w.long(cStart, r.Window.Start)
		w.long(cEnd, r.Window.End)
		w.key(keyCol, r.Key)
		w.long(cCount, r.Agg.Count)
		has := r.Agg.Values > 0
		w.optDouble(cSum, r.Agg.Total(), has)
		w.optDouble(cMin, r.Agg.Min, has)
		w.optDouble(cMax, r.Agg.Max, has)
		w.boolean(cFinal, r.Final)
		w.str(cOrigin, r.Origin)
		w.long(cRev, r.Revision)
		w.long(cComputed, r.ComputedAt)
		if r.Watermark != nil {
			w.long(cWM, *r.Watermark)
		} else {
			w.null(cWM)
		}
		if err := w.endRow(); err != nil {
			w.abort()
			return addFile{}, err
		}
	}
	f, err := w.finish(ctx, l.st, h.partitionDir(pv))
	if err != nil {
		return addFile{}, err
	}
	return addFile{dataFile: f, pv: pv}, nil
}

// readWindowRows reads every row of one file of the window table h; rows of
// window_partials get their shard from the file's partition.
func (l *Lake) readWindowRows(ctx context.Context, h *handle, a *delta.Add) ([]WindowRow, error) {
	t := h.def
	var shard string
	if s := a.PartitionValues[l.phys(colShard)]; s != nil && t.name == TableWindowPartials {
		shard = *s
	}
	fr, err := openFileReader(ctx, l.st, a.Key(h.dt.Path()))
	if err != nil {
		return nil, err
	}
	defer fr.Close()
	data := make([]colData, len(t.cols))
	keyCol := t.keyCols()
	var out []WindowRow
	var kb []byte
	for rg := range fr.numRowGroups() {
		n, err := fr.readRowGroup(rg, t.cols, data)
		if err != nil {
			return nil, err
		}
		col := func(name string) *colData { return &data[t.col(name)] }
		start, end, count := col("window_start"), col("window_end"), col("count")
		sum, mn, mx, final := col("sum"), col("min"), col("max"), col("final")
		origin, rev, computed, wm := col("origin"), col("revision"), col("computed_at"), col("watermark")
		var exact, state *colData
		if !l.cfg.Aggs.Empty() {
			exact, state = col(ColExact), col(ColAggState)
		}
		for i := range n {
			kb = kb[:0]
			for _, c := range keyCol {
				kb = appendKeyCol(kb, &data[c], t.cols[c].kind, i)
			}
			r := WindowRow{
				Result: tidemark.Result{
					Window: tidemark.Window{Start: start.ints[i], End: end.ints[i]},
					Key:    tidemark.Key(kb),
					Agg:    tidemark.Agg{Count: count.ints[i]},
					Final:  final.bools[i],
				},
				Origin:     string(origin.bytes[i]),
				Revision:   rev.ints[i],
				ComputedAt: computed.ints[i],
				Shard:      shard,
			}
			if !sum.isNull(i) {
				r.Agg.Values = r.Agg.Count
				r.Agg.Sum, r.Agg.Min, r.Agg.Max = sum.floats[i], mn.floats[i], mx.floats[i]
			}
			if !wm.isNull(i) {
				v := wm.ints[i]
				r.Watermark = &v
			}
			if exact != nil {
				if err := l.readAggs(&r, t, data, exact, state, i); err != nil {
					return nil, fmt.Errorf("read %s: %w", a.Path, err)
				}
			}
			out = append(out, r)
		}
	}
	return out, nil
}

// readAggs sets r's Aggs, Exact and State from row i of a window table's
// decoded columns.
func (l *Lake) readAggs(r *WindowRow, t *table, data []colData, exact, state *colData, i int) error {
	r.Aggs = make([]tidemark.AggOut, len(t.user))
	for j, c := range t.user {
		d := &data[c]
		switch {
		case d.isNull(i):
		case t.cols[c].kind == kindLong:
			r.Aggs[j] = tidemark.AggOut{V: float64(d.ints[i]), Valid: true}
		default:
			r.Aggs[j] = tidemark.AggOut{V: d.floats[i], Valid: true}
		}
	}
	r.Exact = exact.bools[i]
	if state.isNull(i) {
		return nil
	}
	s := new(tidemark.AggState)
	if err := s.UnmarshalBinary(state.bytes[i]); err != nil {
		return fmt.Errorf("window %d key %s: %w", r.Window.Start, r.Key, err)
	}
	if !l.cfg.Aggs.Fits(s) {
		return fmt.Errorf("window %d key %s: %w: its shape is not the lake's aggregate list's (%s)", r.Window.Start, r.Key, tidemark.ErrAggState, l.cfg.Aggs.Describe())
	}
	r.State = s
	return nil
}

// fileTimeRange returns a timestamp column's bounds of a file from its Delta stats, widened by the 1 ms the stats
// truncate away; ok=false when the stats do not say.
func fileTimeRange(a *delta.Add, col string) (lo, hi int64, ok bool) {
	if a.Stats == "" {
		return 0, 0, false
	}
	s, err := delta.ParseStats(a.Stats)
	if err != nil {
		return 0, 0, false
	}
	lo, ok1 := parseStatsTime(s.MinValues[col])
	hi, ok2 := parseStatsTime(s.MaxValues[col])
	if !ok1 || !ok2 {
		return 0, 0, false
	}
	return lo, hi + 1000, true
}

// dateBounds returns the window_date/event_date strings covering [from, to),
// "" for a side outside years 0001-9999 (unbounded).
func dateBounds(from, to int64) (lo, hi string) {
	const minUs, maxUs = -62135596800000000, 253402300799000000
	if from > minUs && from < maxUs {
		lo = dateOf(from)
	}
	if to > minUs && to < maxUs {
		hi = dateOf(to - 1)
	}
	return lo, hi
}

func inDates(d, lo, hi string) bool {
	return (lo == "" || d >= lo) && (hi == "" || d <= hi)
}

// Windows returns the window_results rows with window_start in [from, to)
// at version (<= 0: latest), sorted by window and key.
func (l *Lake) Windows(ctx context.Context, from, to int64, version int64) ([]WindowRow, error) {
	return l.windowsOf(ctx, l.tables[TableWindowResults], from, to, version)
}

// Partials returns the window_partials rows (every shard's own aggregates,
// Shard set) with window_start in [from, to) at version (<= 0: latest),
// sorted by window and key.
func (l *Lake) Partials(ctx context.Context, from, to int64, version int64) ([]WindowRow, error) {
	return l.windowsOf(ctx, l.tables[TableWindowPartials], from, to, version)
}

func (l *Lake) windowsOf(ctx context.Context, h *handle, from, to int64, version int64) ([]WindowRow, error) {
	if version <= 0 {
		version = -1
	}
	snap, err := h.dt.Snapshot(ctx, version)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", h.def.name, err)
	}
	lo, hi := dateBounds(from, to)
	var out []WindowRow
	for i := range snap.Files {
		a := &snap.Files[i]
		if d := a.PartitionValues[l.phys("window_date")]; d != nil && !inDates(*d, lo, hi) {
			continue
		}
		if flo, fhi, ok := fileTimeRange(a, l.phys("window_start")); ok && (fhi <= from || flo >= to) {
			continue
		}
		rows, err := l.readWindowRows(ctx, h, a)
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", h.def.name, err)
		}
		for _, r := range rows {
			if r.Window.Start >= from && r.Window.Start < to {
				out = append(out, r)
			}
		}
	}
	sortWindowRows(out)
	return out, nil
}

// AllFrom and AllTo are the widest [from, to) range, for Windows and
// ScanRaw: the root package's -infinity and +infinity.
const (
	AllFrom = tidemark.MinTime
	AllTo   = tidemark.MaxTime
)

// parseStatsTime reads a timestamp bound from Delta stats
// ("2026-01-01T10:00:00.000Z", or with an offset as Spark writes).
func parseStatsTime(v any) (int64, bool) {
	s, ok := v.(string)
	if !ok {
		return 0, false
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return 0, false
	}
	return t.UnixMicro(), true
}
