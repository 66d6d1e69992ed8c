package lake

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"net/url"
	"path"
	"slices"
	"strings"
	"sync"
	"time"

	"tidemark"
	"tidemark/lake/delta"
	"tidemark/lake/store"
)

// Streams that share a lake are shards of one result. Each stream (shard,
// identified by its stream id, the txn appId of its commits) upserts what
// it emitted into window_partials, in partitions of its own
// (tidemark_shard=<id>/window_date=...), with txn {id, batch}. Then it
// upserts, for the window keys the batch touched, the merge of every
// shard's partial into window_results (count and sum add, min and max
// combine), with the same txn. That second commit reads window_results'
// touched partitions: when another shard committed there since, the
// attempt is redone, and the partials are read again, so the merge that
// lands last has read every partial committed before it. A crash between
// the two commits is healed by the replay (the partials commit is skipped by
// its txn, the merge is redone from the partials) and by reconcile. The
// merge is a pure function of the partials: nothing is added twice.
//
// Solo lakes. While one stream writes a lake, the merge of its partials is
// its own rows, so it upserts them straight into window_results (one
// commit, txn {id, batch}, its watermark txn with it) and window_partials
// stays empty. The lake is multi-shard once window_results' configuration
// holds tidemark.shards=multi, or window_partials holds a stream's txn (a
// lake written before solo lakes). A stream decides at each window
// commit: multi-shard, the two commits above; else it builds a solo
// commit, which refuses (errNotSolo) a snapshot marked multi, and right
// before committing it reads shardStates: if that knows a shard other than
// itself it hands over instead. The read comes after the batch's raw rows'
// commit (any stream that emits has committed raw rows with its watermark
// txn before that read, so of two streams starting together at least the
// one that reads last sees the other; see emitSolo).
//
// The hand-over: read window_results at its latest version V, copy its rows
// into window_partials as the partial of the stream that wrote them (the
// shard with a txn in window_results; none: nothing to copy), then commit
// to window_results, read at V, a metaData action that adds
// tidemark.shards=multi, reading every partition. So the mark lands at V+1
// exactly: a solo commit (or reconcile, or compaction) that landed after V
// makes the mark conflict, and the copy is redone from the newer version;
// a solo commit racing the mark loses to it (a metaData change conflicts
// with every concurrent commit), retries, sees the mark and takes the
// two-commit path. The copy reads the mark after the window_partials
// snapshot it builds on, so a copy by a third stream racing the same
// hand-over cannot overwrite partials the solo writer wrote after the
// mark: either it sees the mark and stops, or that write conflicts with it.
// A crash between the copy and the mark leaves copied rows without the
// mark: the lake stays solo (the copy carries no stream txn), and the next
// hand-over copies every row again over them (window_results never loses a
// row key). After the mark the lake stays multi-shard.
//
// Finality: a merged row is final when every shard that contributed to it
// marked its partial final and every other active shard's watermark has
// passed the window's end. A shard is active unless its last commit is more
// than Config.ShardIdle older than the newest shard's last commit. The
// merged row's watermark is the lowest watermark of the active shards.

// shardMemo is what the lake keeps in memory about window tables and shards
// between commits: the window_start ranges of window files (see
// startRanges) and each stream's last merge (see LastMerge).
type shardMemo struct {
	starts startRanges
	mu     sync.Mutex
	merges map[string]Merge
	multi  bool // the lake is multi-shard (see multiShard)
	// legacyChecked: window_partials was read once for a stream's txn.
	legacyChecked bool
}

// Merge is what one batch's window_results commit merged, as its stream
// (shard) reports it: how many shards the lake had, the combined watermark,
// and how many merged windows the batch committed against its own
// partials.
type Merge struct {
	BatchID int64
	// Shards is the number of streams the lake knew at the merge (this
	// one included), Active those of them not idle.
	Shards, Active int
	// Watermark is the combined watermark (µs): the lowest of the active
	// shards', the one the merged rows carry; HasWatermark is false when no
	// shard recorded one.
	Watermark    int64
	HasWatermark bool
	// Partials is the number of windows the batch emitted (its own
	// partials); Merged the window_results rows the commit wrote for them
	// (0 when the batch had been committed before), of which WithOthers
	// hold another shard's partial too and Final are final once merged.
	Partials, Merged, WithOthers, Final int
}

