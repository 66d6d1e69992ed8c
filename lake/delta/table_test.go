package delta

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"tidemark/lake/store"
)

var testClock = func() time.Time { return time.UnixMilli(1_700_000_000_000) }

func newStore(t testing.TB) *store.Dir {
	t.Helper()
	st, err := store.OpenDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func testCreate(partitioned bool) *Transaction {
	schema := NewSchema(Field("id", "long"), Field("p", "string"))
	var parts []string
	if partitioned {
		parts = []string{"p"}
	}
	return &Transaction{
		ReadVersion: -1,
		Operation:   "CREATE TABLE",
		Actions: []Action{
			{Protocol: &Protocol{MinReaderVersion: 1, MinWriterVersion: 2}},
			{Metadata: &Metadata{ID: "00000000-0000-0000-0000-000000000001", Format: Format{Provider: "parquet"},
				SchemaString: schema.String(), PartitionColumns: parts, CreatedTime: 1_700_000_000_000}},
		},
	}
}

func addIn(p, name string) Action {
	pv := map[string]*string{}
	path := name
	if p != "" {
		pv["p"] = &p
		path = EncodePath(PartitionDir([]string{"p"}, pv) + "/" + name)
	}
	return Action{Add: &Add{Path: path, PartitionValues: pv, Size: 100, ModificationTime: 1, DataChange: true,
		Stats: `{"numRecords":1,"minValues":{"id":1},"maxValues":{"id":1},"nullCount":{"id":0}}`}}
}

func mustCommit(t testing.TB, tbl *Table, tx *Transaction) int64 {
	t.Helper()
	v, err := tbl.Commit(context.Background(), tx)
	if err != nil {
		t.Fatalf("commit: %v", err)
	}
	return v
}

func paths(s *Snapshot) []string {
	var out []string
	for _, f := range s.Files {
		out = append(out, f.Path)
	}
	return out
}

func TestNoTable(t *testing.T) {
	tbl := Open(newStore(t), "nothing", Options{})
	_, err := tbl.Snapshot(context.Background(), -1)
	if !errors.Is(err, ErrNoTable) || !errors.Is(err, store.ErrNotExist) {
		t.Fatalf("got %v, want ErrNoTable matching fs.ErrNotExist", err)
	}
}

func TestRoundTrip(t *testing.T) {
	ctx := context.Background()
	st := newStore(t)
	tbl := Open(st, "t", Options{Clock: testClock})
	mustCommit(t, tbl, testCreate(true))
	null := Action{Add: &Add{Path: "p=__HIVE_DEFAULT_PARTITION__/a.parquet", PartitionValues: map[string]*string{"p": nil}, Size: 5, DataChange: true}}
	mustCommit(t, tbl, &Transaction{ReadVersion: 0, Actions: []Action{addIn("x y:z", "b.parquet"), null}})
	mustCommit(t, tbl, &Transaction{ReadVersion: 1, Txn: &Txn{AppID: "app", Version: 7},
		Actions: []Action{{Remove: &Remove{Path: null.Add.Path, DeletionTimestamp: 9, DataChange: true, ExtendedFileMetadata: true, PartitionValues: null.Add.PartitionValues, Size: 5}}}})

	for _, tb := range []*Table{tbl, Open(st, "t", Options{})} { // cached and fresh
		s, err := tb.Snapshot(ctx, -1)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := paths(s), []string{"p=x%20y%253Az/b.parquet"}; !reflect.DeepEqual(got, want) {
			t.Errorf("files: got %v, want %v", got, want)
		}
		if got, want := s.Files[0].Key("t"), "t/p=x y%3Az/b.parquet"; got != want {
			t.Errorf("key: got %q, want %q", got, want)
		}
		if v, ok := s.TxnVersion("app"); !ok || v != 7 {
			t.Errorf("txn: got %d %v, want 7 true", v, ok)
		}
		if len(s.Tombstones) != 1 || s.Tombstones[0].PartitionValues["p"] != nil {
			t.Errorf("tombstones: got %+v, want one with a null partition value", s.Tombstones)
		}
		sch, err := s.Schema()
		if err != nil || len(sch.Fields) != 2 || sch.Fields[0].Type.Name != "long" {
			t.Errorf("schema: got %+v, %v", sch, err)
		}
		if got, want := s.Metadata.PartitionColumns, []string{"p"}; !reflect.DeepEqual(got, want) {
			t.Errorf("partition columns: got %v, want %v", got, want)
		}
	}
	// Time travel to version 1 still sees the null-partition file.
	s1, err := Open(st, "t", Options{}).Snapshot(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	if len(s1.Files) != 2 || s1.Files[0].PartitionValues["p"] != nil {
		t.Errorf("v1 files: got %+v, want 2 with the null partition first", s1.Files)
	}
	if _, err := tbl.Snapshot(ctx, 3); err == nil {
		t.Error("snapshot at a future version: got nil error")
	}
	h, err := tbl.History(ctx)
	if err != nil || len(h) != 3 || h[0].CommitInfo.Operation != "CREATE TABLE" || h[1].CommitInfo.ReadVersion == nil || *h[1].CommitInfo.ReadVersion != 0 {
		t.Errorf("history: got %+v, %v", h, err)
	}
}

func TestPartitionNullGolden(t *testing.T) {
	name := "spark-partition-values-all-types-null"
	s, err := Open(copyGolden(t, name), name, Options{}).Snapshot(context.Background(), -1)
	if err != nil {
		t.Fatal(err)
	}
	var nulls, litNull int
	for _, f := range s.Files {
		if v, ok := f.PartitionValues["as_int"]; ok && v == nil {
			nulls++
		}
		if v := f.PartitionValues["as_string_lit_null"]; v != nil && *v == "null" {
			litNull++
		}
	}
	if nulls != 1 || litNull != 2 {
		t.Errorf("null partitions got %d, literal \"null\" got %d; want 1 and 2", nulls, litNull)
	}
}

// snapshotsEqual compares the parts of two snapshots that replay decides.
func snapshotsEqual(t *testing.T, v int64, a, b *Snapshot) {
	t.Helper()
	a2, b2 := *a, *b
	a2.CheckpointVersion, b2.CheckpointVersion = 0, 0
	if !reflect.DeepEqual(a2.Files, b2.Files) {
		t.Errorf("v%d files differ: %d vs %d", v, len(a2.Files), len(b2.Files))
	}
	for _, x := range []*Snapshot{&a2, &b2} { // empty and nil maps and lists are the same on the wire
		for i := range x.Files {
			if len(x.Files[i].Tags) == 0 {
				x.Files[i].Tags = nil
			}
		}
	}
	if !reflect.DeepEqual(a2, b2) {
		t.Errorf("v%d snapshots differ:\n%+v\n%+v", v, a2.Metadata, b2.Metadata)
	}
}

func TestCheckpointEqualsReplay(t *testing.T) {
	ctx := context.Background()
	st := newStore(t)
	tbl := Open(st, "t", Options{Clock: testClock})
	mustCommit(t, tbl, testCreate(true))
	for v := int64(1); v < 250; v++ {
		p := fmt.Sprintf("p%d", v%3)
		tx := &Transaction{ReadVersion: v - 1, Actions: []Action{addIn(p, fmt.Sprintf("f%03d.parquet", v))},
			Txn: &Txn{AppID: fmt.Sprintf("app%d", v%2), Version: v}}
		if v%7 == 0 { // remove an earlier file
			old := addIn(fmt.Sprintf("p%d", (v-5)%3), fmt.Sprintf("f%03d.parquet", v-5)).Add
			tx.Actions = append(tx.Actions, Action{Remove: &Remove{Path: old.Path, DeletionTimestamp: testClock().UnixMilli() + v, DataChange: true,
				ExtendedFileMetadata: true, PartitionValues: old.PartitionValues, Size: old.Size}})
		}
		if got := mustCommit(t, tbl, tx); got != v {
			t.Fatalf("commit: got version %d, want %d", got, v)
		}
	}
	for _, cp := range []int64{100, 200} {
		if _, err := st.Open(ctx, fmt.Sprintf("t/_delta_log/%020d.checkpoint.parquet", cp)); err != nil {
			t.Errorf("checkpoint %d: %v", cp, err)
		}
	}
	lc, err := store.ReadAll(ctx, st, "t/_delta_log/_last_checkpoint")
	if err != nil || !bytes.Contains(lc, []byte(`"version":200,`)) || !bytes.Contains(lc, []byte(`"numOfAddFiles":`)) {
		t.Errorf("_last_checkpoint: got %s, %v", lc, err)
	}
	for _, v := range []int64{0, 50, 99, 100, 150, 200, 249} {
		withCP, err := Open(st, "t", Options{}).Snapshot(ctx, v)
		if err != nil {
			t.Fatal(err)
		}
		replay, err := Open(st, "t", Options{IgnoreCheckpoints: true}).Snapshot(ctx, v)
		if err != nil {
			t.Fatal(err)
		}
		wantCP := int64(-1)
		if v >= 100 {
			wantCP = v / 100 * 100
		}
		if withCP.CheckpointVersion != wantCP {
			t.Errorf("v%d: read from checkpoint %d, want %d", v, withCP.CheckpointVersion, wantCP)
		}
		snapshotsEqual(t, v, withCP, replay)
	}
}

func TestConcurrentAppends(t *testing.T) {
	ctx := context.Background()
	st := newStore(t)
	mustCommit(t, Open(st, "t", Options{}), testCreate(false))
	const writers, each = 6, 10
	var wg sync.WaitGroup
	versions := make(chan int64, writers*each)
	errs := make(chan error, writers*each)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tbl := Open(st, "t", Options{CheckpointInterval: 25})
			for i := range each {
				v, err := tbl.Commit(ctx, &Transaction{ReadVersion: 0, // deliberately stale
					Actions: []Action{addIn("", fmt.Sprintf("w%d-%d.parquet", w, i))}})
				if err != nil {
					errs <- err
					continue
				}
				versions <- v
			}
		}()
	}
	wg.Wait()
	close(versions)
	close(errs)
	for err := range errs {
		t.Errorf("append: %v", err)
	}
	seen := map[int64]bool{}
	for v := range versions {
		if seen[v] {
			t.Errorf("version %d returned twice", v)
		}
		seen[v] = true
	}
	if len(seen) != writers*each {
		t.Errorf("distinct versions: got %d, want %d", len(seen), writers*each)
	}
	s, err := Open(st, "t", Options{}).Snapshot(ctx, -1)
	if err != nil {
		t.Fatal(err)
	}
	if s.Version != writers*each || len(s.Files) != writers*each {
		t.Errorf("got version %d with %d files, want %d and %d", s.Version, len(s.Files), writers*each, writers*each)
	}
}

