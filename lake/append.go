package lake

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"runtime/trace"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"tidemark"
	"tidemark/lake/delta"
)

// Batch is one stream micro-batch for the lake: its records (valid ones go
// to raw_events with their Status and Disorder, quarantined ones to
// quarantine) and the windows it emitted (upserted into window_results).
type Batch struct {
	AppID      string // the stream's id: the Delta txn appId
	BatchID    int64  // the txn version; a batch id already committed is skipped
	Records    []tidemark.Record
	Closed     []WindowRow
	IngestTime int64 // µs; 0 means the lake's clock
	// Watermark is the stream's W after the batch, if it has one. It is
	// recorded in the raw_events commit as a txn of its own appId
	// (WatermarkAppID), so reconcile knows which windows the stream has
	// closed even when it emitted nothing for them.
	Watermark *int64
}

// watermarkPrefix starts the appId of the txn recording a stream's watermark.
const watermarkPrefix = "tidemark-watermark:"

// WatermarkAppID is the txn appId under which raw_events records the
// watermark of the stream appID; the txn's version is the watermark in µs.
func WatermarkAppID(appID string) string { return watermarkPrefix + appID }

// StreamWatermark returns the highest watermark any stream recorded in
// raw_events (see Batch.Watermark).
func (l *Lake) StreamWatermark(ctx context.Context) (int64, bool, error) {
	snap, err := l.tables[TableRawEvents].dt.Snapshot(ctx, -1)
	if err != nil {
		return 0, false, fmt.Errorf("stream watermark: %w", err)
	}
	var w int64
	has := false
	for appID, txn := range snap.Txns {
		if strings.HasPrefix(appID, watermarkPrefix) && (!has || txn.Version > w) {
			w, has = txn.Version, true
		}
	}
	return w, has, nil
}

// addFile is a written data file and the partition it belongs to.
type addFile struct {
	dataFile
	pv map[string]*string
	// written, when set, is when writing it began, if that was before the
	// commit attempt that adds it (a prepared file): the writer grace
	// counts from then (checkAdds).
	written time.Time
}

func (a addFile) action(now int64, dataChange bool) delta.Action {
	return delta.Action{Add: &delta.Add{
		Path:             delta.EncodePath(a.Path),
		PartitionValues:  a.pv,
		Size:             a.Size,
		ModificationTime: now,
		DataChange:       dataChange,
		Stats:            a.Stats,
	}}
}

// AppendBatch writes one micro-batch: at most one commit per table, each
// with txn {AppID, BatchID}, so a replayed batch is a no-op in every table.
// A table that gets no rows from the batch gets no commit. The quarantine
// table is written and committed on a goroutine of its own while
// raw_events is (two tables, two logs: neither reads the other), so its
// file's and commit's fsyncs are not waited for one after the other;
// window_results follows both, so a reader that sees a batch's windows
// sees its raw rows too.
func (l *Lake) AppendBatch(ctx context.Context, b Batch) error {
	return l.CommitBatch(ctx, b, l.plan(b))
}

// Prepared is a batch's raw_events and quarantine data files, encoded
// ahead of its commits (PrepareBatch): the encoding, the bulk of a batch's
// work, then overlaps the commits of the batch before it. The files wait
// in the store's temp area, where no reader looks; the first commit
// attempt of their table stores them under their keys (the fsync a local
// file's publish waits for, or an S3 upload, is the committer's then) and
// commits them, or Discard throws them away.
type Prepared struct {
	ingest          int64
	valid, bad      []int
	started         time.Time // when the files began to be written
	raw, quarantine preparedFiles
}

// preparedFiles is one table's part of a Prepared.
type preparedFiles struct {
	staged []stagedAdd // none: nothing was prepared, or writing failed
	err    error       // writing them failed: CommitBatch writes them again
	used   bool        // handed to a commit attempt, which owns them from then on
}