// LastMerge returns the last merge the stream appID committed through this
// Lake, if any: what `--print` and the progress line say on a shared lake.
func (l *Lake) LastMerge(appID string) (Merge, bool) {
	l.memo.mu.Lock()
	defer l.memo.mu.Unlock()
	m, ok := l.memo.merges[appID]
	return m, ok
}

func (l *Lake) recordMerge(appID string, m Merge) {
	l.memo.mu.Lock()
	defer l.memo.mu.Unlock()
	if l.memo.merges == nil {
		l.memo.merges = map[string]Merge{}
	}
	l.memo.merges[appID] = m
}

// DefaultShardIdle is Config.ShardIdle's zero value.
const DefaultShardIdle = 5 * time.Minute

// shardsDir holds one JSON object per stream that registered on the lake.
const shardsDir = "_shards/"

// ShardInfo is what a stream tells the lake about itself when it starts.
type ShardInfo struct {
	ID      string    `json:"id"`   // stream id: the txn appId of its commits
	Name    string    `json:"name"` // --name
	Sources []string  `json:"sources"`
	Started time.Time `json:"started"`
	// Checkpoint is where the stream keeps its checkpoint, as its name
	// claim records it (NameClaim.Checkpoint); empty in records written
	// before names were claimed.
	Checkpoint string `json:"checkpoint,omitempty"`
}

// Shard is one stream writing to the lake, as the lake records it.
type Shard struct {
	ShardInfo
	// Watermark is the highest watermark the shard recorded (µs), if
	// HasWatermark.
	Watermark    int64
	HasWatermark bool
	// LastBatch is the last batch id the shard committed, -1 for none.
	LastBatch int64
	// LastCommit is the time of the shard's last commit that recorded its
	// watermark (zero for none).
	LastCommit time.Time
	// Idle: the last commit is more than Config.ShardIdle older than the
	// newest shard's; the shard no longer holds windows back from being
	// final (see the package comment in shard.go).
	Idle bool
}

// RegisterShard records a stream on the lake (name and sources, for
// Shards). It is written again at every start: the last start wins.
func (l *Lake) RegisterShard(ctx context.Context, info ShardInfo) error {
	if info.ID == "" || strings.ContainsAny(info.ID, "/=") {
		return fmt.Errorf("register shard: bad stream id %q", info.ID)
	}
	if info.Started.IsZero() {
		info.Started = l.clock().UTC()
	}
	info.Sources = slices.Clone(info.Sources)
	for i, src := range info.Sources {
		info.Sources[i] = withoutUserinfo(src)
	}
	info.Checkpoint = withoutUserinfo(info.Checkpoint)
	data, err := json.Marshal(info)
	if err != nil {
		return fmt.Errorf("register shard: %w", err)
	}
	if err := l.st.Put(ctx, shardsDir+info.ID+".json", bytes.NewReader(data), int64(len(data))); err != nil {
		return fmt.Errorf("register shard %s: %w", info.Name, err)
	}
	return nil
}

// Shards lists the streams that have written to the lake or registered on
// it, sorted by name then id.
func (l *Lake) Shards(ctx context.Context) ([]Shard, error) {
	byID, err := l.shardStates(ctx)
	if err != nil {
		return nil, err
	}
	infos, err := l.st.List(ctx, shardsDir)
	if err != nil {
		return nil, fmt.Errorf("list shards: %w", err)
	}
	for _, in := range infos {
		id, ok := strings.CutSuffix(path.Base(in.Key), ".json")
		if !ok {
			continue
		}
		var si ShardInfo
		data, err := store.ReadAll(ctx, l.st, in.Key)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("read shard %s: %w", id, err)
		}
		if err := json.Unmarshal(data, &si); err != nil || si.ID != id {
			l.log.Warn("ignoring an unreadable shard record", "key", in.Key)
			continue
		}
		s := byID[id]
		if s == nil {
			s = &Shard{LastBatch: -1}
			byID[id] = s
		}
		s.ShardInfo = si
	}
	out := make([]Shard, 0, len(byID))
	for _, s := range byID {
		out = append(out, *s)
	}
	slices.SortFunc(out, func(a, b Shard) int { return cmp.Or(cmp.Compare(a.Name, b.Name), cmp.Compare(a.ID, b.ID)) })
	return out, nil
}