func TestConflictAndUpdate(t *testing.T) {
	ctx := context.Background()
	st := newStore(t)
	tbl := Open(st, "t", Options{})
	mustCommit(t, tbl, testCreate(true))
	mustCommit(t, tbl, &Transaction{ReadVersion: 0, Actions: []Action{addIn("a", "1.parquet"), addIn("b", "2.parquet")}})
	inA := func(pv map[string]*string) bool { return pv["p"] != nil && *pv["p"] == "a" }
	old := addIn("a", "1.parquet").Add
	rewrite := func(rv int64, name string) *Transaction {
		return &Transaction{ReadVersion: rv, ReadPredicate: inA, Operation: "MERGE", Actions: []Action{
			{Remove: &Remove{Path: old.Path, DataChange: true}}, addIn("a", name)}}
	}
	// A winner in partition b does not conflict; one in a does.
	mustCommit(t, tbl, &Transaction{ReadVersion: 1, Actions: []Action{addIn("b", "3.parquet")}})
	mustCommit(t, tbl, &Transaction{ReadVersion: 2, Actions: []Action{addIn("a", "4.parquet")}})
	if _, err := tbl.Commit(ctx, rewrite(2, "x.parquet")); !errors.Is(err, ErrConflict) {
		t.Fatalf("read partition a at v2 after a v3 append to a: got %v, want ErrConflict", err)
	}
	if v, err := tbl.Commit(ctx, &Transaction{ReadVersion: 1, ReadPredicate: func(pv map[string]*string) bool { return *pv["p"] == "c" },
		Actions: []Action{addIn("c", "5.parquet")}}); err != nil || v != 4 {
		t.Fatalf("read partition c at v1: got %d, %v, want 4, nil", v, err)
	}
	calls := 0
	v, err := tbl.Update(ctx, func(s *Snapshot) (*Transaction, error) {
		calls++
		if calls == 1 { // a concurrent writer slips in between read and commit
			mustCommit(t, Open(st, "t", Options{}), &Transaction{ReadVersion: s.Version, Actions: []Action{addIn("a", "6.parquet")}})
		}
		return rewrite(0, fmt.Sprintf("y%d.parquet", calls)), nil
	})
	if err != nil || calls != 2 || v != 6 {
		t.Fatalf("update: got version %d, %v after %d calls, want 6, nil, 2", v, err, calls)
	}
	// Two transactions removing the same file: the second conflicts even
	// without a read predicate.
	rm := func() *Transaction {
		return &Transaction{ReadVersion: 6, Actions: []Action{{Remove: &Remove{Path: addIn("b", "2.parquet").Add.Path, DataChange: true}}}}
	}
	mustCommit(t, tbl, rm())
	if _, err := tbl.Commit(ctx, rm()); !errors.Is(err, ErrConflict) {
		t.Errorf("double remove: got %v, want ErrConflict", err)
	}
	// A metadata change conflicts with a blind append.
	md := testCreate(true).Actions[1]
	mustCommit(t, tbl, &Transaction{ReadVersion: 7, Actions: []Action{md}})
	if _, err := tbl.Commit(ctx, &Transaction{ReadVersion: 7, Actions: []Action{addIn("a", "z.parquet")}}); !errors.Is(err, ErrConflict) {
		t.Errorf("append over a metadata change: got %v, want ErrConflict", err)
	}
}

