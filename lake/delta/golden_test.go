package delta

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/parquet-go/parquet-go"

	"tidemark/lake/store"
)

// goldenDirs are where the golden tables may be: $DELTA_GOLDEN, shared/
// beside the repository (as CI lays it out), or this workplace's copy.
var goldenDirs = []string{os.Getenv("DELTA_GOLDEN"), "../../../shared/delta-golden", "/work/shared/delta-golden"}

// goldenTable returns the directory of one golden table. Without one the
// test is skipped, except under CI (CI=true), where that is a failure.
func goldenTable(t testing.TB, name string) string {
	t.Helper()
	for _, d := range goldenDirs {
		if d == "" {
			continue
		}
		if _, err := os.Stat(filepath.Join(d, name)); err == nil {
			return filepath.Join(d, name)
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("golden table %s not found in %v", name, goldenDirs)
	}
	t.Skipf("golden table %s not found in %v (set DELTA_GOLDEN)", name, goldenDirs)
	return ""
}

// copyGolden copies one golden table into a fresh directory store (the
// golden folder is read-only) and returns the store.
func copyGolden(t testing.TB, name string) *store.Dir {
	t.Helper()
	src := goldenTable(t, name)
	dst := t.TempDir()
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		target := filepath.Join(dst, name, rel)
		if d.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(target, b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	st, err := store.OpenDir(dst)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

type idAgg struct {
	min, max, sum int64
	n             int64
}

// fileFacts returns the rows of a data file (from stats, else from Parquet)
// and, when the file has a long column "id", its min/max/sum.
func fileFacts(t *testing.T, st store.Store, tablePath string, a Add, wantID bool) (int64, *idAgg) {
	t.Helper()
	ctx := context.Background()
	var rows int64 = -1
	if a.Stats != "" {
		s, err := ParseStats(a.Stats)
		if err != nil {
			t.Fatalf("stats of %s: %v", a.Path, err)
		}
		rows = s.NumRecords
	}
	if rows >= 0 && !wantID {
		return rows, nil
	}
	r, err := st.Open(ctx, a.Key(tablePath))
	if err != nil {
		t.Fatalf("open data file %s: %v", a.Key(tablePath), err)
	}
	defer r.Close()
	f, err := parquet.OpenFile(r, r.Size())
	if err != nil {
		t.Fatalf("parquet %s: %v", a.Path, err)
	}
	if rows < 0 {
		rows = f.NumRows()
	}
	if !wantID {
		return rows, nil
	}
	type idRow struct {
		ID *int64 `parquet:"id,optional"`
	}
	ids, err := parquet.Read[idRow](r, r.Size())
	if err != nil {
		t.Fatalf("read ids of %s: %v", a.Path, err)
	}
	agg := &idAgg{}
	for _, x := range ids {
		if x.ID == nil {
			continue
		}
		v := *x.ID
		if agg.n == 0 || v < agg.min {
			agg.min = v
		}
		if agg.n == 0 || v > agg.max {
			agg.max = v
		}
		agg.sum += v
		agg.n++
	}
	return rows, agg
}

type goldenVersion struct {
	version       int64
	rows, files   int
	txnApp        string
	txnVersion    int64
	min, max, sum int64 // checked when sum != 0
	checkpoint    int64 // CheckpointVersion expected when read through checkpoints
}

var goldenTables = []struct {
	name     string
	versions []goldenVersion
}{
	{"spark-unpartitioned-deletes-checkpoint", []goldenVersion{
		{version: 0, rows: 10, files: 1, checkpoint: -1},
		{version: 4, rows: 50, files: 5, min: 0, max: 49, sum: 1225, checkpoint: -1},
		{version: 5, rows: 45, files: 5, min: 0, max: 49, sum: 1190, checkpoint: -1},
		{version: 9, rows: 25, files: 5, checkpoint: -1},
		{version: 10, rows: 35, files: 6, min: 0, max: 59, sum: 1095, checkpoint: 10},
		{version: 11, rows: 45, files: 7, checkpoint: 10},
		{version: 12, rows: 55, files: 8, checkpoint: 10},
		{version: 13, rows: 41, files: 7, min: 0, max: 65, sum: 1470, checkpoint: 10},
	}},
	{"spark-overwrite-restore-checkpoint", []goldenVersion{
		{version: 0, rows: 100, files: 2, checkpoint: -1},
		{version: 1, rows: 200, files: 4, min: 0, max: 199, sum: 19900, checkpoint: -1},
		{version: 2, rows: 500, files: 2, min: 500, max: 999, sum: 374750, checkpoint: -1},
		{version: 3, rows: 200, files: 4, min: 0, max: 199, sum: 19900, checkpoint: 3},
	}},
	{"spark-multipart-checkpoint", []goldenVersion{
		{version: 0, rows: 1, files: 1, checkpoint: -1},
		{version: 1, rows: 31, files: 10, min: 0, max: 29, sum: 435, checkpoint: 1},
	}},
	{"spark-partitioned-int-string", []goldenVersion{{version: 0, rows: 3, files: 3, checkpoint: -1}}},
	{"spark-partition-values-all-types-null", []goldenVersion{{version: 0, rows: 3, files: 3, checkpoint: -1}}},
	{"spark-partitioned-timestamp", []goldenVersion{{version: 0, rows: 2, files: 2, checkpoint: -1}}},
	{"spark-streaming-txn", []goldenVersion{
		{version: 0, rows: 3, files: 2, checkpoint: -1},
		{version: 1, rows: 6, files: 4, checkpoint: -1},
		{version: 2, rows: 3, files: 2, checkpoint: -1},
		{version: 3, rows: 6, files: 3, txnApp: "e4a20b59-dd0e-4c50-b074-e8ae4786df30", txnVersion: 0, checkpoint: 3},
	}},
	{"delta-rs-checkpoint", []goldenVersion{
		{version: 0, rows: 3, files: 1, checkpoint: 0},
		{version: 1, rows: 6, files: 2, checkpoint: 0},
	}},
}

func TestGoldenTables(t *testing.T) {
	ctx := context.Background()
	for _, gt := range goldenTables {
		t.Run(gt.name, func(t *testing.T) {
			st := copyGolden(t, gt.name)
			for _, ignore := range []bool{false, true} {
				tbl := Open(st, gt.name, Options{IgnoreCheckpoints: ignore})
				for i := len(gt.versions) - 1; i >= 0; i-- { // newest first: time travel backwards
					want := gt.versions[i]
					snap, err := tbl.Snapshot(ctx, want.version)
					if err != nil {
						t.Fatalf("ignoreCheckpoints=%v version %d: %v", ignore, want.version, err)
					}
					if snap.Version != want.version {
						t.Errorf("version: got %d, want %d", snap.Version, want.version)
					}
					wantCP := want.checkpoint
					if ignore {
						wantCP = -1
					}
					if snap.CheckpointVersion != wantCP {
						t.Errorf("ignoreCheckpoints=%v v%d: checkpoint version got %d, want %d", ignore, want.version, snap.CheckpointVersion, wantCP)
					}
					if len(snap.Files) != want.files {
						t.Errorf("ignoreCheckpoints=%v v%d: active files got %d, want %d", ignore, want.version, len(snap.Files), want.files)
					}
					var rows int64
					agg := idAgg{}
					for _, f := range snap.Files {
						if r, err := st.Open(ctx, f.Key(gt.name)); err != nil {
							t.Errorf("v%d: data file of %s: %v", want.version, f.Path, err)
						} else {
							r.Close()
						}
						n, a := fileFacts(t, st, gt.name, f, want.sum != 0)
						rows += n
						if a != nil && a.n > 0 {
							if agg.n == 0 || a.min < agg.min {
								agg.min = a.min
							}
							if agg.n == 0 || a.max > agg.max {
								agg.max = a.max
							}
							agg.sum += a.sum
							agg.n += a.n
						}
					}
					if rows != int64(want.rows) {
						t.Errorf("ignoreCheckpoints=%v v%d: rows got %d, want %d", ignore, want.version, rows, want.rows)
					}
					if want.sum != 0 && (agg.min != want.min || agg.max != want.max || agg.sum != want.sum) {
						t.Errorf("ignoreCheckpoints=%v v%d: id min/max/sum got %d/%d/%d, want %d/%d/%d", ignore, want.version,
							agg.min, agg.max, agg.sum, want.min, want.max, want.sum)
					}
					if want.txnApp != "" {
						v, ok := snap.TxnVersion(want.txnApp)
						if !ok || v != want.txnVersion {
							t.Errorf("v%d txn: got %d,%v, want %d", want.version, v, ok, want.txnVersion)
						}
					} else if len(snap.Txns) != 0 {
						t.Errorf("v%d txns: got %v, want none", want.version, snap.Txns)
					}
					if _, err := snap.Schema(); err != nil {
						t.Errorf("v%d schema: %v", want.version, err)
					}
				}
			}
		})
	}
}

func TestGoldenRefused(t *testing.T) {
	for _, tc := range []struct{ name, feature string }{
		{"spark-deletion-vectors", "deletionVectors"},
		{"spark-column-mapping-name", "column mapping"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := copyGolden(t, tc.name)
			for _, ignore := range []bool{false, true} {
				_, err := Open(st, tc.name, Options{IgnoreCheckpoints: ignore}).Snapshot(context.Background(), -1)
				if !errors.Is(err, ErrUnsupported) || !strings.Contains(err.Error(), tc.feature) {
					t.Errorf("got %v, want ErrUnsupported naming %q", err, tc.feature)
				}
			}
		})
	}
}