// OtherShards returns the shards of the lake other than the stream self:
// the hook for a stream that cannot merge across shards (session windows)
// to refuse a shared lake.
func (l *Lake) OtherShards(ctx context.Context, self string) ([]Shard, error) {
	all, err := l.Shards(ctx)
	if err != nil {
		return nil, err
	}
	return slices.DeleteFunc(all, func(s Shard) bool { return s.ID == self }), nil
}

// MultiShard reports whether more than one stream has written to the lake.
func (l *Lake) MultiShard(ctx context.Context) (bool, error) {
	byID, err := l.shardStates(ctx)
	return len(byID) > 1, err
}

// shardStates reads every shard's watermark, last batch and last commit
// from the txns of raw_events, quarantine and window_partials, and marks
// the idle ones.
func (l *Lake) shardStates(ctx context.Context) (map[string]*Shard, error) {
	byID := map[string]*Shard{}
	get := func(id string) *Shard {
		s := byID[id]
		if s == nil {
			s = &Shard{ShardInfo: ShardInfo{ID: id}, LastBatch: -1}
			byID[id] = s
		}
		return s
	}
	snaps := map[string]*delta.Snapshot{}
	for _, name := range []string{TableRawEvents, TableQuarantine, TableWindowPartials, TableWindowResults} {
		snap, err := l.tables[name].dt.Snapshot(ctx, -1)
		if errors.Is(err, delta.ErrNoTable) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("read shards: %w", err)
		}
		snaps[name] = snap
		for appID, t := range snap.Txns {
			id, ok := strings.CutPrefix(appID, watermarkPrefix)
			if !ok {
				if name == TableWindowPartials {
					get(appID) // only streams write partials
				}
				continue
			}
			s := get(id)
			if !s.HasWatermark || t.Version > s.Watermark {
				s.Watermark, s.HasWatermark = t.Version, true
			}
			if lu := time.UnixMilli(t.LastUpdated).UTC(); t.LastUpdated > 0 && lu.After(s.LastCommit) {
				s.LastCommit = lu
			}
		}
	}
	for _, snap := range snaps {
		for id, s := range byID {
			if v, ok := snap.TxnVersion(id); ok && v > s.LastBatch {
				s.LastBatch = v
			}
		}
	}
	markIdle(byID, l.idle())
	return byID, nil
}

func (l *Lake) idle() time.Duration { return cmp.Or(l.cfg.ShardIdle, DefaultShardIdle) }

// markIdle marks the shards whose last commit is more than idle older than
// the newest one's.
func markIdle(byID map[string]*Shard, idle time.Duration) {
	var newest time.Time
	for _, s := range byID {
		if s.LastCommit.After(newest) {
			newest = s.LastCommit
		}
	}
	for _, s := range byID {
		s.Idle = newest.Sub(s.LastCommit) > idle
	}
}

// ShardWatermark is the lake's combined watermark: the lowest of the active
// shards' watermarks, the point every stream still writing has passed. A
// window ending at or before it is closed. ok is false when no shard
// recorded a watermark.
func (l *Lake) ShardWatermark(ctx context.Context) (w int64, ok bool, err error) {
	byID, err := l.shardStates(ctx)
	if err != nil {
		return 0, false, err
	}
	w, ok = combinedWatermark(byID)
	return w, ok, nil
}

func combinedWatermark(byID map[string]*Shard) (w int64, ok bool) {
	for _, s := range byID {
		if s.Idle || !s.HasWatermark {
			continue
		}
		if !ok || s.Watermark < w {
			w, ok = s.Watermark, true
		}
	}
	return w, ok
}

