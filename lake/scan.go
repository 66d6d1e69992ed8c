package lake

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	"tidemark"
	"tidemark/lake/delta"
)

// Raw column names a RawQuery can ask for. "key" stands for all key columns.
const (
	ColEventTime   = "event_time"
	ColArrivalTime = "arrival_time"
	ColIngestTime  = "ingest_time"
	ColKey         = "key"
	ColValue       = "value"
	ColStatus      = "status"
	ColDisorder    = "disorder_us"
	ColSource      = "source"
	ColFile        = "file"
	ColFileID      = "file_id" // the file's identity; "" where null (rows written before it)
	ColOffset      = "offset"
	ColBatchID     = "batch_id"
	ColPayload     = "payload"
	// ColFields stands for the --agg inputs' columns (RawBatch.Fields).
	ColFields = "fields"
)

// WindowColumns are the columns a window recomputation needs.
// (ColFields reads nothing in a lake without --agg.)
var WindowColumns = []string{ColEventTime, ColKey, ColValue, ColStatus, ColFields}

var allRawColumns = []string{ColEventTime, ColArrivalTime, ColIngestTime, ColKey, ColValue, ColStatus, ColDisorder, ColSource, ColFile, ColFileID, ColOffset, ColBatchID, ColPayload, ColFields}

// TimeRange bounds event time to [From, To) when Bounded; the zero
// TimeRange is every time. No value of From or To means "no bound": events
// at and before the epoch (0 and negative µs) are ordinary events.
type TimeRange struct {
	From, To int64
	Bounded  bool
}

// Between is the event time range [from, to).
func Between(from, to int64) TimeRange { return TimeRange{From: from, To: to, Bounded: true} }

// bounds returns the range as [from, to), AllFrom/AllTo when unbounded.
func (r TimeRange) bounds() (from, to int64) {
	if !r.Bounded {
		return AllFrom, AllTo
	}
	return r.From, r.To
}

// RawQuery selects raw_events rows.
type RawQuery struct {
	// Time bounds event time; the zero value reads every row.
	Time TimeRange
	// Columns to fill in RawBatch (Col* names); nil means all.
	Columns []string
	// Status is "" (any), "ok" or "late".
	Status string
	// MinCommitVersion keeps only rows in files added after that version of
	// raw_events (0: all files), for reconcile's "late rows since my last run".
	MinCommitVersion int64
	// Version is the raw_events version to read; <= 0 means the latest.
	Version int64
}

// RawBatch is a chunk of raw_events rows, columnar. Only the requested
// columns are filled (the others are nil); all filled slices have length N.
// The slices are reused: they are valid only during the callback.
type RawBatch struct {
	N           int
	EventTime   []int64
	ArrivalTime []int64
	IngestTime  []int64
	Key         []tidemark.Key
	Value       []float64
	HasValue    []bool
	Status      []tidemark.Status
	Disorder    []int64
	Source      []string
	File        []string
	FileID      []string // "" where null: rows written before the column
	Offset      []int64
	BatchID     []int64
	Payload     [][]byte
	// Fields are the --agg inputs' values (ColFields): one slice per
	// input of the lake's tidemark.AggList, N values each.
	Fields [][]tidemark.AggValue
	// Version is the raw_events version read.
	Version int64
}

// ScanRaw calls fn with the matching raw_events rows, one chunk per row
// group (bounded memory). Partitions are pruned by event_date/event_hour from
// the log, files by their stats, row groups by their footer statistics, and
// only the requested columns are decoded.
func (l *Lake) ScanRaw(ctx context.Context, q RawQuery, fn func(RawBatch) error) error {
	h := l.tables[TableRawEvents]
	if q.Status != "" && q.Status != "ok" && q.Status != "late" {
		return fmt.Errorf("scan raw events: status %q: want ok or late", q.Status)
	}
	version := q.Version
	if version <= 0 {
		version = -1
	}
	snap, err := h.dt.Snapshot(ctx, version)
	if err != nil {
		return fmt.Errorf("scan raw events: %w", err)
	}
	files := snap.Files
	if q.MinCommitVersion > 0 {
		old, err := h.dt.Snapshot(ctx, q.MinCommitVersion)
		switch {
		case errors.Is(err, delta.ErrVersionExpired):
			// The log no longer reaches back that far: every file may be
			// newer, so every file is scanned (more work, nothing missed).
			l.log.Warn("raw_events version older than the log retention; scanning every file", "version", q.MinCommitVersion)
		case err != nil:
			return fmt.Errorf("scan raw events since version %d: %w", q.MinCommitVersion, err)
		default:
			before := make(map[string]bool, len(old.Files))
			for _, a := range old.Files {
				before[a.Path] = true
			}
			files = slices.DeleteFunc(slices.Clone(files), func(a delta.Add) bool { return before[a.Path] })
		}
	}
	s, err := l.newRawScanner(q)
	if err != nil {
		return err
	}
	var keys []string
	for i := range files {
		if a := &files[i]; s.wantFile(a) {
			keys = append(keys, a.Key(h.dt.Path()))
		}
	}
	if err := s.run(ctx, keys, snap.Version, fn); err != nil {
		return fmt.Errorf("scan raw events: %w", err)
	}
	return nil
}

