package lake

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"
	"testing"

	"tidemark/lake/delta"
)

// foreignCommit commits actions to a table as another engine would:
// written straight to the log as the next version.
func foreignCommit(t *testing.T, l *Lake, table string, actions ...delta.Action) {
	t.Helper()
	ctx := context.Background()
	h := l.tables[table]
	snap, err := h.dt.Snapshot(ctx, -1)
	if err != nil {
		t.Fatal(err)
	}
	data, err := delta.EncodeActions(actions)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.st.PutIfAbsent(ctx, fmt.Sprintf("%s/_delta_log/%020d.json", h.dt.Path(), snap.Version+1), data); err != nil {
		t.Fatal(err)
	}
}

// TestFeatureBlocksOnlyItsTable: reconcile_log upgraded by another engine
// to deletion vectors (which tidemark cannot read) leaves the lake open:
// window_results is read and written; only reconcile_log's readers fail,
// naming the feature.
func TestFeatureBlocksOnlyItsTable(t *testing.T) {
	ctx := context.Background()
	l, dir, clock := openTestLake(t)
	foreignCommit(t, l, TableReconcileLog, delta.Action{Protocol: &delta.Protocol{MinReaderVersion: 3, MinWriterVersion: 7,
		ReaderFeatures: []string{"deletionVectors"}, WriterFeatures: []string{"deletionVectors"}}})
	l2, err := Open(ctx, l.st, testConfig(clock))
	if err != nil {
		t.Fatalf("open with one table refused: %v (dir %s)", err, dir)
	}
	if err := l2.AppendBatch(ctx, Batch{AppID: "s", BatchID: 1, Records: testRecords(20), Closed: []WindowRow{windowRow(t0, "/a", 3, 1)}}); err != nil {
		t.Fatalf("stream batch beside the refused table: %v", err)
	}
	if rows, err := l2.Windows(ctx, AllFrom, AllTo, 0); err != nil || len(rows) != 1 {
		t.Errorf("windows: %d rows, %v; want 1", len(rows), err)
	}
	if _, err := l2.ReconcileLog(ctx); !errors.Is(err, delta.ErrUnsupported) || !strings.Contains(err.Error(), "deletionVectors") {
		t.Errorf("reconcile_log: got %v, want ErrUnsupported naming deletionVectors", err)
	}
}

// TestConstraintRefusesTidemarkWrites: a CHECK constraint another engine
// put on window_results stops tidemark's writes to it with a message
// naming the constraint; raw_events is unaffected.
func TestConstraintRefusesTidemarkWrites(t *testing.T) {
	ctx := context.Background()
	l, _, _ := openTestLake(t)
	snap, err := l.tables[TableWindowResults].dt.Snapshot(ctx, -1)
	if err != nil {
		t.Fatal(err)
	}
	md := snap.Metadata
	md.Configuration = maps.Clone(md.Configuration)
	md.Configuration["delta.constraints.count_positive"] = "count > 0"
	foreignCommit(t, l, TableWindowResults, delta.Action{Protocol: &delta.Protocol{MinReaderVersion: 1, MinWriterVersion: 3}}, delta.Action{Metadata: &md})
	err = l.AppendBatch(ctx, Batch{AppID: "s", BatchID: 1, Records: testRecords(20), Closed: []WindowRow{windowRow(t0, "/a", 3, 1)}})
	if !errors.Is(err, delta.ErrConstraint) || !strings.Contains(err.Error(), "count_positive (count > 0)") {
		t.Errorf("got %v, want ErrConstraint naming count_positive", err)
	}
	if err := l.AppendBatch(ctx, Batch{AppID: "s", BatchID: 2, Records: testRecords(20)}); err != nil {
		t.Errorf("raw rows only: %v", err)
	}
}