// emitWindows commits a batch's emitted windows: straight into
// window_results while the lake is solo, else its partials first, then the
// merge of every shard's partials for the keys it touched (see the package
// comment in shard.go).
func (l *Lake) emitWindows(ctx context.Context, b Batch, txn *delta.Txn, ingest int64, params map[string]string) error {
	var extra []delta.Action
	if b.Watermark != nil {
		extra = append(extra, delta.Action{Txn: &delta.Txn{AppID: WatermarkAppID(b.AppID), Version: *b.Watermark, LastUpdated: ingest / 1000}})
	}
	multi, err := l.multiShard(ctx)
	if err != nil {
		return err
	}
	if !multi {
		byID, err := l.emitSolo(ctx, b, txn, extra, params)
		switch {
		case errors.Is(err, errShared):
			if err := l.handOver(ctx, byID); err != nil {
				return err
			}
		case errors.Is(err, errNotSolo):
			l.setMulti()
		default:
			return err
		}
	}
	partials := make([]WindowRow, len(b.Closed))
	for i, r := range b.Closed {
		r.Shard = b.AppID
		partials[i] = r
	}
	if _, err := l.upsertWindows(ctx, mergeSpec{h: l.tables[TableWindowPartials], rows: fixedRows(partials), txn: txn, extra: extra, op: "STREAMING UPDATE", params: params}); err != nil {
		return err
	}
	m := Merge{BatchID: b.BatchID, Partials: len(b.Closed)}
	rows := func(ctx context.Context) ([]WindowRow, error) {
		out, err := l.mergedRows(ctx, b, ingest, &m)
		m.Merged = len(out)
		return out, err
	}
	if _, err := l.upsertWindows(ctx, mergeSpec{h: l.tables[TableWindowResults], rows: rows, txn: txn, op: "STREAMING UPDATE", params: params, bump: true}); err != nil {
		return err
	}
	l.recordMerge(b.AppID, m)
	return nil
}

// confShards is the window_results configuration key that marks a lake
// several streams write (value "multi"); see the package comment.
const confShards = "tidemark.shards"

// errNotSolo ends a solo commit attempt that finds the lake marked multi.
var errNotSolo = errors.New("lake: another stream took the lake over to window_partials")

// errShared ends a solo commit attempt that finds, right before its
// commit, a shard other than its stream: the stream hands over instead.
var errShared = errors.New("lake: another stream writes to the lake")

// errMoved ends a hand-over's marking attempt that finds window_results
// changed since its copy.
var errMoved = errors.New("lake: window_results changed during the hand-over")

func markedMulti(snap *delta.Snapshot) bool {
	return snap != nil && snap.Metadata.Configuration[confShards] == "multi"
}

// multiShard reports whether this handle knows window rows go through
// window_partials: it saw the hand-over's mark, or window_partials holds a
// stream's txn (a lake written before solo lakes existed; read once per
// handle, since after that only a marked lake gets stream txns there).
// Once true it stays true. The mark itself is not read here: the solo
// commit reads it from the snapshot it commits on (errNotSolo), and a
// hand-over finds it before copying, so a solo batch reads window_results'
// log once, not twice.
func (l *Lake) multiShard(ctx context.Context) (bool, error) {
	l.memo.mu.Lock()
	multi, checked := l.memo.multi, l.memo.legacyChecked
	l.memo.mu.Unlock()
	if multi || checked {
		return multi, nil
	}
	psnap, err := l.tables[TableWindowPartials].dt.Snapshot(ctx, -1)
	if err != nil {
		return false, fmt.Errorf("read window_partials: %w", err)
	}
	for appID := range psnap.Txns {
		multi = multi || !strings.HasPrefix(appID, watermarkPrefix)
	}
	l.memo.mu.Lock()
	l.memo.legacyChecked = true
	l.memo.multi = l.memo.multi || multi
	l.memo.mu.Unlock()
	return multi, nil
}

func (l *Lake) setMulti() {
	l.memo.mu.Lock()
	l.memo.multi = true
	l.memo.mu.Unlock()
}

// hasOther reports whether byID holds a shard other than self.
func hasOther(byID map[string]*Shard, self string) bool {
	for id := range byID {
		if id != self {
			return true
		}
	}
	return false
}