// scanBufs is the state of one decoded row group on its way to fn: the
// decoded columns and the batch cut from them, with their scratch.
type scanBufs struct {
	data  []colData
	batch RawBatch
	kb    []byte
	sel   []int
	// own keeps the batch's own buffers, which fill reuses when it copies
	// (it hands colData slices over when every row is selected).
	own           RawBatch
	boolScratch   []bool
	statusScratch []bool
	strScratch    []string
	keyScratch    []tidemark.Key
	err           error // instead of a batch: the scan failed
}

// scanDepth is how many row groups are decoded ahead of fn.
const scanDepth = 2

// run decodes the row groups of the files on one goroutine, up to
// scanDepth ahead, while fn consumes the batches in order on the caller's.
func (s *rawScanner) run(ctx context.Context, keys []string, version int64, fn func(RawBatch) error) error {
	free := make(chan *scanBufs, scanDepth+1)
	for range scanDepth + 1 {
		free <- &scanBufs{data: s.newColData()}
	}
	out := make(chan *scanBufs, scanDepth)
	done := make(chan struct{})
	var producer sync.WaitGroup
	producer.Go(func() {
		defer close(out)
		send := func(b *scanBufs) bool {
			select {
			case out <- b:
				return true
			case <-done:
				return false
			}
		}
		for _, key := range keys {
			if err := ctx.Err(); err != nil {
				send(&scanBufs{err: err})
				return
			}
			stopped, err := s.scanFile(ctx, key, version, free, send)
			if err != nil {
				send(&scanBufs{err: err})
			}
			if err != nil || stopped {
				return
			}
		}
	})
	// Only the scanDepth+1 buffers made above go back to free, which holds
	// them all, so returning one never blocks; an error is sent in a buffer
	// of its own.
	var err error
	for b := range out {
		if b.err != nil {
			err = b.err
			break
		}
		err = fn(b.batch)
		free <- b
		if err != nil {
			break
		}
	}
	close(done)
	for b := range out {
		if b.err == nil {
			free <- b // the producer may be waiting for one before it sees done
		}
	}
	producer.Wait()
	return err
}

// rawScanner is one scan: what to read, the intern tables and (embedded)
// the buffers of the row group being decoded. Everything but run is used
// by the decoding goroutine only.
type rawScanner struct {
	l        *Lake
	q        RawQuery
	from, to int64 // q.Time's bounds
	want     map[string]bool
	cols     []column // columns to decode
	idx      map[string]int
	keyCol   []int                   // indexes into cols of the key columns
	inCol    []int                   // indexes into cols of the --agg input columns
	keys     map[string]tidemark.Key // interned
	strs     map[string]string       // interned source/file names
	*scanBufs
}

func (l *Lake) newRawScanner(q RawQuery) (*rawScanner, error) {
	t := l.tables[TableRawEvents].def
	s := &rawScanner{l: l, q: q, want: map[string]bool{}, idx: map[string]int{}, keys: map[string]tidemark.Key{}, strs: map[string]string{}}
	s.from, s.to = q.Time.bounds()
	names := q.Columns
	if names == nil {
		names = allRawColumns
	}
	for _, n := range names {
		if !slices.Contains(allRawColumns, n) {
			return nil, fmt.Errorf("scan raw events: unknown column %q", n)
		}
		s.want[n] = true
	}
	// idx holds own columns by logical name and key columns by their
	// position, so a key named like an own column is a column of its own.
	addCol := func(id string, c int) int {
		if i, ok := s.idx[id]; ok {
			return i
		}
		s.idx[id] = len(s.cols)
		s.cols = append(s.cols, t.cols[c])
		return len(s.cols) - 1
	}
	add := func(name string) int { return addCol(name, t.col(name)) }
	add(ColEventTime) // always: the time filter
	if q.Status != "" {
		add(ColStatus)
	}
	for n := range s.want {
		switch {
		case n == ColKey:
			for i, c := range t.keyCols() {
				s.keyCol = append(s.keyCol, addCol("\x00key"+strconv.Itoa(i), c))
			}
		case n == ColValue && l.cfg.ValueField == "":
			// no value column: every row has no value
		case n == ColFields:
			for i, c := range t.user {
				s.inCol = append(s.inCol, addCol("\x00in"+strconv.Itoa(i), c))
			}
		default:
			add(n)
		}
	}
	return s, nil
}

