package delta

import (
	"context"
	"errors"
	"strings"
	"testing"

	"tidemark/lake/store"
)

// createWith is testCreate with a protocol and configuration of its own.
func createWith(p Protocol, conf map[string]string, schema string) *Transaction {
	tx := testCreate(false)
	tx.Actions[0].Protocol = &p
	tx.Actions[1].Metadata.Configuration = conf
	if schema != "" {
		tx.Actions[1].Metadata.SchemaString = schema
	}
	return tx
}

// foreignCreate writes tx as version 0 directly, as another engine that
// knows the table's features would.
func foreignCreate(t *testing.T, st store.Store, tx *Transaction) {
	t.Helper()
	data, err := EncodeActions(tx.Actions)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.PutIfAbsent(context.Background(), "t/_delta_log/"+commitName(0), data); err != nil {
		t.Fatal(err)
	}
}

// TestFeaturesAcceptedWhereSafe: tables another engine upgraded with
// features tidemark can honour are read and appended to; appendOnly still
// refuses removes; features it cannot honour are refused by name, for
// reading or for writing only.
func TestFeaturesAcceptedWhereSafe(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		name              string
		p                 Protocol
		conf              map[string]string
		readErr, writeErr string // "" = accepted
		removeErr         string
	}{
		{name: "timestampNtz", p: Protocol{MinReaderVersion: 3, MinWriterVersion: 7, ReaderFeatures: []string{"timestampNtz"}, WriterFeatures: []string{"timestampNtz"}}},
		{name: "appendOnly legacy", p: Protocol{MinReaderVersion: 1, MinWriterVersion: 2}, conf: map[string]string{"delta.appendOnly": "true"}, removeErr: "appendOnly"},
		{name: "appendOnly feature", p: Protocol{MinReaderVersion: 1, MinWriterVersion: 7, WriterFeatures: []string{"appendOnly", "invariants"}}, conf: map[string]string{"delta.appendOnly": "true"}, removeErr: "appendOnly"},
		{name: "writer 4 without cdf", p: Protocol{MinReaderVersion: 1, MinWriterVersion: 4}},
		{name: "cdf enabled", p: Protocol{MinReaderVersion: 1, MinWriterVersion: 4}, conf: map[string]string{"delta.enableChangeDataFeed": "true"}, writeErr: "change data feed"},
		{name: "row tracking", p: Protocol{MinReaderVersion: 1, MinWriterVersion: 7, WriterFeatures: []string{"rowTracking", "domainMetadata"}}, writeErr: "rowTracking"},
		{name: "deletion vectors", p: Protocol{MinReaderVersion: 3, MinWriterVersion: 7, ReaderFeatures: []string{"deletionVectors"}, WriterFeatures: []string{"deletionVectors"}}, readErr: "deletionVectors"},
	} {
		t.Run(c.name, func(t *testing.T) {
			st := newStore(t)
			tbl := Open(st, "t", Options{Clock: testClock})
			foreignCreate(t, st, createWith(c.p, c.conf, ""))
			_, err := Open(st, "t", Options{}).Snapshot(ctx, -1)
			if c.readErr != "" {
				if !errors.Is(err, ErrUnsupported) || !strings.Contains(err.Error(), c.readErr) {
					t.Errorf("read: got %v, want ErrUnsupported naming %s", err, c.readErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("read: %v", err)
			}
			_, err = tbl.Commit(ctx, &Transaction{ReadVersion: 0, Actions: []Action{addIn("", "a.parquet")}})
			if c.writeErr != "" {
				if !errors.Is(err, ErrUnsupported) || !strings.Contains(err.Error(), c.writeErr) {
					t.Errorf("write: got %v, want ErrUnsupported naming %s", err, c.writeErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("append: %v", err)
			}
			_, err = tbl.Commit(ctx, &Transaction{ReadVersion: 1, Actions: []Action{{Remove: &Remove{Path: "a.parquet", DeletionTimestamp: testClock().UnixMilli(), DataChange: true}}}})
			if c.removeErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.removeErr) {
					t.Errorf("remove: got %v, want a refusal naming %s", err, c.removeErr)
				}
			} else if err != nil {
				t.Errorf("remove: %v", err)
			}
		})
	}
}

// TestConstraintsRefuseDataWrites: a table with a CHECK constraint or a
// column invariant refuses commits that add rows, naming the constraint
// and its expression; commits that add no rows (a txn record, a
// compaction's dataChange=false rewrite) go through.
func TestConstraintsRefuseDataWrites(t *testing.T) {
	ctx := context.Background()
	invariant := `{"type":"struct","fields":[{"name":"id","type":"long","nullable":true,"metadata":{}},` +
		`{"name":"value","type":"double","nullable":true,"metadata":{"delta.invariants":"{\"expression\":{\"expression\":\"value < 0\"}}"}}]}`
	for _, c := range []struct {
		name, schema, want string
		conf               map[string]string
	}{
		{name: "check", conf: map[string]string{"delta.constraints.positive_id": "id > 0"}, want: "CHECK constraint positive_id (id > 0)"},
		{name: "invariant", schema: invariant, want: "invariant on value (value < 0)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			st := newStore(t)
			tbl := Open(st, "t", Options{Clock: testClock})
			mustCommit(t, tbl, createWith(Protocol{MinReaderVersion: 1, MinWriterVersion: 3}, c.conf, c.schema))
			_, err := tbl.Commit(ctx, &Transaction{ReadVersion: 0, Actions: []Action{addIn("", "a.parquet")}})
			if !errors.Is(err, ErrConstraint) || !strings.Contains(err.Error(), c.want) {
				t.Errorf("data write: got %v, want ErrConstraint naming %q", err, c.want)
			}
			if _, err := tbl.Commit(ctx, &Transaction{ReadVersion: 0, Txn: &Txn{AppID: "app", Version: 1}}); err != nil {
				t.Errorf("txn record: %v", err)
			}
			compacted := addIn("", "c.parquet")
			compacted.Add.DataChange = false
			if _, err := tbl.Commit(ctx, &Transaction{ReadVersion: 1, Actions: []Action{compacted}}); err != nil {
				t.Errorf("dataChange=false rewrite: %v", err)
			}
			snap, err := tbl.Snapshot(ctx, -1)
			if err != nil {
				t.Fatal(err)
			}
			if cs := Constraints(&snap.Metadata); len(cs) != 1 || !strings.Contains(cs[0].Name+" ("+cs[0].Expression+")", c.want) {
				t.Errorf("Constraints: got %+v, want %s", cs, c.want)
			}
		})
	}
}