func TestTxnIdempotent(t *testing.T) {
	ctx := context.Background()
	st := newStore(t)
	tbl := Open(st, "t", Options{})
	mustCommit(t, tbl, testCreate(false))
	tx := func(rv, batch int64) *Transaction {
		return &Transaction{ReadVersion: rv, Txn: &Txn{AppID: "stream", Version: batch},
			Actions: []Action{addIn("", fmt.Sprintf("b%d.parquet", batch))}}
	}
	mustCommit(t, tbl, tx(0, 1))
	for _, tc := range []struct {
		name string
		tx   *Transaction
	}{
		{"same batch on the new snapshot", tx(1, 1)},
		{"older batch", tx(1, 0)},
		{"same batch racing from the old snapshot", tx(0, 1)},
	} {
		v, err := Open(st, "t", Options{}).Commit(ctx, tc.tx)
		if !errors.Is(err, ErrAlreadyCommitted) || v != 1 {
			t.Errorf("%s: got %d, %v, want 1, ErrAlreadyCommitted", tc.name, v, err)
		}
	}
	if v := mustCommit(t, tbl, tx(0, 2)); v != 2 {
		t.Errorf("next batch from a stale snapshot: got version %d, want 2", v)
	}
	s, _ := tbl.Snapshot(ctx, -1)
	if len(s.Files) != 2 {
		t.Errorf("files: got %d, want 2", len(s.Files))
	}
}

