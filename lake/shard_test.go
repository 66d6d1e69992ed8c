package lake

import (
	"context"
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