// take publishes pf, p's files of one table, for the first commit attempt
// and returns them (ok false: there are none, and the attempt writes its
// own).
func (l *Lake) take(ctx context.Context, p *Prepared, pf *preparedFiles) (files []addFile, ok bool, err error) {
	if pf.used || pf.err != nil || len(pf.staged) == 0 {
		return nil, false, nil
	}
	pf.used = true
	files, err = l.publish(ctx, pf.staged)
	for i := range files {
		files[i].written = p.started
	}
	return files, true, err
}

// plan is a Prepared of b without files: its ingest time and which
// records go to which table.
func (l *Lake) plan(b Batch) *Prepared {
	p := &Prepared{ingest: b.IngestTime}
	if p.ingest == 0 {
		p.ingest = l.clock().UnixMicro()
	}
	p.valid, p.bad = splitValid(b.Records)
	return p
}

// PrepareBatch writes the data files of b's raw_events and quarantine rows
// (both tables at once) without storing or committing them. b.IngestTime
// must be set: the files carry it. A failure is not returned here:
// CommitBatch writes the files again, and fails there if it fails again.
func (l *Lake) PrepareBatch(ctx context.Context, b Batch) *Prepared {
	p := l.plan(b)
	p.started = l.clock()
	var wg sync.WaitGroup
	if len(p.bad) > 0 {
		wg.Go(func() {
			defer trace.StartRegion(ctx, "prepare quarantine").End()
			p.quarantine.staged, p.quarantine.err = l.stageQuarantine(b.Records, p.bad, p.ingest, b.BatchID)
		})
	}
	if len(p.valid) > 0 {
		region := trace.StartRegion(ctx, "prepare raw_events")
		p.raw.staged, p.raw.err = l.stageRaw(ctx, b.Records, p.valid, p.ingest, b.BatchID)
		region.End()
	}
	wg.Wait()
	return p
}

// Discard throws away the prepared files no commit took: those of a batch
// that will not be committed (an earlier batch failed), or left over.
func (l *Lake) Discard(p *Prepared) {
	if p == nil {
		return
	}
	for _, pf := range []*preparedFiles{&p.raw, &p.quarantine} {
		if !pf.used {
			pf.used = true
			dropAll(pf.staged)
		}
	}
}

// splitValid returns the indexes of the valid records (raw_events) and of
// the quarantined ones.
func splitValid(recs []tidemark.Record) (valid, bad []int) {
	valid = make([]int, 0, len(recs))
	for i := range recs {
		if recs[i].Valid() {
			valid = append(valid, i)
		} else {
			bad = append(bad, i)
		}
	}
	return valid, bad
}

// CommitBatch is AppendBatch with the data files p prepared, which the
// first commit attempt of each table adds; a later attempt (a lost race, a
// file gone) writes them again from b's records, so they must still be
// there. Prepared files no attempt took are thrown away.
func (l *Lake) CommitBatch(ctx context.Context, b Batch, p *Prepared) error {
	defer l.Discard(p)
	txn := &delta.Txn{AppID: b.AppID, Version: b.BatchID}
	params := map[string]string{"outputMode": "Append", "queryId": b.AppID, "epochId": strconv.FormatInt(b.BatchID, 10)}
	var quarantined sync.WaitGroup
	var qErr error
	if len(p.bad) > 0 {
		quarantined.Go(func() {
			h := l.tables[TableQuarantine]
			widen, err := l.widen(ctx, h)
			if err != nil {
				qErr = err
				return
			}
			qErr = l.appendTable(ctx, h, txn, widen, "STREAMING UPDATE", params, func() ([]addFile, error) {
				if files, ok, err := l.take(ctx, p, &p.quarantine); ok {
					return files, err
				}
				return l.writeQuarantine(ctx, b.Records, p.bad, p.ingest, b.BatchID)
			})
			if qErr == nil && widen != nil {
				h.wide.Store(true)
			}
		})
	}
	rawErr := l.appendRaw(ctx, b, txn, params, p)
	quarantined.Wait()
	if err := oneLine(rawErr, qErr); err != nil {
		return fmt.Errorf("append batch %d: %w", b.BatchID, err)
	}
	if len(b.Closed) > 0 {
		if err := l.emitWindows(ctx, b, txn, p.ingest, params); err != nil {
			return fmt.Errorf("append batch %d: %w", b.BatchID, err)
		}
	}
	return nil
}

