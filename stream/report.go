package stream

import (
	"encoding/json"
	"maps"
	"math"
	"time"

	"tidemark"
	"tidemark/ingest"
	"tidemark/stream/engine"
)

// Progress is what RunnerConfig.OnProgress learns after each committed
// batch: the batch itself, the running totals of the run, and (with Once)
// how much of the input pending at the start has been read. It is the
// terminal display's view; the JSON progress line stays the machine's.
type Progress struct {
	BatchID    int64
	ReadTime   time.Time     // the batch's read time
	Rows       int           // input lines in the batch
	Duration   time.Duration // processing time of the batch; 0 for a replayed or drain batch
	Drain      bool          // the --drain batch: no input, closes every open window
	Emitted    int           // windows emitted by the batch
	StateRows  int           // open (window, key) rows after the batch
	StateBytes int64         // estimate of the memory they hold

	Watermark    time.Time // W after the batch; zero before there is one (and after a drain)
	MaxEventTime time.Time // newest valid event time of this run; zero before the first
	Stalled      *Stall    // what holds a stalled watermark back; nil while it moves

	Totals  Summary // the run so far (a copy)
	Backlog Backlog
}

// Backlog is how much of the input pending at the start of a Once run has
// been read, in raw bytes and files or objects. Known is false in a
// continuous run and when a source cannot tell its sizes.
type Backlog struct {
	Known            bool
	Bytes, DoneBytes int64
	Files, DoneFiles int
}

// tracker keeps what Progress needs across batches.
type tracker struct {
	files    map[fileKey]*fileProgress // with Once: every input pending at the start
	start    Backlog
	done     Backlog // DoneBytes and DoneFiles so far
	maxEvent int64
	hasMax   bool
	last     *fileProgress // the previous record's file: records come in runs
	lastKey  fileKey

	compressed int       // compressed inputs not yet known to be read to their end
	checked    time.Time // when their ends were last looked up
}

type fileKey struct{ source, path string }

// fileProgress is how far one input has been read, in raw bytes.
type fileProgress struct {
	size, at   int64
	compressed bool // offsets are decompressed: counted whole once read to its end
}

func (r *runner) stalls() *stallWatch {
	if r.stall == nil {
		r.stall = newStallWatch(r.cfg)
	}
	return r.stall
}

func (r *runner) tracker() *tracker {
	if r.track == nil {
		r.track = &tracker{}
	}
	return r.track
}

// startProgress measures the backlog of a Once run before the sources are
// read (they are not synchronised: call it before the read loop starts).
func (r *runner) startProgress() {
	if r.cfg.OnProgress == nil || !r.cfg.Once {
		return
	}
	t := r.tracker()
	t.files = map[fileKey]*fileProgress{}
	for _, s := range r.sources {
		sz, ok := s.(ingest.Sizer)
		if !ok {
			t.files = nil
			return
		}
		at := map[string]ingest.FilePosition{}
		for _, f := range s.Position().Files {
			at[f.Path] = f
		}
		for _, f := range sz.Sizes() {
			pos, ok := at[f.Path]
			if !ok || pos.Done || !f.Compressed && pos.Offset >= f.Size {
				continue
			}
			fp := &fileProgress{size: f.Size, compressed: f.Compressed}
			if !f.Compressed {
				fp.at = pos.Offset
			}
			t.files[fileKey{s.Name(), f.Path}] = fp
			t.start.Bytes += f.Size - fp.at
			t.start.Files++
			if f.Compressed {
				t.compressed++
			}
		}
	}
	t.start.Known = true
}

// advance moves the backlog over the batch's records. A record's raw end
// is its offset plus its line and newline: exact but for lines over
// --max-line-bytes (their payload is cut) and a last line without a
// newline, both capped at the file's size. It costs a map lookup per run
// of records of one file, not a decode of the batch's positions (which
// took ~100 ms for 10k files).
func (t *tracker) advance(recs []tidemark.Record, drain bool) {
	if drain { // everything present at the start has been read
		for _, fp := range t.files {
			fp.at = fp.size
		}
		t.done.DoneBytes, t.done.DoneFiles = t.start.Bytes, t.start.Files
		t.compressed = 0
		return
	}
	for i := range recs {
		rec := &recs[i]
		fp := t.last
		if fp == nil || rec.Source != t.lastKey.source || rec.File != t.lastKey.path {
			t.lastKey = fileKey{rec.Source, rec.File}
			fp = t.files[t.lastKey]
			t.last = fp
		}
		if fp == nil || fp.compressed || fp.at >= fp.size {
			continue
		}
		end := min(fp.size, rec.Offset+int64(len(rec.Payload))+1)
		if end > fp.at {
			t.done.DoneBytes += end - fp.at
			fp.at = end
			if end == fp.size {
				t.done.DoneFiles++
			}
		}
	}
}