// newColData returns the decoding buffers of a row group. fill reads the
// string columns through their dictionary codes when they have one (the
// key column so when it is the only one), so those skip the per-row views.
func (s *rawScanner) newColData() []colData {
	data := make([]colData, len(s.cols))
	for _, name := range []string{ColSource, ColFile, ColFileID, ColStatus} {
		if i, ok := s.idx[name]; ok {
			data[i].codesOnly = true
		}
	}
	if len(s.keyCol) == 1 {
		data[s.keyCol[0]].codesOnly = true
	}
	return data
}

// wantFile prunes by partition (event hour) and by event_time stats.
func (s *rawScanner) wantFile(a *delta.Add) bool {
	if d, hr := a.PartitionValues[s.l.phys("event_date")], a.PartitionValues[s.l.phys("event_hour")]; d != nil && hr != nil {
		if start, ok := hourStart(*d, *hr); ok && (start+tidemark.MicrosPerHour <= s.from || start >= s.to) {
			return false
		}
	}
	if lo, hi, ok := fileTimeRange(a, s.l.phys(ColEventTime)); ok && (hi <= s.from || lo >= s.to) {
		return false
	}
	if s.q.Status != "" {
		// A file whose rows all have another status (stats min = max) has
		// none of the wanted ones: reconcile's search for late rows reads
		// only the files that hold some.
		if lo, hi, ok := fileStringRange(a, s.l.phys(ColStatus)); ok && lo == hi && lo != s.q.Status {
			return false
		}
	}
	return true
}

// fileStringRange returns a string column's min and max from the file's
// Delta stats.
func fileStringRange(a *delta.Add, col string) (lo, hi string, ok bool) {
	if a.Stats == "" {
		return "", "", false
	}
	st, err := delta.ParseStats(a.Stats)
	if err != nil {
		return "", "", false
	}
	lo, ok1 := st.MinValues[col].(string)
	hi, ok2 := st.MaxValues[col].(string)
	return lo, hi, ok1 && ok2
}

func hourStart(date, hour string) (int64, bool) {
	d, err := parseDate(date)
	if err != nil {
		return 0, false
	}
	h, err := strconv.Atoi(hour)
	if err != nil || h < 0 || h > 23 {
		return 0, false
	}
	return d + int64(h)*tidemark.MicrosPerHour, true
}

// scanFile decodes the row groups of one file into buffers from free and
// sends the non-empty batches; stopped reports that send refused one (the
// scan is over).
func (s *rawScanner) scanFile(ctx context.Context, key string, version int64, free chan *scanBufs, send func(*scanBufs) bool) (stopped bool, err error) {
	fr, err := openFileReader(ctx, s.l.st, key)
	if err != nil {
		return false, err
	}
	defer fr.Close()
	for rg := range fr.numRowGroups() {
		if lo, hi, ok := fr.int64Range(rg, s.l.phys(ColEventTime)); ok && (hi < s.from || lo >= s.to) {
			continue
		}
		s.scanBufs = <-free // the consumer returns every buffer it gets, even when stopping
		n, err := fr.readRowGroup(rg, s.cols, s.data)
		if err != nil {
			free <- s.scanBufs
			return false, err
		}
		s.fill(n)
		if s.batch.N == 0 {
			free <- s.scanBufs
			continue
		}
		s.batch.Version = version
		if !send(s.scanBufs) {
			free <- s.scanBufs
			return true, nil
		}
	}
	return false, nil
}