// appendRaw commits the batch's valid records (p.valid) to raw_events,
// with the stream's watermark txn; the first attempt adds p's files if
// any.
func (l *Lake) appendRaw(ctx context.Context, b Batch, txn *delta.Txn, params map[string]string, p *Prepared) error {
	if len(p.valid) == 0 {
		return nil
	}
	h := l.tables[TableRawEvents]
	extra, err := l.widen(ctx, h)
	if err != nil {
		return err
	}
	widened := extra != nil
	if b.Watermark != nil {
		extra = append(extra, delta.Action{Txn: &delta.Txn{AppID: WatermarkAppID(b.AppID), Version: *b.Watermark, LastUpdated: p.ingest / 1000}})
	}
	err = l.appendTable(ctx, h, txn, extra, "STREAMING UPDATE", params, func() ([]addFile, error) {
		if files, ok, err := l.take(ctx, p, &p.raw); ok {
			return files, err
		}
		return l.writeRaw(ctx, b.Records, p.valid, p.ingest, b.BatchID)
	})
	if err == nil && widened {
		h.wide.Store(true)
	}
	return err
}

// widen returns the metaData action that adds the columns a table written
// by an older tidemark lacks (file_id) to its Delta schema, nullable
// (widenSchema), or nil when it has them all; it looks once per Lake.
func (l *Lake) widen(ctx context.Context, h *handle) ([]delta.Action, error) {
	if h.wide.Load() {
		return nil, nil
	}
	a, err := l.widenSchema(ctx, h)
	if err == nil && a == nil {
		h.wide.Store(true)
	}
	return a, err
}

// appendTable commits the files write produces, plus the extra actions, as
// a blind append with txn, unless the table already holds txn (then write
// is not even called). Files gone before the commit are written again
// (see update).
func (l *Lake) appendTable(ctx context.Context, h *handle, txn *delta.Txn, extra []delta.Action, op string, params map[string]string, write func() ([]addFile, error)) error {
	_, err := l.update(ctx, h, func(snap *delta.Snapshot) (*delta.Transaction, []addFile, error) {
		if snap == nil {
			return nil, nil, fmt.Errorf("table missing")
		}
		if v, ok := snap.TxnVersion(txn.AppID); ok && v >= txn.Version {
			return nil, nil, nil
		}
		files, err := write()
		if err != nil {
			return nil, files, err
		}
		now := l.clock().UnixMilli()
		var rows, size int64
		actions := make([]delta.Action, len(files), len(files)+len(extra))
		for i, f := range files {
			actions[i] = f.action(now, true)
			rows += f.Rows
			size += f.Size
		}
		actions = append(actions, extra...)
		return &delta.Transaction{
			Actions:             actions,
			Operation:           op,
			OperationParameters: params,
			OperationMetrics:    metrics(len(files), rows, size),
			Txn:                 txn,
		}, files, nil
	})
	if err != nil && !errors.Is(err, delta.ErrAlreadyCommitted) {
		return fmt.Errorf("append %s: %w", h.def.name, err)
	}
	return nil
}

func metrics(files int, rows, bytes int64) map[string]string {
	return map[string]string{
		"numFiles":       strconv.Itoa(files),
		"numOutputRows":  strconv.FormatInt(rows, 10),
		"numOutputBytes": strconv.FormatInt(bytes, 10),
	}
}

// discard deletes data files that no commit references.
func (l *Lake) discard(ctx context.Context, h *handle, files []addFile) {
	for _, f := range files {
		if err := l.st.Delete(ctx, h.dt.FileKey(f.Path)); err != nil {
			l.log.Warn("delete uncommitted data file", "table", h.def.name, "path", f.Path, "error", err)
		}
	}
}

