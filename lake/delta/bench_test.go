package delta

import (
	"context"
	"fmt"
	"testing"

	"tidemark/lake/store"
)

// buildLog writes a 1000-commit table (one add per commit, a remove every
// tenth) with or without checkpoints and returns its store.
func buildLog(b *testing.B, interval int64) *store.Dir {
	b.Helper()
	st := newStore(b)
	tbl := Open(st, "t", Options{Clock: testClock, CheckpointInterval: interval})
	mustCommit(b, tbl, testCreate(true))
	for v := int64(1); v < 1000; v++ {
		tx := &Transaction{ReadVersion: v - 1, Txn: &Txn{AppID: "stream", Version: v},
			Actions: []Action{addIn(fmt.Sprintf("p%d", v%24), fmt.Sprintf("f%04d.parquet", v))}}
		if v%10 == 0 {
			old := addIn(fmt.Sprintf("p%d", (v-3)%24), fmt.Sprintf("f%04d.parquet", v-3)).Add
			tx.Actions = append(tx.Actions, Action{Remove: &Remove{Path: old.Path, DataChange: true}})
		}
		mustCommit(b, tbl, tx)
	}
	return st
}

func BenchmarkSnapshotLoad(b *testing.B) {
	for _, bc := range []struct {
		name     string
		interval int64
	}{{"json-only", -1}, {"checkpoint-every-100", 100}} {
		b.Run(bc.name, func(b *testing.B) {
			st := buildLog(b, bc.interval)
			ctx := context.Background()
			b.ResetTimer()
			for b.Loop() {
				s, err := Open(st, "t", Options{}).Snapshot(ctx, -1) // fresh table: no cache
				if err != nil || s.Version != 999 {
					b.Fatalf("snapshot: %v", err)
				}
			}
		})
	}
}

// BenchmarkCommitAppend measures one blind append on a table whose snapshot
// is cached, as a stream commits batch after batch.
func BenchmarkCommitAppend(b *testing.B) {
	st := newStore(b)
	tbl := Open(st, "t", Options{Clock: testClock})
	mustCommit(b, tbl, testCreate(true))
	ctx := context.Background()
	v := int64(0)
	for b.Loop() {
		var err error
		v, err = tbl.Commit(ctx, &Transaction{ReadVersion: v, Actions: []Action{addIn("p", fmt.Sprintf("f%d.parquet", v))}})
		if err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkWriteCheckpoint measures writing the checkpoint of a table with
// 10,000 active files and 1,000 tombstones.
func BenchmarkWriteCheckpoint(b *testing.B) {
	st := newStore(b)
	tbl := Open(st, "t", Options{Clock: testClock, CheckpointInterval: -1})
	mustCommit(b, tbl, testCreate(true))
	var actions []Action
	for i := range 10_000 {
		actions = append(actions, addIn(fmt.Sprintf("p%d", i%24), fmt.Sprintf("part-%05d.parquet", i)))
	}
	for i := range 1_000 {
		a := addIn(fmt.Sprintf("p%d", i%24), fmt.Sprintf("gone-%05d.parquet", i)).Add
		actions = append(actions, Action{Remove: &Remove{Path: a.Path, DeletionTimestamp: 1, DataChange: true,
			ExtendedFileMetadata: true, PartitionValues: a.PartitionValues, Size: a.Size}})
	}
	mustCommit(b, tbl, &Transaction{ReadVersion: 0, Actions: actions, Txn: &Txn{AppID: "app", Version: 1}})
	ctx := context.Background()
	tbl.mu.Lock()
	s := tbl.cached
	tbl.mu.Unlock()
	if s == nil || s.version != 1 {
		b.Fatal("no cached state at version 1")
	}
	b.ResetTimer()
	for b.Loop() {
		if err := tbl.writeCheckpoint(ctx, s); err != nil {
			b.Fatal(err)
		}
	}
	r, err := st.Open(ctx, "t/_delta_log/00000000000000000001.checkpoint.parquet")
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(r.Size()), "bytes")
	r.Close()
}
