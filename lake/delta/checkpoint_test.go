package delta

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/format"

	"tidemark"
	"tidemark/lake/store"
)

// schemaLines renders a Parquet footer's schema as one line per node:
// dotted path, physical type, repetition and annotations, in file order.
func schemaLines(md *format.FileMetaData) []string {
	var out []string
	var walk func(i int, prefix string) int
	walk = func(i int, prefix string) int {
		el := md.Schema[i]
		name := prefix + el.Name
		line := name
		if typ, ok := el.Type.Get(); ok {
			line += " " + typ.String()
		}
		if rep, ok := el.RepetitionType.Get(); ok {
			line += " " + rep.String()
		}
		if ct, ok := el.ConvertedType.Get(); ok {
			line += fmt.Sprintf(" converted=%d", ct)
		}
		if el.LogicalType.Value != nil {
			line += " " + el.LogicalType.String()
		}
		if i > 0 {
			out = append(out, line)
		}
		next := i + 1
		for range el.NumChildren.V {
			if i == 0 {
				next = walk(next, "")
			} else {
				next = walk(next, name+".")
			}
		}
		return next
	}
	walk(0, "")
	return out
}

func footerOf(t *testing.T, b []byte) *parquet.File {
	t.Helper()
	f, err := parquet.OpenFile(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// checkSparkLikeChunks checks every column chunk of a checkpoint: SNAPPY,
// only PLAIN or dictionary values (with RLE/BIT_PACKED levels), v1 pages.
func checkSparkLikeChunks(t *testing.T, name string, md *format.FileMetaData) {
	t.Helper()
	allowed := map[format.Encoding]bool{format.Plain: true, format.PlainDictionary: true, format.RLEDictionary: true, format.RLE: true, format.BitPacked: true}
	for _, rg := range md.RowGroups {
		for _, c := range rg.Columns {
			cm := c.MetaData
			col := strings.Join(cm.PathInSchema, ".")
			if cm.Codec != format.Snappy {
				t.Errorf("%s: column %s: got codec %v, want SNAPPY", name, col, cm.Codec)
			}
			for _, e := range cm.Encoding {
				if !allowed[e] {
					t.Errorf("%s: column %s: got encoding %v, want PLAIN or dictionary", name, col, e)
				}
			}
			if len(cm.EncodingStats) == 0 {
				t.Errorf("%s: column %s: no encoding stats to check page types", name, col)
			}
			for _, es := range cm.EncodingStats {
				if es.PageType != format.DataPage && es.PageType != format.DictionaryPage {
					t.Errorf("%s: column %s: got page type %v, want DATA_PAGE (v1)", name, col, es.PageType)
				}
			}
		}
	}
}

// fullCheckpointTable writes a table whose checkpoint holds every action
// kind tidemark writes: protocol, metaData with configuration, txns, adds
// with tags and partition values, and tombstones.
func fullCheckpointTable(t *testing.T, interval int64) (*store.Dir, *Table) {
	t.Helper()
	st := newStore(t)
	tbl := Open(st, "t", Options{Clock: testClock, CheckpointInterval: interval})
	create := testCreate(true)
	create.Actions[1].Metadata.Configuration = map[string]string{"tidemark.keys": `["page"]`}
	mustCommit(t, tbl, create)
	for v := int64(1); v <= interval; v++ {
		a := addIn(fmt.Sprintf("p%d", v%3), fmt.Sprintf("f%03d.parquet", v))
		if v == 2 {
			a.Add.Tags = map[string]string{"k": "v"}
		}
		tx := &Transaction{ReadVersion: v - 1, Actions: []Action{a}, Txn: &Txn{AppID: fmt.Sprintf("app%d", v%2), Version: v}}
		if v%4 == 0 {
			old := addIn(fmt.Sprintf("p%d", (v-3)%3), fmt.Sprintf("f%03d.parquet", v-3)).Add
			tx.Actions = append(tx.Actions, Action{Remove: &Remove{Path: old.Path, DeletionTimestamp: testClock().UnixMilli() + v, DataChange: true,
				ExtendedFileMetadata: true, PartitionValues: old.PartitionValues, Size: old.Size}})
		}
		mustCommit(t, tbl, tx)
	}
	return st, tbl
}

// TestCheckpointShapedLikeSpark compares the checkpoint tidemark writes with
// one Spark wrote (Delta 3, parquet-mr 1.12.3), node by node: the same
// columns in the same order with the same types and repetitions; and its
// chunks with what Spark writes: SNAPPY, PLAIN/dictionary, v1 pages, and a
// created_by parquet-mr parses.
func TestCheckpointShapedLikeSpark(t *testing.T) {
	golden := goldenTable(t, "spark-unpartitioned-deletes-checkpoint")
	sb, err := os.ReadFile(filepath.Join(golden, "_delta_log", "00000000000000000010.checkpoint.parquet"))
	if err != nil {
		t.Fatal(err)
	}
	spark := footerOf(t, sb).Metadata()
	checkSparkLikeChunks(t, "spark", spark) // the check itself agrees with Spark

	st, _ := fullCheckpointTable(t, 10)
	ours, err := store.ReadAll(context.Background(), st, "t/_delta_log/00000000000000000010.checkpoint.parquet")
	if err != nil {
		t.Fatal(err)
	}
	md := footerOf(t, ours).Metadata()
	got, want := schemaLines(md), schemaLines(spark)
	if !slices.Equal(got, want) {
		for i := range max(len(got), len(want)) {
			var g, w string
			if i < len(got) {
				g = got[i]
			}
			if i < len(want) {
				w = want[i]
			}
			if g != w {
				t.Errorf("schema node %d: got %q, want %q (Spark)", i, g, w)
			}
		}
	}
	checkSparkLikeChunks(t, "tidemark", md)
	if md.CreatedBy != tidemark.CreatedBy() {
		t.Errorf("created_by: got %q, want %q", md.CreatedBy, tidemark.CreatedBy())
	}
}

// TestOldCheckpointStillLoads reads a table whose checkpoint was written by
// tidemark before checkpoints were shaped like Spark's (ZSTD,
// DELTA_LENGTH_BYTE_ARRAY strings, fewer columns; testdata/old-checkpoint,
// committed as written then), and checks it against a replay of the JSON
// commits at every version.
func TestOldCheckpointStillLoads(t *testing.T) {
	ctx := context.Background()
	st, err := store.OpenDir("testdata/old-checkpoint")
	if err != nil {
		t.Fatal(err)
	}
	b, err := store.ReadAll(ctx, st, "t/_delta_log/00000000000000000010.checkpoint.parquet")
	if err != nil {
		t.Fatal(err)
	}
	md := footerOf(t, b).Metadata()
	if md.CreatedBy != "tidemark version (build )" || md.RowGroups[0].Columns[0].MetaData.Codec != format.Zstd {
		t.Fatalf("fixture is not an old checkpoint: created_by %q, codec %v", md.CreatedBy, md.RowGroups[0].Columns[0].MetaData.Codec)
	}
	for v := int64(10); v <= 12; v++ {
		withCP, err := Open(st, "t", Options{}).Snapshot(ctx, v)
		if err != nil {
			t.Fatalf("v%d through the old checkpoint: %v", v, err)
		}
		if withCP.CheckpointVersion != 10 {
			t.Errorf("v%d: read from checkpoint %d, want 10", v, withCP.CheckpointVersion)
		}
		replay, err := Open(st, "t", Options{IgnoreCheckpoints: true}).Snapshot(ctx, v)
		if err != nil {
			t.Fatal(err)
		}
		snapshotsEqual(t, v, withCP, replay)
		if !reflect.DeepEqual(withCP.Metadata.Configuration, map[string]string{"tidemark.keys": `["page"]`}) {
			t.Errorf("v%d: configuration %v", v, withCP.Metadata.Configuration)
		}
	}
}

// TestCheckpointRoundTripAllActions: what a new checkpoint holds reads back
// as the JSON replay does, tags and tombstones included.
func TestCheckpointRoundTripAllActions(t *testing.T) {
	ctx := context.Background()
	st, _ := fullCheckpointTable(t, 12)
	withCP, err := Open(st, "t", Options{}).Snapshot(ctx, 12)
	if err != nil {
		t.Fatal(err)
	}
	if withCP.CheckpointVersion != 12 {
		t.Fatalf("read from checkpoint %d, want 12", withCP.CheckpointVersion)
	}
	replay, err := Open(st, "t", Options{IgnoreCheckpoints: true}).Snapshot(ctx, 12)
	if err != nil {
		t.Fatal(err)
	}
	snapshotsEqual(t, 12, withCP, replay)
	tagged := false
	for _, f := range withCP.Files {
		tagged = tagged || f.Tags["k"] == "v"
	}
	if !tagged || len(withCP.Tombstones) == 0 {
		t.Errorf("checkpoint lost tags (%v) or tombstones (%d)", tagged, len(withCP.Tombstones))
	}
}