// dateOf renders the UTC date of a µs timestamp as YYYY-MM-DD.
func dateOf(us int64) string {
	return time.Unix(tidemark.FloorDiv(us, tidemark.MicrosPerDay)*86400, 0).UTC().Format(time.DateOnly)
}

func strp(s string) *string { return &s }

// forEachKeyPart decodes a tidemark.Key without allocating, calling fn for
// each of n parts; parts the key lacks are null.
func forEachKeyPart(k tidemark.Key, n int, fn func(i int, v string, null bool)) {
	s := string(k)
	for i := range n {
		if len(s) == 0 || s[0] == 0 {
			fn(i, "", true)
			if len(s) > 0 {
				s = s[1:]
			}
			continue
		}
		ln, w := binary.Uvarint([]byte(s[1:min(len(s), 11)]))
		if w <= 0 || uint64(len(s)-1-w) < ln {
			fn(i, "", true)
			s = ""
			continue
		}
		start := 1 + w
		fn(i, s[start:start+int(ln)], false)
		s = s[start+int(ln):]
	}
}

// writeRaw writes the valid records, one file per event hour.
func (l *Lake) writeRaw(ctx context.Context, recs []tidemark.Record, idx []int, ingest, batchID int64) ([]addFile, error) {
	staged, err := l.stageRaw(ctx, recs, idx, ingest, batchID)
	if err != nil {
		return nil, err
	}
	return l.publish(ctx, staged)
}

// stagedAdd is a staged data file and the partition it belongs to.
type stagedAdd struct {
	*stagedFile
	pv map[string]*string
}

// publish stores the staged files, in order, and returns those it
// stored; after a failure the rest are dropped.
func (l *Lake) publish(ctx context.Context, staged []stagedAdd) ([]addFile, error) {
	out := make([]addFile, 0, len(staged))
	for i, f := range staged {
		if err := f.publish(ctx, l.st); err != nil {
			dropAll(staged[i+1:])
			return out, err
		}
		out = append(out, addFile{dataFile: f.dataFile, pv: f.pv})
	}
	return out, nil
}

// dropAll throws staged files away unpublished.
func dropAll(staged []stagedAdd) {
	for _, f := range staged {
		f.drop()
	}
}

// stageRaw writes the valid records, one file per event hour, up to
// staging them (stage); after a failure nothing it staged is left.
func (l *Lake) stageRaw(ctx context.Context, recs []tidemark.Record, idx []int, ingest, batchID int64) (out []stagedAdd, err error) {
	defer func() {
		if err != nil {
			dropAll(out)
			out = nil
		}
	}()
	t := l.tables[TableRawEvents].def
	hours, groups := byHour(recs, idx)
	for _, h := range hours {
		if err := ctx.Err(); err != nil {
			return out, err
		}
		rows := groups[h]
		w, err := newFileWriterIn(t, l.st, len(rows))
		if err != nil {
			return out, err
		}
		if err := w.fillRows(len(rows), l.rawFill(recs, rows, ingest, batchID)); err != nil {
			w.abort()
			return out, err
		}
		date := dateOf(h * tidemark.MicrosPerHour)
		hour := fmt.Sprintf("%02d", h-tidemark.FloorDiv(h, 24)*24)
		pDate, pHour := l.phys("event_date"), l.phys("event_hour")
		f, err := w.stage(l.st, pDate+"="+date+"/"+pHour+"="+hour)
		if err != nil {
			return out, err
		}
		out = append(out, stagedAdd{f, map[string]*string{pDate: strp(date), pHour: strp(hour)}})
		if len(out) > maxOpenStaged {
			// A batch spanning many hours: one descriptor per partition
			// would not be bounded.
			if err := f.park(); err != nil {
				return out, err
			}
		}
	}
	return out, nil
}