func TestUncommittedFileInvisible(t *testing.T) {
	ctx := context.Background()
	st := newStore(t)
	tbl := Open(st, "t", Options{})
	mustCommit(t, tbl, testCreate(false))
	before, _ := Open(st, "t", Options{}).Snapshot(ctx, -1)
	if err := st.Put(ctx, tbl.FileKey("part-orphan.zstd.parquet"), strings.NewReader("PAR1"), 4); err != nil {
		t.Fatal(err)
	}
	after, err := Open(st, "t", Options{}).Snapshot(ctx, -1)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(before, after) {
		t.Errorf("snapshot changed by an uncommitted file: %+v vs %+v", before, after)
	}
}

func TestCorruptLog(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name, key, data, wantIn string
	}{
		{"truncated json line", "t/_delta_log/00000000000000000001.json", `{"add":{"path":"a","size":`, "00000000000000000001.json"},
		{"garbage line", "t/_delta_log/00000000000000000001.json", "{\"add\":{\"path\":\"a\"}}\nnot json\n", "line 2"},
		{"two actions in a line", "t/_delta_log/00000000000000000001.json", `{"add":{"path":"a"},"remove":{"path":"b"}}`, "exactly one"},
		{"corrupt checkpoint", "t/_delta_log/00000000000000000001.checkpoint.parquet", "PAR1 this is not parquet PAR1", "00000000000000000001.checkpoint.parquet"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := newStore(t)
			tbl := Open(st, "t", Options{})
			mustCommit(t, tbl, testCreate(false))
			if !strings.Contains(tc.key, "checkpoint") {
				if err := st.PutIfAbsent(ctx, tc.key, []byte(tc.data)); err != nil {
					t.Fatal(err)
				}
			} else {
				mustCommit(t, tbl, &Transaction{ReadVersion: 0, Actions: []Action{addIn("", "a.parquet")}})
				if err := st.Put(ctx, tc.key, strings.NewReader(tc.data), int64(len(tc.data))); err != nil {
					t.Fatal(err)
				}
			}
			_, err := Open(st, "t", Options{}).Snapshot(ctx, -1)
			if err == nil || !strings.Contains(err.Error(), tc.wantIn) {
				t.Errorf("got %v, want an error containing %q", err, tc.wantIn)
			}
		})
	}
}

func TestCheckpointFailureKeepsCommit(t *testing.T) {
	ctx := context.Background()
	st := newStore(t)
	tbl := Open(st, "t", Options{CheckpointInterval: 1})
	mustCommit(t, tbl, testCreate(false))
	// A directory where the checkpoint file should go makes its Put fail.
	if err := st.Put(ctx, "t/_delta_log/00000000000000000001.checkpoint.parquet/x", strings.NewReader("x"), 1); err != nil {
		t.Fatal(err)
	}
	if v, err := tbl.Commit(ctx, &Transaction{ReadVersion: 0, Actions: []Action{addIn("", "a.parquet")}}); err != nil || v != 1 {
		t.Fatalf("commit with a failing checkpoint: got %d, %v, want 1, nil", v, err)
	}
}