// fill selects the rows passing the filters and copies the wanted columns
// into the batch. When every row passes, fixed-width columns are handed
// over without a copy; string columns read through their dictionary
// decode each distinct value once.
func (s *rawScanner) fill(n int) {
	s.selectRows(n)
	all := len(s.sel) == n
	b := &s.batch
	b.N = len(s.sel)
	ints := func(want bool, name string, dst []int64) []int64 {
		if !want {
			return nil
		}
		c := &s.data[s.idx[name]]
		if all {
			return c.ints[:n]
		}
		dst = slices.Grow(dst[:0], len(s.sel))
		for _, i := range s.sel {
			dst = append(dst, c.ints[i])
		}
		return dst
	}
	b.EventTime = ints(s.want[ColEventTime], ColEventTime, s.own.EventTime)
	b.ArrivalTime = ints(s.want[ColArrivalTime], ColArrivalTime, s.own.ArrivalTime)
	b.IngestTime = ints(s.want[ColIngestTime], ColIngestTime, s.own.IngestTime)
	b.Disorder = ints(s.want[ColDisorder], ColDisorder, s.own.Disorder)
	b.Offset = ints(s.want[ColOffset], ColOffset, s.own.Offset)
	b.BatchID = ints(s.want[ColBatchID], ColBatchID, s.own.BatchID)
	if !all {
		// Keep the copies' buffers for the next chunk.
		s.own.EventTime, s.own.ArrivalTime, s.own.IngestTime = b.EventTime, b.ArrivalTime, b.IngestTime
		s.own.Disorder, s.own.Offset, s.own.BatchID = b.Disorder, b.Offset, b.BatchID
	}
	if s.want[ColValue] {
		s.fillValue(all, n)
	}
	if s.want[ColStatus] {
		s.fillStatus()
	}
	if s.want[ColKey] {
		s.fillKeys()
	}
	if len(s.inCol) > 0 {
		s.fillFields()
	}
	strs := func(want bool, name string, dst []string) []string {
		if !want {
			return nil
		}
		c := &s.data[s.idx[name]]
		dst = slices.Grow(dst[:0], len(s.sel)) // once, not doubling into fresh memory
		if c.dictOK {
			byCode := s.strScratch[:0]
			for _, v := range c.dict {
				byCode = append(byCode, s.intern(v))
			}
			s.strScratch = byCode
			for _, r := range s.sel {
				if code := c.codes[r]; code >= 0 {
					dst = append(dst, byCode[code])
				} else {
					dst = append(dst, "")
				}
			}
			return dst
		}
		for _, r := range s.sel {
			dst = append(dst, s.intern(c.bytes[r]))
		}
		return dst
	}
	b.Source = strs(s.want[ColSource], ColSource, b.Source)
	b.File = strs(s.want[ColFile], ColFile, b.File)
	b.FileID = strs(s.want[ColFileID], ColFileID, b.FileID)
	if s.want[ColPayload] {
		c := &s.data[s.idx[ColPayload]]
		if all {
			b.Payload = c.bytes[:n]
		} else {
			b.Payload = s.own.Payload[:0]
			for _, r := range s.sel {
				b.Payload = append(b.Payload, c.bytes[r])
			}
			s.own.Payload = b.Payload
		}
	}
}

// selectRows sets s.sel to the rows of the n decoded ones that the query's
// time range and status keep.
func (s *rawScanner) selectRows(n int) {
	et := &s.data[s.idx[ColEventTime]]
	var st *colData
	var stOK []bool // by dictionary code: the status matches q.Status
	if s.q.Status != "" {
		st = &s.data[s.idx[ColStatus]]
		if st.dictOK {
			stOK = s.boolScratch[:0]
			for _, v := range st.dict {
				stOK = append(stOK, string(v) == s.q.Status)
			}
			s.boolScratch = stOK
		}
	}
	s.sel = slices.Grow(s.sel[:0], n)
	for i := range n {
		t := et.ints[i]
		if t < s.from || t >= s.to {
			continue
		}
		if st != nil {
			if stOK != nil {
				if c := st.codes[i]; c < 0 || !stOK[c] {
					continue
				}
			} else if string(st.bytes[i]) != s.q.Status {
				continue
			}
		}
		s.sel = append(s.sel, i)
	}
}

// fillValue sets the batch's Value and HasValue for the selected rows (all
// of n when all is set, without copying).
func (s *rawScanner) fillValue(all bool, n int) {
	b := &s.batch
	b.Value, b.HasValue = s.own.Value[:0], s.own.HasValue[:0]
	if i, ok := s.idx[ColValue]; ok {
		c := &s.data[i]
		if all {
			b.Value = c.floats[:n]
		} else {
			for _, r := range s.sel {
				b.Value = append(b.Value, c.floats[r])
			}
			s.own.Value = b.Value
		}
		if c.hasNull {
			for _, r := range s.sel {
				b.HasValue = append(b.HasValue, !c.null[r])
			}
		} else {
			for range s.sel {
				b.HasValue = append(b.HasValue, true)
			}
		}
	} else {
		b.Value = append(b.Value, make([]float64, len(s.sel))...)
		b.HasValue = append(b.HasValue, make([]bool, len(s.sel))...)
		s.own.Value = b.Value
	}
	s.own.HasValue = b.HasValue
}

