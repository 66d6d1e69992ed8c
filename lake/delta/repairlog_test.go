package delta

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// repairTable makes a table of 25 versions (a file added per version,
// checkpoints every 10) and returns its store root.
func repairTable(t *testing.T) (string, *Table) {
	t.Helper()
	st := newStore(t)
	tbl := Open(st, "t", Options{CheckpointInterval: 10, Clock: testClock})
	mustCommit(t, tbl, testCreate(false))
	for v := int64(1); v <= 24; v++ {
		mustCommit(t, tbl, &Transaction{ReadVersion: v - 1, Actions: []Action{addIn("", fmt.Sprintf("f%02d.parquet", v))}, Txn: &Txn{AppID: "stream", Version: v}})
	}
	return st.String(), Open(st, "t", Options{})
}

func logFile(root, name string) string { return filepath.Join(root, "t", "_delta_log", name) }

// TestRepairLog damages the log as disks and crashes do — the newest commit
// truncated, a commit in the middle garbled, the newest checkpoint garbled,
// _last_checkpoint garbled — and checks that a dry run reports exactly what
// would be lost and changes nothing, and the repair leaves a readable table
// at the newest version that can be rebuilt, with what it set aside kept
// under _delta_log/_damaged/.
func TestRepairLog(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		name        string
		damage      func(root string)
		readsBefore bool
		restored    int64
		lost        []int64
		badCP       []int64
		lostAdds    int
		lastCP      bool
	}{
		{name: "newest commit truncated", damage: func(root string) {
			os.Truncate(logFile(root, commitName(24)), 17)
		}, restored: 23, lost: []int64{24}},
		{name: "middle commit garbled", damage: func(root string) {
			os.WriteFile(logFile(root, commitName(22)), []byte("{\"add\":{\"path\":garbage\n"), 0o644)
		}, restored: 21, lost: []int64{22, 23, 24}, lostAdds: 2},
		{name: "newest checkpoint garbled", damage: func(root string) {
			os.WriteFile(logFile(root, fmt.Sprintf("%020d.checkpoint.parquet", 20)), []byte("PAR1 not a checkpoint PAR1"), 0o644)
		}, restored: 24, badCP: []int64{20}, lastCP: true},
		{name: "_last_checkpoint garbled", damage: func(root string) {
			os.WriteFile(logFile(root, "_last_checkpoint"), []byte("{\"version\":"), 0o644)
		}, readsBefore: true, restored: 24, lastCP: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			root, tbl := repairTable(t)
			c.damage(root)
			if _, err := tbl.Snapshot(ctx, -1); (err == nil) != c.readsBefore {
				t.Fatalf("read before repair: got %v, want readable=%v", err, c.readsBefore)
			}
			dry, err := tbl.RepairLog(ctx, true)
			if err != nil {
				t.Fatal(err)
			}
			check := func(rep *LogRepair) {
				t.Helper()
				if rep.Restored != c.restored || !slices.Equal(rep.Lost, c.lost) || !slices.Equal(rep.BadCheckpoints, c.badCP) ||
					len(rep.LostAdds) != c.lostAdds || (rep.LastCheckpoint != "") != c.lastCP {
					t.Errorf("got restored %d lost %v bad checkpoints %v lost adds %v last checkpoint %q; want %d %v %v %d adds, fix=%v",
						rep.Restored, rep.Lost, rep.BadCheckpoints, rep.LostAdds, rep.LastCheckpoint, c.restored, c.lost, c.badCP, c.lostAdds, c.lastCP)
				}
			}
			check(dry)
			if len(dry.Moved) != 0 {
				t.Errorf("dry run moved %v", dry.Moved)
			}
			if c.lostAdds > 0 { // readable lost commits: their txns are known
				if got := dry.LostTxns["stream"]; got[1] != c.restored {
					t.Errorf("lost txns: got %v, want stream back at %d", dry.LostTxns, c.restored)
				}
			}
			rep, err := tbl.RepairLog(ctx, false)
			if err != nil {
				t.Fatal(err)
			}
			check(rep)
			for _, fresh := range []*Table{tbl, Open(tbl.st, "t", Options{})} {
				snap, err := fresh.Snapshot(ctx, -1)
				if err != nil {
					t.Fatalf("read after repair: %v", err)
				}
				if snap.Version != c.restored || len(snap.Files) != int(c.restored) {
					t.Errorf("after repair: version %d with %d files, want %d and %d", snap.Version, len(snap.Files), c.restored, c.restored)
				}
			}
			if data, err := os.ReadFile(logFile(root, "_last_checkpoint")); err != nil || !json.Valid(data) || !strings.Contains(string(data), `"version":10`) && !strings.Contains(string(data), `"version":20`) {
				t.Errorf("_last_checkpoint after repair: %s (%v)", data, err)
			}
			aside, _ := os.ReadDir(logFile(root, "_damaged"))
			if len(aside) != len(rep.Moved) {
				t.Errorf("%d files set aside, %d moved", len(aside), len(rep.Moved))
			}
			again, err := tbl.RepairLog(ctx, true)
			if err != nil || again.NeedsRepair() {
				t.Errorf("second check: %+v %v, want a healthy log", again, err)
			}
			// The table is writable again: the next commit takes the
			// first version set aside.
			v, err := tbl.Commit(ctx, &Transaction{ReadVersion: c.restored, Actions: []Action{addIn("", "after.parquet")}})
			if err != nil || v != c.restored+1 {
				t.Errorf("commit after repair: version %d, %v", v, err)
			}
		})
	}
}