// emitSolo upserts a lone stream's windows straight into window_results,
// with the batch's watermark; errNotSolo when the lake is marked multi at
// the attempt (a hand-over won the race), errShared, with the shards it
// read, when the lake knows another shard right before the commit.
//
// That read must follow the commit of the batch's raw rows, whose
// watermark txn is how another stream's read finds this one: then of two
// streams emitting for the first time together, at least the one that
// reads last finds the other (each committed its raw rows before it read),
// and hands over. A read before that commit can miss a stream that misses
// this one too: both commit solo, the second one's rows replace the
// first's, and the hand-over copies both streams' rows as one's partial.
// The commit's conflict check cannot catch it (the read is of other
// tables), so the read is done in the commit loop, right before each
// commit (precommit), after everything the attempt waited for.
func (l *Lake) emitSolo(ctx context.Context, b Batch, txn *delta.Txn, extra []delta.Action, params map[string]string) (map[string]*Shard, error) {
	m := Merge{BatchID: b.BatchID, Shards: 1, Active: 1, Partials: len(b.Closed)}
	if b.Watermark != nil {
		m.Watermark, m.HasWatermark = *b.Watermark, true
	}
	rows := func(context.Context) ([]WindowRow, error) {
		out := b.Closed // upsertWindows copies what it changes
		if slices.ContainsFunc(out, func(r WindowRow) bool { return r.Shard != "" }) {
			out = slices.Clone(out)
			for i := range out {
				out[i].Shard = ""
			}
		}
		m.Final = 0
		for i := range out {
			if out[i].Final {
				m.Final++
			}
		}
		m.Merged = len(out)
		return out, nil
	}
	check := func(snap *delta.Snapshot) error {
		if markedMulti(snap) {
			return errNotSolo
		}
		return nil
	}
	var byID map[string]*Shard
	alone := func(ctx context.Context) error {
		var err error
		if byID, err = l.shardStates(ctx); err != nil {
			return err
		}
		if hasOther(byID, b.AppID) {
			return errShared
		}
		return nil
	}
	spec := mergeSpec{h: l.tables[TableWindowResults], rows: rows, check: check, txn: txn, extra: extra, op: "STREAMING UPDATE", params: params, bump: true, precommit: alone}
	if _, err := l.upsertWindows(ctx, spec); err != nil {
		return byID, err
	}
	l.recordMerge(b.AppID, m)
	return nil, nil
}

// handOver turns a solo lake into a multi-shard one, as a stream that
// finds another shard does before its first window commit: it copies
// window_results, as of some version V, into window_partials as the solo
// writer's partial, then marks window_results multi at version V+1 exactly
// (the marker reads everything, and a metaData commit conflicts with every
// concurrent commit, so a solo commit either lands before the mark and is
// copied again, or loses to it and goes through window_partials). When
// window_results moved meanwhile, the copy is redone.
func (l *Lake) handOver(ctx context.Context, byID map[string]*Shard) error {
	results, partials := l.tables[TableWindowResults], l.tables[TableWindowPartials]
	for attempt := 0; attempt < maxAttempts; attempt++ {
		v := int64(-1)
		rows := func(ctx context.Context) ([]WindowRow, error) {
			snap, err := results.dt.Snapshot(ctx, -1)
			if err != nil {
				return nil, err
			}
			if markedMulti(snap) {
				return nil, errNotSolo
			}
			v = snap.Version
			owner := soloOwner(snap, byID)
			if owner == "" {
				return nil, nil // no stream wrote window_results: no partial to keep
			}
			var out []WindowRow
			for i := range snap.Files {
				got, err := l.readWindowRows(ctx, results, &snap.Files[i])
				if err != nil {
					return nil, err
				}
				for j := range got {
					got[j].Shard = owner
				}
				out = append(out, got...)
			}
			return out, nil
		}
		params := map[string]string{"predicate": "handover of window_results to window_partials"}
		_, err := l.upsertWindows(ctx, mergeSpec{h: partials, rows: rows, op: "MERGE", params: params})
		switch {
		case errors.Is(err, errNotSolo):
			l.setMulti()
			return nil // another stream handed over
		case err != nil:
			return fmt.Errorf("hand over to window_partials: %w", err)
		}
		_, err = l.update(ctx, results, func(snap *delta.Snapshot) (*delta.Transaction, []addFile, error) {
			if markedMulti(snap) {
				return nil, nil, nil
			}
			if snap == nil || snap.Version != v {
				return nil, nil, errMoved
			}
			md := snap.Metadata
			md.Configuration = maps.Clone(md.Configuration)
			md.Configuration[confShards] = "multi"
			return &delta.Transaction{
				Actions:             []delta.Action{{Metadata: &md}},
				Operation:           "SET TBLPROPERTIES",
				OperationParameters: map[string]string{"properties": `{"` + confShards + `":"multi"}`},
				ReadPredicate:       func(map[string]*string) bool { return true },
			}, nil, nil
		})
		switch {
		case errors.Is(err, errMoved):
			continue
		case err != nil:
			return fmt.Errorf("hand over to window_partials: mark window_results: %w", err)
		}
		l.setMulti()
		return nil
	}
	return fmt.Errorf("hand over to window_partials: window_results kept changing over %d attempts", maxAttempts)
}