// rawFill returns the fill of fillRows for raw_events rows (indexes into
// recs): one pass over each chunk's records, appending to local slices.
func (l *Lake) rawFill(recs []tidemark.Record, rows []int, ingest, batchID int64) rowFill {
	t := l.tables[TableRawEvents].def
	cEvent, cArrival, cIngest := t.col("event_time"), t.col("arrival_time"), t.col("ingest_time")
	cStatus, cDisorder, cSource, cFile := t.col("status"), t.col("disorder_us"), t.col("source"), t.col("file")
	cOffset, cBatch, cPayload, cFileID := t.col("offset"), t.col("batch_id"), t.col("payload"), t.col(ColFileID)
	cValue := -1
	if l.cfg.ValueField != "" {
		cValue = t.col("value")
	}
	keyCol := t.keyCols()
	inputs := l.cfg.Aggs.Inputs
	return func(cols []*colBuf, lo, hi int) int64 {
		ev, ar, in := cols[cEvent].ints, cols[cArrival].ints, cols[cIngest].ints
		di, of, ba := cols[cDisorder].ints, cols[cOffset].ints, cols[cBatch].ints
		st, so, fi, pa := cols[cStatus].bytes, cols[cSource].bytes, cols[cFile].bytes, cols[cPayload].bytes
		var size int
		key := func(k int, v string, null bool) {
			b := cols[keyCol[k]]
			if !null {
				if kd := t.cols[keyCol[k]].kind; kd != kindString {
					// A typed key column (CheckKey let only fitting
					// text through; anything else is null).
					null = !b.appendKeyText(kd, v)
				}
			}
			if null {
				b.appendZero(t.cols[keyCol[k]].kind)
				b.null = append(b.null, true)
			} else {
				if t.cols[keyCol[k]].kind == kindString {
					b.bytes = append(b.bytes, strBytes(v))
					size += len(v)
				}
				if b.opt {
					b.null = append(b.null, false)
				}
			}
			b.n++
		}
		for _, i := range rows[lo:hi] {
			r := &recs[i]
			ev = append(ev, r.EventTime)
			ar = append(ar, r.Arrival)
			in = append(in, ingest)
			di = append(di, r.Disorder)
			of = append(of, r.Offset)
			ba = append(ba, batchID)
			s := r.Status.String()
			st = append(st, strBytes(s))
			so = append(so, strBytes(r.Source))
			fi = append(fi, strBytes(r.File))
			pa = append(pa, r.Payload)
			fileID(cols[cFileID], r.FileID)
			size += len(s) + len(r.Source) + len(r.File) + len(r.FileID) + len(r.Payload)
			if cValue >= 0 {
				b := cols[cValue]
				if r.HasValue {
					b.floats = append(b.floats, r.Value)
				} else {
					b.floats = append(b.floats, 0)
				}
				if b.opt || !r.HasValue {
					b.null = append(b.null, !r.HasValue)
				}
			}
			forEachKeyPart(r.Key, len(keyCol), key)
			for j, c := range t.user {
				var v tidemark.AggValue
				if j < len(r.Fields) {
					v = r.Fields[j]
				}
				b := cols[c]
				switch {
				case !v.Present:
					b.appendZero(t.cols[c].kind)
				case inputs[j].Text:
					b.bytes = append(b.bytes, strBytes(v.Text))
					size += len(v.Text)
				default:
					b.floats = append(b.floats, v.Num)
				}
				b.null = append(b.null, !v.Present) // optional columns
				b.n++
			}
		}
		cols[cEvent].ints, cols[cArrival].ints, cols[cIngest].ints = ev, ar, in
		cols[cDisorder].ints, cols[cOffset].ints, cols[cBatch].ints = di, of, ba
		cols[cStatus].bytes, cols[cSource].bytes, cols[cFile].bytes, cols[cPayload].bytes = st, so, fi, pa
		for _, c := range [...]int{cEvent, cArrival, cIngest, cDisorder, cOffset, cBatch, cStatus, cSource, cFile, cPayload} {
			cols[c].notNull(hi - lo)
		}
		if cValue >= 0 {
			cols[cValue].n += hi - lo
		}
		return int64(size)
	}
}