// fillFields sets the batch's Fields for the selected rows.
func (s *rawScanner) fillFields() {
	b := &s.batch
	if len(b.Fields) != len(s.inCol) {
		b.Fields = make([][]tidemark.AggValue, len(s.inCol))
	}
	for j, ci := range s.inCol {
		c, text := &s.data[ci], s.cols[ci].kind == kindString
		out := b.Fields[j][:0]
		for _, r := range s.sel {
			switch {
			case c.isNull(r):
				out = append(out, tidemark.AggValue{})
			case text:
				out = append(out, tidemark.AggValue{Text: s.intern(c.bytes[r]), Present: true})
			default:
				out = append(out, tidemark.AggValue{Num: c.floats[r], Present: true})
			}
		}
		b.Fields[j] = out
	}
}

// fillStatus sets the batch's Status for the selected rows, comparing each
// dictionary entry with "late" once rather than each row.
func (s *rawScanner) fillStatus() {
	b := &s.batch
	c := &s.data[s.idx[ColStatus]]
	b.Status = b.Status[:0]
	if c.dictOK {
		late := s.statusScratch[:0]
		for _, v := range c.dict {
			late = append(late, string(v) == "late")
		}
		s.statusScratch = late
		for _, r := range s.sel {
			st := tidemark.StatusOK
			if code := c.codes[r]; code >= 0 && late[code] {
				st = tidemark.StatusLate
			}
			b.Status = append(b.Status, st)
		}
	} else {
		for _, r := range s.sel {
			st := tidemark.StatusOK
			if string(c.bytes[r]) == "late" {
				st = tidemark.StatusLate
			}
			b.Status = append(b.Status, st)
		}
	}
}

// intern returns v as a string shared by all equal values of the scan (up
// to a bound).
func (s *rawScanner) intern(v []byte) string {
	if str, ok := s.strs[string(v)]; ok {
		return str
	}
	str := string(v)
	if len(s.strs) < 1<<16 {
		s.strs[str] = str
	}
	return str
}

// internKey returns the Key encoded in s.kb, interned (up to a bound).
func (s *rawScanner) internKey() tidemark.Key {
	if k, ok := s.keys[string(s.kb)]; ok {
		return k
	}
	k := tidemark.Key(s.kb)
	if len(s.keys) < 1<<20 {
		s.keys[string(k)] = k
	}
	return k
}

// fillKeys sets b.Key for the selected rows. With one key column read
// through its dictionary, each distinct key is built once per chunk.
func (s *rawScanner) fillKeys() {
	b := &s.batch
	b.Key = slices.Grow(b.Key[:0], len(s.sel))
	if len(s.keyCol) == 1 && s.data[s.keyCol[0]].dictOK {
		c := &s.data[s.keyCol[0]]
		byCode := s.keyScratch[:0]
		for _, v := range c.dict {
			s.kb = appendKeyPartBytes(s.kb[:0], v, false)
			byCode = append(byCode, s.internKey())
		}
		s.keyScratch = byCode
		s.kb = appendKeyPartBytes(s.kb[:0], nil, true)
		null := s.internKey()
		for _, r := range s.sel {
			if code := c.codes[r]; code >= 0 {
				b.Key = append(b.Key, byCode[code])
			} else {
				b.Key = append(b.Key, null)
			}
		}
		return
	}
	for _, r := range s.sel {
		s.kb = s.kb[:0]
		for _, k := range s.keyCol {
			s.kb = appendKeyCol(s.kb, &s.data[k], s.cols[k].kind, int(r))
		}
		b.Key = append(b.Key, s.internKey())
	}
}

// appendKeyPartBytes is tidemark.AppendKeyPart for a byte slice, without the
// string conversion's allocation.
func appendKeyPartBytes(dst, v []byte, null bool) []byte {
	if null {
		return append(dst, 0)
	}
	dst = append(dst, 1)
	dst = binary.AppendUvarint(dst, uint64(len(v)))
	return append(dst, v...)
}

// parseDate reads a YYYY-MM-DD partition value as µs at 00:00 UTC.
func parseDate(s string) (int64, error) {
	t, err := time.Parse(time.DateOnly, s)
	if err != nil {
		return 0, err
	}
	return t.UnixMicro(), nil
}
