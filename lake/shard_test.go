package lake

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"tidemark"
	"tidemark/lake/store"
	"tidemark/lake/store/storetest"
)

func TestShardsRecordAndIdle(t *testing.T) {
	ctx := context.Background()
	st, err := store.OpenDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	l, err := Open(ctx, st, testConfig(&fakeClock{now: t0}))
	if err != nil {
		t.Fatal(err)
	}
	if err := l.RegisterShard(ctx, ShardInfo{ID: "id-a", Name: "host-a", Sources: []string{"s3://AKIA:hunter2@bucket/logs", "/var/log"}}); err != nil {
		t.Fatal(err)
	}
	if multi, err := l.MultiShard(ctx); err != nil || multi {
		t.Fatalf("MultiShard before any commit = %v, %v", multi, err)
	}
	wa, wb := t0.UnixMicro()+60e6, t0.UnixMicro()
	// b's last commit is 10 minutes older than a's: idle.
	for _, b := range []Batch{
		{AppID: "id-a", BatchID: 3, Records: []tidemark.Record{testRecords(1)[0]}, Watermark: &wa, IngestTime: t0.Add(10 * time.Minute).UnixMicro()},
		{AppID: "id-b", BatchID: 7, Records: []tidemark.Record{testRecords(1)[0]}, Watermark: &wb, IngestTime: t0.UnixMicro()},
	} {
		if err := l.AppendBatch(ctx, b); err != nil {
			t.Fatal(err)
		}
	}
	shards, err := l.Shards(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(shards) != 2 {
		t.Fatalf("got %d shards, want 2: %+v", len(shards), shards)
	}
	a, b := shards[1], shards[0] // sorted by name: "" (b never registered) first
	if a.Name != "host-a" || a.Sources[0] != "s3://bucket/logs" || a.LastBatch != 3 || a.Watermark != wa || a.Idle {
		t.Errorf("shard a: %+v", a)
	}
	if b.ID != "id-b" || b.LastBatch != 7 || b.Watermark != wb || !b.Idle {
		t.Errorf("shard b: %+v", b)
	}
	if w, ok, err := l.ShardWatermark(ctx); err != nil || !ok || w != wa {
		t.Errorf("combined watermark = %d, %v, %v; want a's %d (b is idle)", w, ok, err, wa)
	}
	if others, err := l.OtherShards(ctx, "id-a"); err != nil || len(others) != 1 || others[0].ID != "id-b" {
		t.Errorf("OtherShards = %+v, %v", others, err)
	}
}

// TestStartRangesCache: the cached window_start range of a window file is
// the one its stats give, and the cache starts again empty at its bound.
func TestStartRangesCache(t *testing.T) {
	ctx := context.Background()
	st, err := store.OpenDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	l, err := Open(ctx, st, testConfig(&fakeClock{now: t0}))
	if err != nil {
		t.Fatal(err)
	}
	size := l.cfg.Window.Size
	for b := range 3 {
		start := t0.UnixMicro() + int64(b)*size
		var agg tidemark.Agg
		agg.Add(1, true)
		row := WindowRow{Result: tidemark.Result{Window: tidemark.Window{Start: start, End: start + size}, Key: testRecords(1)[0].Key, Agg: agg, Final: true}, Origin: OriginStream, Revision: 1}
		if err := l.AppendBatch(ctx, Batch{AppID: "id-a", BatchID: int64(b), Closed: []WindowRow{row}}); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{TableWindowResults} { // a lone stream writes no partials
		snap, err := l.tables[name].dt.Snapshot(ctx, -1)
		if err != nil {
			t.Fatal(err)
		}
		if len(snap.Files) != 3 {
			t.Fatalf("%s: %d files, want one per emitted window", name, len(snap.Files))
		}
		for i := range snap.Files {
			a := &snap.Files[i]
			lo, hi, ok := fileTimeRange(a, "window_start")
			for range 2 { // a miss, then a hit
				if clo, chi, cok := l.memo.starts.of(a, "window_start"); clo != lo || chi != hi || cok != ok || !ok {
					t.Errorf("%s %s: cached range [%d, %d) %v, stats say [%d, %d) %v", name, a.Path, clo, chi, cok, lo, hi, ok)
				}
			}
		}
	}
	l.memo.starts.mu.Lock()
	n := len(l.memo.starts.m)
	for i := len(l.memo.starts.m); i < maxStartRanges; i++ {
		l.memo.starts.m[strconv.Itoa(i)] = startRange{}
	}
	l.memo.starts.mu.Unlock()
	if n != 3 {
		t.Errorf("the cache holds %d ranges, want the 3 files'", n)
	}
	snap, err := l.tables[TableWindowResults].dt.Snapshot(ctx, -1)
	if err != nil {
		t.Fatal(err)
	}
	other := snap.Files[0]
	other.Path = "window_date=x/part-not-cached.parquet"
	l.memo.starts.of(&other, "window_start")
	if got := len(l.memo.starts.m); got != 1 {
		t.Errorf("past its bound the cache holds %d ranges, want it started again with 1", got)
	}
}

// TestHandOver: a lone stream writes window_results only; a second stream
// hands the lake over to window_partials while the first keeps committing
// (each with its own Lake, as two processes), and window_results ends as
// the sum of both streams' last values per window key, as do the partials.
func TestHandOver(t *testing.T) {
	for round := range 4 {
		st, err := store.OpenDir(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		testHandOver(t, st, uint64(round), round%2 == 1)
	}
}

// TestHandOverS3 is the same on versitygw.
func TestHandOverS3(t *testing.T) {
	if testing.Short() {
		t.Skip("full tier: slow on S3; TestHandOver checks the same on a directory")
	}
	srv := storetest.StartVersity(t)
	for round := range 2 {
		st, err := store.OpenS3(t.Context(), srv.Bucket(t), "lake", store.S3Config{
			Endpoint: srv.Endpoint, Region: srv.Region, AccessKey: srv.AccessKey, SecretKey: srv.SecretKey,
		})
		if err != nil {
			t.Fatal(err)
		}
		testHandOver(t, st, uint64(10+round), round == 1)
	}
}

// handOverShard is one stream of testHandOver: each batch raises the
// counts of a few window keys and emits their cumulative values.
type handOverShard struct {
	id    string
	l     *Lake
	rng   *rand.Rand
	batch int64
	last  map[windowID]int64
}

func (s *handOverShard) step(ctx context.Context) error {
	size := s.l.cfg.Window.Size
	var closed []WindowRow
	for range 1 + s.rng.IntN(4) {
		start := t0.UnixMicro() + int64(s.rng.IntN(5))*size
		row := WindowRow{Result: tidemark.Result{Window: tidemark.Window{Start: start, End: start + size},
			Key: tidemark.MakeKey(tidemark.KeyPart{Value: fmt.Sprintf("/p%d", s.rng.IntN(3))}, tidemark.KeyPart{Value: "eu"})}, Origin: OriginStream, Revision: 1}
		id := row.id()
		if slices.ContainsFunc(closed, func(r WindowRow) bool { return r.id() == id }) {
			continue
		}
		s.last[id] += 1 + int64(s.rng.IntN(5))
		row.Agg = tidemark.Agg{Count: s.last[id]}
		closed = append(closed, row)
	}
	wm := t0.UnixMicro() + s.batch*size
	rec := tidemark.Record{EventTime: wm, Key: closed[0].Key, Status: tidemark.StatusOK, Source: s.id, File: "f", Offset: s.batch}
	err := s.l.AppendBatch(ctx, Batch{AppID: s.id, BatchID: s.batch, Records: []tidemark.Record{rec}, Closed: closed, Watermark: &wm})
	s.batch++
	return err
}

func testHandOver(t *testing.T, st store.Store, seed uint64, crashedCopy bool) {
	t.Helper()
	ctx := context.Background()
	open := func(id string, seq uint64) *handOverShard {
		l, err := Open(ctx, st, testConfig(&fakeClock{now: t0}))
		if err != nil {
			t.Fatal(err)
		}
		return &handOverShard{id: id, l: l, rng: rand.New(rand.NewPCG(seed, seq)), last: map[windowID]int64{}}
	}
	a, b := open("id-a", 1), open("id-b", 2)
	for range 3 {
		if err := a.step(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if crashedCopy {
		// A hand-over that crashed after its copy and before its mark:
		// stale partials without a stream txn; a keeps writing alone.
		rows, err := a.l.Windows(ctx, AllFrom, AllTo, 0)
		if err != nil {
			t.Fatal(err)
		}
		for i := range rows {
			rows[i].Shard = a.id
		}
		if _, err := a.l.upsertWindows(ctx, mergeSpec{h: a.l.tables[TableWindowPartials], rows: fixedRows(rows), op: "MERGE"}); err != nil {
			t.Fatal(err)
		}
		if err := a.step(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if multi, err := a.l.multiShard(ctx); err != nil || multi {
		t.Fatalf("a lone stream's lake: multi = %v, %v", multi, err)
	}
	if snap, err := a.l.tables[TableWindowPartials].dt.Snapshot(ctx, -1); err != nil || (len(snap.Files) > 0) != crashedCopy {
		t.Fatalf("a lone stream wrote window_partials: %v", err)
	}
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i, s := range []*handOverShard{a, b} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 6 {
				if errs[i] = s.step(ctx); errs[i] != nil {
					return
				}
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	checkHandOver(t, seed, a, b)
}

// checkHandOver checks a lake a and b wrote: marked multi, window_results
// holding the sum of their last values per window key, and each one's
// partials its own last values.
func checkHandOver(t *testing.T, seed uint64, a, b *handOverShard) {
	t.Helper()
	ctx := context.Background()
	snap, err := a.l.tables[TableWindowResults].dt.Snapshot(ctx, -1)
	if err != nil || !markedMulti(snap) {
		t.Fatalf("window_results not marked multi after the hand-over: %v", err)
	}
	want := map[windowID]int64{}
	for _, s := range []*handOverShard{a, b} {
		for id, n := range s.last {
			want[id] += n
		}
	}
	rows, err := a.l.Windows(ctx, AllFrom, AllTo, 0)
	if err != nil {
		t.Fatal(err)
	}
	got := map[windowID]int64{}
	for _, r := range rows {
		if _, dup := got[r.id()]; dup {
			t.Errorf("window %s key %s twice in window_results", r.Window, r.Key)
		}
		got[r.id()] = r.Agg.Count
	}
	if !maps.Equal(got, want) {
		t.Errorf("seed %d: window_results counts %v, want the sum of both streams' %v", seed, got, want)
	}
	parts, err := a.l.Partials(ctx, AllFrom, AllTo, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []*handOverShard{a, b} {
		mine := map[windowID]int64{}
		for _, p := range parts {
			if p.Shard == s.id {
				p.Shard = ""
				mine[p.id()] = p.Agg.Count
			}
		}
		if !maps.Equal(mine, s.last) {
			t.Errorf("seed %d: %s's partials %v, want its last values %v", seed, s.id, mine, s.last)
		}
	}
}

// raceStore runs before and after, once armed, around the first
// window_results commit put through it (just after its writer read its
// snapshot).
type raceStore struct {
	store.Store
	once          sync.Once
	before, after func()
}

func (s *raceStore) PutIfAbsent(ctx context.Context, key string, data []byte) error {
	if s.before == nil || !strings.HasPrefix(key, TableWindowResults+"/_delta_log/") {
		return s.Store.PutIfAbsent(ctx, key, data)
	}
	first := false
	s.once.Do(func() { first = true })
	if !first {
		return s.Store.PutIfAbsent(ctx, key, data)
	}
	s.before()
	err := s.Store.PutIfAbsent(ctx, key, data)
	if s.after != nil {
		s.after()
	}
	return err
}

// TestHandOverRaces: the hand-over's mark lands between a solo commit's
// snapshot and its put (the solo commit loses, sees the mark on its retry
// and goes through window_partials), or a solo commit decided before the
// second stream's first commit lands between the hand-over's copy and its
// mark (the mark conflicts and the copy is redone from the newer version).
// Either way each stream's batches are in its partial and in the merged
// values.
func TestHandOverRaces(t *testing.T) {
	for _, markFirst := range []bool{true, false} {
		ctx := context.Background()
		dir, err := store.OpenDir(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		rsA, rsB := &raceStore{Store: dir}, &raceStore{Store: dir}
		open := func(st store.Store, id string, seq uint64) *handOverShard {
			l, err := Open(ctx, st, testConfig(&fakeClock{now: t0}))
			if err != nil {
				t.Fatal(err)
			}
			return &handOverShard{id: id, l: l, rng: rand.New(rand.NewPCG(7, seq)), last: map[windowID]int64{}}
		}
		a, b := open(rsA, "id-a", 1), open(rsB, "id-b", 2)
		for range 2 {
			if err := a.step(ctx); err != nil {
				t.Fatal(err)
			}
		}
		bDone := make(chan error, 1)
		if markFirst {
			// b's whole first batch, hand-over and mark included, runs
			// between a's solo snapshot and its put.
			rsA.before = func() { bDone <- b.step(ctx) }
		} else {
			// b's raw commit and copy run there; its mark waits for a's
			// solo put to land.
			atMark, release := make(chan struct{}), make(chan struct{})
			rsB.before = func() { close(atMark); <-release }
			rsA.before = func() {
				go func() { bDone <- b.step(ctx) }()
				<-atMark
			}
			rsA.after = func() { close(release) }
		}
		if err := a.step(ctx); err != nil {
			t.Fatal(err)
		}
		if err := <-bDone; err != nil {
			t.Fatal(err)
		}
		for _, s := range []*handOverShard{a, b, a} {
			if err := s.step(ctx); err != nil {
				t.Fatal(err)
			}
		}
		checkHandOver(t, 7, a, b)
	}
}

const firstEmissionsChildEnv = "TIDEMARK_TEST_FIRST_EMISSIONS_CHILD"

// heldRawStore holds every raw_events commit put through it, once held is
// set, until held is closed.
type heldRawStore struct {
	store.Store
	held chan struct{}
}

func (s *heldRawStore) PutIfAbsent(ctx context.Context, key string, data []byte) error {
	if s.held != nil && strings.HasPrefix(key, TableRawEvents+"/_delta_log/") {
		<-s.held
	}
	return s.Store.PutIfAbsent(ctx, key, data)
}

// TestFirstEmissionsTogether: two streams' first batches on a fresh lake
// emit the same window key, and both raw_events commits are held until
// all else either batch can do without them is done (then they land in
// either order). Each stream must learn of the other only from the other's
// raw rows, so whichever reads the shards last must find the other and
// hand over: window_results holds the sum of both counts. Two solo commits
// would hold one stream's count, the second one's replacing the first's
// (what writing a batch's windows beside its raw rows did, 56deb9e).
//
// The bubble runs in a child process: parquet-go pools the zstd decoders
// it makes, and one made in a synctest bubble while reading window files
// is fatal to the next test that reads outside it ("receive on synctest
// channel from outside bubble").
func TestFirstEmissionsTogether(t *testing.T) {
	if os.Getenv(firstEmissionsChildEnv) == "" {
		cmd := exec.Command(os.Args[0], "-test.run=^TestFirstEmissionsTogether$", "-test.count=1")
		cmd.Env = append(os.Environ(), firstEmissionsChildEnv+"=1")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("child: %v\n%s", err, out)
		}
		return
	}
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		dir, err := store.OpenDir(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		st := &heldRawStore{Store: dir}
		open := func() *Lake {
			l, err := Open(ctx, st, testConfig(&fakeClock{now: t0}))
			if err != nil {
				t.Fatal(err)
			}
			return l
		}
		a, b := open(), open()
		size := a.cfg.Window.Size
		win := tidemark.Window{Start: t0.UnixMicro(), End: t0.UnixMicro() + size}
		key := tidemark.MakeKey(tidemark.KeyPart{Value: "/p"}, tidemark.KeyPart{Value: "eu"})
		batch := func(id string, n, count int64) Batch {
			wm := win.End + n*size
			row := WindowRow{Result: tidemark.Result{Window: win, Key: key, Agg: tidemark.Agg{Count: count}, Final: true}, Origin: OriginStream, Revision: 1, Watermark: &wm}
			rec := tidemark.Record{EventTime: wm, Key: key, Status: tidemark.StatusOK, Source: id, File: "f", Offset: n}
			return Batch{AppID: id, BatchID: n, Records: []tidemark.Record{rec}, Closed: []WindowRow{row}, Watermark: &wm}
		}
		count := func() int64 {
			t.Helper()
			rows, err := a.Windows(ctx, AllFrom, AllTo, 0)
			if err != nil {
				t.Fatal(err)
			}
			if len(rows) != 1 {
				t.Fatalf("window_results holds %d rows, want the one window key", len(rows))
			}
			return rows[0].Agg.Count
		}

		held := make(chan struct{})
		st.held = held
		errs := make(chan error, 2)
		go func() { errs <- a.AppendBatch(ctx, batch("id-a", 1, 3)) }()
		go func() { errs <- b.AppendBatch(ctx, batch("id-b", 1, 4)) }()
		synctest.Wait()
		close(held)
		for range 2 {
			if err := <-errs; err != nil {
				t.Fatal(err)
			}
		}
		if got := count(); got != 7 {
			t.Errorf("after both first batches window_results counts %d, want 3 + 4", got)
		}
		// Each stream's next value of the window replaces its own partial.
		for _, s := range []struct {
			l     *Lake
			b     Batch
			count int64
		}{{a, batch("id-a", 2, 5), 9}, {b, batch("id-b", 2, 6), 11}} {
			if err := s.l.AppendBatch(ctx, s.b); err != nil {
				t.Fatal(err)
			}
			if got := count(); got != s.count {
				t.Errorf("after %s's batch %d window_results counts %d, want %d", s.b.AppID, s.b.BatchID, got, s.count)
			}
		}
	})
}