// soloOwner returns the stream whose rows window_results holds while the
// lake is solo: the shard with a txn there (the latest to commit if a lake
// older than solo lakes has several), "" for none.
func soloOwner(snap *delta.Snapshot, byID map[string]*Shard) string {
	var owner string
	var last int64
	for appID, t := range snap.Txns {
		if byID[appID] == nil {
			continue
		}
		if owner == "" || t.LastUpdated > last || (t.LastUpdated == last && appID < owner) {
			owner, last = appID, t.LastUpdated
		}
	}
	return owner
}

// mergedRows merges every shard's partials of the window keys b touched, as
// the latest window_partials holds them. The batch's own shard counts as
// committing now with b's watermark.
// m learns the shards, the combined watermark and the counts of the merge.
func (l *Lake) mergedRows(ctx context.Context, b Batch, ingest int64, m *Merge) ([]WindowRow, error) {
	byID, err := l.shardStates(ctx)
	if err != nil {
		return nil, err
	}
	self := byID[b.AppID]
	if self == nil {
		self = &Shard{ShardInfo: ShardInfo{ID: b.AppID}}
		byID[b.AppID] = self
	}
	if b.Watermark != nil {
		self.Watermark, self.HasWatermark = *b.Watermark, true
	}
	if now := time.UnixMicro(ingest).UTC(); now.After(self.LastCommit) {
		self.LastCommit = now
	}
	markIdle(byID, l.idle())
	self.Idle = false
	m.Shards, m.Active, m.WithOthers, m.Final = len(byID), 0, 0, 0
	for _, s := range byID {
		if !s.Idle {
			m.Active++
		}
	}
	m.Watermark, m.HasWatermark = combinedWatermark(byID)

	closed := b.Closed
	if !slices.IsSortedFunc(closed, compareRows) {
		closed = slices.Clone(closed)
		sortWindowRows(closed)
	}
	var parts []WindowRow
	if len(byID) > 1 { // alone, the merge is the batch's own partials
		if parts, err = l.partialsOf(ctx, closed); err != nil {
			return nil, err
		}
		slices.SortFunc(parts, func(a, b WindowRow) int { return cmp.Or(compareRows(a, b), strings.Compare(a.Shard, b.Shard)) })
	}
	out := make([]WindowRow, 0, len(closed))
	own := make([]WindowRow, 1)
	p := 0
	for i := range closed {
		r := closed[i]
		for p < len(parts) && compareRows(parts[p], r) < 0 {
			p++
		}
		q := p
		for q < len(parts) && compareRows(parts[q], r) == 0 {
			q++
		}
		ps := parts[p:q]
		if len(ps) == 0 {
			own[0] = WindowRow{Result: r.Result, Shard: b.AppID}
			ps = own
		}
		merged := mergeShards(b.AppID, r, ps, byID)
		if !l.cfg.Aggs.Empty() {
			merged.Aggs = l.cfg.Aggs.Values(merged.State)
		}
		if slices.ContainsFunc(ps, func(p WindowRow) bool { return p.Shard != b.AppID }) {
			m.WithOthers++
		}
		if merged.Final {
			m.Final++
		}
		out = append(out, merged)
	}
	return out, nil
}