// finishCompressed counts the compressed inputs the positions show read to
// their end. It decodes every position, so progressOf calls it at most once
// a second, and only while compressed inputs are pending.
func (t *tracker) finishCompressed(end map[string]json.RawMessage) {
	for name, raw := range end {
		var pos struct {
			Files []struct {
				Path string `json:"path"`
				Done bool   `json:"done"`
			} `json:"files"`
		}
		if json.Unmarshal(raw, &pos) != nil {
			continue
		}
		for _, f := range pos.Files {
			fp := t.files[fileKey{name, f.Path}]
			if f.Done && fp != nil && fp.compressed && fp.at < fp.size {
				t.done.DoneBytes += fp.size - fp.at
				t.done.DoneFiles++
				fp.at = fp.size
				t.compressed--
			}
		}
	}
}

// progressOf builds the observer's view of a committed batch.
func (r *runner) progressOf(entry offsetsEntry, recs []tidemark.Record, res engine.BatchResult, took time.Duration) Progress {
	t := r.tracker()
	if res.Rows > 0 && (!t.hasMax || res.MaxEventTime > t.maxEvent) {
		t.maxEvent, t.hasMax = res.MaxEventTime, true
	}
	p := Progress{
		BatchID: entry.BatchID, ReadTime: time.UnixMicro(entry.ReadTime).UTC(), Rows: len(recs), Duration: took,
		Drain: entry.Drain, Emitted: len(res.Emitted), StateRows: res.OpenWindows, StateBytes: res.StateBytes,
		Totals: *r.sum,
	}
	p.Totals.Quarantined = maps.Clone(r.sum.Quarantined)
	if res.HasWatermark && res.Watermark != tidemark.MaxTime {
		p.Watermark = time.UnixMicro(res.Watermark).UTC()
	}
	if t.hasMax {
		p.MaxEventTime = time.UnixMicro(t.maxEvent).UTC()
	}
	if t.files != nil {
		t.advance(recs, entry.Drain)
		if t.compressed > 0 {
			if now := r.cfg.Clock(); now.Sub(t.checked) >= time.Second {
				t.checked = now
				t.finishCompressed(entry.End)
			}
		}
		p.Backlog = t.start
		p.Backlog.DoneBytes, p.Backlog.DoneFiles = t.done.DoneBytes, t.done.DoneFiles
	}
	return p
}

// progress is one line of the per-batch progress log (SPEC §7), shaped like
// Spark's StreamingQueryProgress.
type progress struct {
	BatchID       int64            `json:"batch_id"`
	Timestamp     string           `json:"timestamp"`
	InputRows     map[string]int64 `json:"input_rows"`
	NumInputRows  int64            `json:"num_input_rows"`
	RowsPerSecond float64          `json:"processed_rows_per_second"`
	EventTime     eventTime        `json:"event_time"`
	Dropped       int64            `json:"rows_dropped_by_watermark"`
	Quarantined   map[string]int64 `json:"quarantined"`
	// Sources holds each source's max event time and watermark (what W is
	// the min or max of) and whether it is idle.
	Sources    map[string]sourceProgress `json:"sources,omitempty"`
	StateRows  int                       `json:"state_rows"`
	StateBytes int64                     `json:"state_bytes"`
	CkptBytes  int64                     `json:"checkpoint_bytes"` // written for the batch: write-ahead entry, state file, commit entry
	Emitted    int                       `json:"windows_emitted"`
	DurationMs float64                   `json:"duration_ms"`
	Drain      bool                      `json:"drain,omitempty"`
	// Unreadable names, per source, the paths it skips now (unreadable.go).
	Unreadable map[string]unreadableProgress `json:"unreadable,omitempty"`
	// Shards is set on a lake other streams write too (see shardsOf).
	Shards *shardProgress `json:"shards,omitempty"`
	// Stalled names what holds the watermark back once it has not moved
	// for RunnerConfig.StallAfter although lines arrive (stall.go).
	Stalled *Stall `json:"stalled,omitempty"`
	// MissingFields are the --key, --value and --agg fields missing (or null) in
	// every valid row of the batch: a misspelt field, or a producer that
	// stopped writing it.
	MissingFields []string `json:"missing_fields,omitempty"`
	// Aggregates are the --agg aggregates over every window the batch
	// emitted, all keys together (their states merged), by column: live
	// estimates, for a glance; window_results has them per window and key.
	Aggregates map[string]*float64 `json:"aggregates,omitempty"`
}

// shardProgress is the shared-lake part of a progress line: this stream is
// one of Count shards (Active of them not idle); windows_emitted are its
// own partials, of which Merged went into window_results as merged rows
// (WithOthers holding another shard's partial too, Final final once
// merged), at the combined watermark.
type shardProgress struct {
	Count      int    `json:"count"`
	Active     int    `json:"active"`
	Watermark  string `json:"combined_watermark,omitempty"`
	Partials   int    `json:"partials"`
	Merged     int    `json:"merged"`
	WithOthers int    `json:"merged_with_others"`
	Final      int    `json:"merged_final"`
}

