package lake

import (
	"context"
	"strconv"
	"testing"
	"time"

	"tidemark"
	"tidemark/lake/store"
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
	for _, name := range []string{TableWindowPartials, TableWindowResults} {
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
				if clo, chi, cok := l.memo.starts.of(a); clo != lo || chi != hi || cok != ok || !ok {
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
	if n != 6 {
		t.Errorf("the cache holds %d ranges, want the 6 files'", n)
	}
	snap, err := l.tables[TableWindowResults].dt.Snapshot(ctx, -1)
	if err != nil {
		t.Fatal(err)
	}
	other := snap.Files[0]
	other.Path = "window_date=x/part-not-cached.parquet"
	l.memo.starts.of(&other)
	if got := len(l.memo.starts.m); got != 1 {
		t.Errorf("past its bound the cache holds %d ranges, want it started again with 1", got)
	}
}