// mergeShards merges one window key's partials (ps) into the row the shard
// self emitted (r: origin, computed_at, revision), by the finality rule of
// the package comment in shard.go.
func mergeShards(self string, r WindowRow, ps []WindowRow, byID map[string]*Shard) WindowRow {
	var agg tidemark.Agg
	var state *tidemark.AggState
	final := true
	for _, p := range ps {
		agg.Merge(p.Agg)
		final = final && p.Final
		if p.State != nil {
			if state == nil {
				state = p.State.Clone()
			} else if err := state.Merge(p.State); err != nil {
				// Partials of one lake share its aggregate list
				// (readAggs checks each state's shape).
				panic(fmt.Sprintf("lake: merge shard partials of window %d: %v", r.Window.Start, err))
			}
		}
	}
	wm := r.Watermark
	for id, s := range byID {
		if s.Idle || id == self {
			continue
		}
		if !s.HasWatermark || s.Watermark < r.Window.End {
			if !slices.ContainsFunc(ps, func(p WindowRow) bool { return p.Shard == id }) {
				final = false
			}
		}
		if s.HasWatermark && (wm == nil || s.Watermark < *wm) {
			w := s.Watermark
			wm = &w
		}
	}
	r.Agg, r.Final, r.Watermark, r.Shard = agg, final, wm, ""
	r.State, r.Aggs, r.Exact = state, nil, false
	return r
}

// partialsOf reads the window_partials rows of every shard that may hold
// one of rows' window keys (rows sorted by window and key).
func (l *Lake) partialsOf(ctx context.Context, rows []WindowRow) ([]WindowRow, error) {
	if len(rows) == 0 {
		return nil, nil
	}
	h := l.tables[TableWindowPartials]
	snap, err := h.dt.Snapshot(ctx, -1)
	if err != nil {
		return nil, fmt.Errorf("read window partials: %w", err)
	}
	first, last := dateOf(rows[0].Window.Start), dateOf(rows[len(rows)-1].Window.Start)
	var out []WindowRow
	for i := range snap.Files {
		a := &snap.Files[i]
		d := a.PartitionValues[l.phys("window_date")]
		if d == nil || *d < first || *d > last || !l.mayHold(a, rows) {
			continue
		}
		got, err := l.readWindowRows(ctx, h, a)
		if err != nil {
			return nil, fmt.Errorf("read window partials: %w", err)
		}
		out = append(out, got...)
	}
	return out, nil
}

// PartialWindows returns the window starts of window_partials at its latest
// version (returned too) held by files added after version since (0: every
// file) or with a window start at or after from: the windows any shard
// emitted since a reconcile run, and those still open at it.
func (l *Lake) PartialWindows(ctx context.Context, since, from int64) (starts []int64, version int64, err error) {
	h := l.tables[TableWindowPartials]
	snap, err := h.dt.Snapshot(ctx, -1)
	if err != nil {
		return nil, 0, fmt.Errorf("read window partials: %w", err)
	}
	before := map[string]bool{}
	if since > 0 && since <= snap.Version {
		old, err := h.dt.Snapshot(ctx, since)
		switch {
		case errors.Is(err, delta.ErrVersionExpired):
			// Older than the log retention: every file counts as new.
			l.log.Warn("window_partials version older than the log retention; checking every window", "version", since)
		case err != nil:
			return nil, 0, fmt.Errorf("read window partials at version %d: %w", since, err)
		default:
			for _, a := range old.Files {
				before[a.Path] = true
			}
		}
	}
	seen := map[int64]bool{}
	for i := range snap.Files {
		a := &snap.Files[i]
		if before[a.Path] {
			if _, hi, ok := fileTimeRange(a, l.phys("window_start")); ok && hi <= from {
				continue
			}
		}
		rows, err := l.readWindowRows(ctx, h, a)
		if err != nil {
			return nil, 0, fmt.Errorf("read window partials: %w", err)
		}
		for _, r := range rows {
			if !before[a.Path] || r.Window.Start >= from {
				seen[r.Window.Start] = true
			}
		}
	}
	return slices.Sorted(maps.Keys(seen)), snap.Version, nil
}

// withoutUserinfo drops the credentials a source URL may carry
// (s3://key:secret@bucket/...): the shard record is readable by anyone who
// reads the lake.
func withoutUserinfo(src string) string {
	u, err := url.Parse(src)
	if err != nil || u.User == nil || u.Scheme == "" {
		return src
	}
	u.User = nil
	return u.String()
}