// shardsOf is the batch's shardProgress: nil unless the batch's merge into
// window_results saw other shards (a lake one stream writes keeps its
// progress line as it was).
func (r *runner) shardsOf(batchID int64) *shardProgress {
	if r.lake == nil {
		return nil
	}
	m, ok := r.lake.LastMerge(r.id)
	if !ok || m.BatchID != batchID || m.Shards <= 1 {
		return nil
	}
	sp := &shardProgress{Count: m.Shards, Active: m.Active, Partials: m.Partials, Merged: m.Merged, WithOthers: m.WithOthers, Final: m.Final}
	if m.HasWatermark && m.Watermark != tidemark.MaxTime {
		sp.Watermark = tidemark.FormatTime(m.Watermark)
	}
	return sp
}

type eventTime struct {
	Min       string `json:"min,omitempty"`
	Max       string `json:"max,omitempty"`
	Avg       string `json:"avg,omitempty"`
	Watermark string `json:"watermark,omitempty"`
}

// report writes the batch's progress line and updates metrics.
// marks are the engine's source marks right after the batch: the engine
// may be processing the next batch by now (pipeline.go).
func (r *runner) report(entry offsetsEntry, recs []tidemark.Record, counts recordCounts, res engine.BatchResult, marks []engine.SourceMark, took time.Duration) {
	p := progress{
		BatchID:     entry.BatchID,
		Timestamp:   tidemark.FormatTime(entry.ReadTime),
		InputRows:   map[string]int64{},
		Quarantined: map[string]int64{},
		Dropped:     res.Dropped,
		StateRows:   res.OpenWindows,
		StateBytes:  res.StateBytes,
		CkptBytes:   r.ck.takeWritten(),
		Emitted:     len(res.Emitted),
		DurationMs:  float64(took.Microseconds()) / 1000,
		Drain:       entry.Drain,
		Shards:      r.shardsOf(entry.BatchID),
	}
	for source, n := range entry.SourceRows {
		p.InputRows[source] = int64(n)
	}
	for reason, n := range counts.quarantined {
		p.Quarantined[string(reason)] = n
	}
	p.NumInputRows = int64(len(recs))
	p.Aggregates = batchAggs(r.cfg.Engine.Aggs, res.Emitted)
	p.MissingFields = counts.missing
	r.warnMissing(entry.BatchID, counts.missing, r.cfg.Clock())
	if took > 0 {
		p.RowsPerSecond = math.Round(float64(len(recs))/took.Seconds()*10) / 10
	}
	if res.Rows > 0 {
		p.EventTime.Min = tidemark.FormatTime(res.MinEventTime)
		p.EventTime.Max = tidemark.FormatTime(res.MaxEventTime)
		p.EventTime.Avg = tidemark.FormatTime(res.AvgEventTime)
	}
	if res.HasWatermark && res.Watermark != tidemark.MaxTime {
		p.EventTime.Watermark = tidemark.FormatTime(res.Watermark)
	}
	p.Stalled = r.stalls().observe(entry.ReadTime, len(recs), res.Watermark, res.HasWatermark, entry.End, marks)
	p.Sources = make(map[string]sourceProgress, len(marks))
	for _, m := range marks {
		sp := sourceProgress{Idle: m.Idle}
		if m.HasEventTime {
			sp.MaxEventTime = tidemark.FormatTime(m.MaxEventTime)
		}
		if m.HasWatermark && m.Watermark > tidemark.MinTime {
			sp.Watermark = tidemark.FormatTime(m.Watermark)
		}
		p.Sources[m.Name] = sp
	}
	p.Unreadable = unreadableOf(r.sources)
	if r.metrics != nil {
		r.metrics.observe(p, res, marks)
	}
	if r.cfg.OnProgress != nil {
		op := r.progressOf(entry, recs, res, took)
		op.Stalled = p.Stalled
		r.cfg.OnProgress(op)
	}
	if r.cfg.Progress == nil {
		return
	}
	line, _ := json.Marshal(p)
	r.cfg.Progress.Write(append(line, '\n'))
}

// batchAggs is the --agg aggregates of the emitted windows' states merged
// (nil without --agg or without a window emitted).
func batchAggs(aggs tidemark.AggList, emitted []tidemark.Result) map[string]*float64 {
	if aggs.Empty() || len(emitted) == 0 {
		return nil
	}
	all := aggs.NewState()
	for _, r := range emitted {
		if err := all.Merge(r.State); err != nil {
			return nil // states of the engine's own list: cannot happen
		}
	}
	return aggMap(aggs, all)
}