// byHour splits idx by event hour, hours in order. A batch's rows are
// often all of one hour: then idx itself is the group, not a copy.
func byHour(recs []tidemark.Record, idx []int) ([]int64, map[int64][]int) {
	hourOf := func(i int) int64 { return tidemark.FloorDiv(recs[i].EventTime, tidemark.MicrosPerHour) }
	if len(idx) == 0 {
		return nil, nil
	}
	h0 := hourOf(idx[0])
	if !slices.ContainsFunc(idx, func(i int) bool { return hourOf(i) != h0 }) {
		return []int64{h0}, map[int64][]int{h0: idx}
	}
	groups := map[int64][]int{}
	var hours []int64
	for _, i := range idx {
		h := hourOf(i)
		if _, ok := groups[h]; !ok {
			hours = append(hours, h)
		}
		groups[h] = append(groups[h], i)
	}
	slices.Sort(hours)
	return hours, groups
}

// writeQuarantine writes the quarantined records, one file per ingest date
// (one file: a batch has one ingest time).
func (l *Lake) writeQuarantine(ctx context.Context, recs []tidemark.Record, idx []int, ingest, batchID int64) ([]addFile, error) {
	staged, err := l.stageQuarantine(recs, idx, ingest, batchID)
	if err != nil {
		return nil, err
	}
	return l.publish(ctx, staged)
}

// stageQuarantine is writeQuarantine up to staging the file.
func (l *Lake) stageQuarantine(recs []tidemark.Record, idx []int, ingest, batchID int64) ([]stagedAdd, error) {
	t := l.tables[TableQuarantine].def
	w, err := newFileWriterIn(t, l.st, len(idx))
	if err != nil {
		return nil, err
	}
	if err := w.fillRows(len(idx), l.quarantineFill(recs, idx, ingest, batchID)); err != nil {
		w.abort()
		return nil, err
	}
	date := dateOf(ingest)
	pDate := l.phys("ingest_date")
	f, err := w.stage(l.st, pDate+"="+date)
	if err != nil {
		return nil, err
	}
	return []stagedAdd{{f, map[string]*string{pDate: strp(date)}}}, nil
}

// quarantineFill returns the fill of fillRows for quarantine rows
// (indexes into recs).
func (l *Lake) quarantineFill(recs []tidemark.Record, idx []int, ingest, batchID int64) rowFill {
	t := l.tables[TableQuarantine].def
	cReason, cError, cSource, cFile := t.col("reason"), t.col("error"), t.col("source"), t.col("file")
	cOffset, cIngest, cBatch, cPayload := t.col("offset"), t.col("ingest_time"), t.col("batch_id"), t.col("payload")
	cFileID := t.col(ColFileID)
	return func(cols []*colBuf, lo, hi int) int64 {
		str := func(c int, s string) {
			cols[c].bytes = append(cols[c].bytes, strBytes(s))
		}
		var size int
		for _, i := range idx[lo:hi] {
			r := &recs[i]
			str(cReason, string(r.Reason))
			str(cError, r.Err)
			str(cSource, r.Source)
			str(cFile, r.File)
			fileID(cols[cFileID], r.FileID)
			cols[cOffset].ints = append(cols[cOffset].ints, r.Offset)
			cols[cIngest].ints = append(cols[cIngest].ints, ingest)
			cols[cBatch].ints = append(cols[cBatch].ints, batchID)
			cols[cPayload].bytes = append(cols[cPayload].bytes, r.Payload)
			size += len(r.Reason) + len(r.Err) + len(r.Source) + len(r.File) + len(r.Payload)
		}
		for i, b := range cols {
			if i != cFileID {
				b.notNull(hi - lo)
			}
		}
		return int64(size)
	}
}

// fileID appends a record's file identity to the file_id column: null
// when the record has none.
func fileID(b *colBuf, id string) {
	b.bytes = append(b.bytes, strBytes(id))
	b.null = append(b.null, id == "")
	b.n++
}

// oneLine is errors.Join on one line: the stream's error is the last line
// of its stderr, and both tables' errors stay reachable by errors.Is/As.
func oneLine(a, b error) error {
	switch {
	case a == nil:
		return b
	case b == nil:
		return a
	}
	return fmt.Errorf("%w; %w", a, b)
}
