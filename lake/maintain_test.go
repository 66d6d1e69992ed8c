package lake

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"tidemark/lake/store"
)

// hookStore runs hook before each PutIfAbsent of a Delta commit, once per
// key: the moment between a writer storing its data files and committing
// them, where a concurrent command can strike.
type hookStore struct {
	store.Store
	mu       sync.Mutex
	hook     func(key string)
	putHook  func(key string) // after each successful Put
	openHook func(key string) // before each Open
}

func (h *hookStore) Open(ctx context.Context, key string) (store.Reader, error) {
	h.mu.Lock()
	hook := h.openHook
	h.mu.Unlock()
	if hook != nil {
		hook(key)
	}
	return h.Store.Open(ctx, key)
}

func (h *hookStore) setOpenHook(fn func(key string)) {
	h.mu.Lock()
	h.openHook = fn
	h.mu.Unlock()
}

func (h *hookStore) Put(ctx context.Context, key string, r io.Reader, size int64) error {
	if err := h.Store.Put(ctx, key, r, size); err != nil {
		return err
	}
	h.mu.Lock()
	hook := h.putHook
	h.mu.Unlock()
	if hook != nil {
		hook(key)
	}
	return nil
}

func (h *hookStore) setPutHook(fn func(key string)) {
	h.mu.Lock()
	h.putHook = fn
	h.mu.Unlock()
}

func (h *hookStore) PutIfAbsent(ctx context.Context, key string, data []byte) error {
	h.mu.Lock()
	hook := h.hook
	h.mu.Unlock()
	if hook != nil && strings.Contains(key, "/_delta_log/") && strings.HasSuffix(key, ".json") {
		hook(key)
	}
	return h.Store.PutIfAbsent(ctx, key, data)
}

func (h *hookStore) setHook(fn func(key string)) {
	h.mu.Lock()
	h.hook = fn
	h.mu.Unlock()
}

// openHookLake opens a lake on a directory behind a hookStore, with a clock
// at the real time (file modification times are real).
func openHookLake(t testing.TB) (*Lake, *hookStore, *fakeClock) {
	t.Helper()
	dir, err := store.OpenDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	hs := &hookStore{Store: dir}
	clock := &fakeClock{now: time.Now()}
	l, err := Open(context.Background(), hs, testConfig(clock))
	if err != nil {
		t.Fatal(err)
	}
	return l, hs, clock
}

// TestForcedVacuumSparesInFlightFiles is the reproduction: a vacuum
// with retention 0 runs while a batch's data files are stored but not yet
// committed. It must keep them, and every command afterwards must read the
// table.
func TestForcedVacuumSparesInFlightFiles(t *testing.T) {
	l, hs, clock := openHookLake(t)
	ctx := context.Background()
	if err := l.AppendBatch(ctx, Batch{AppID: "s", BatchID: 1, Records: testRecords(50)}); err != nil {
		t.Fatal(err)
	}
	var vacErr error
	var deleted []string
	hs.setHook(func(key string) {
		if !strings.HasPrefix(key, TableRawEvents+"/") {
			return
		}
		hs.setHook(nil)
		clock.set(time.Now())
		rep, err := l.Vacuum(ctx, VacuumOptions{Retain: 0, Force: true})
		vacErr, deleted = err, rep.Deleted
	})
	recs := testRecords(200)
	for i := range recs {
		recs[i].Offset += 1_000_000
	}
	if err := l.AppendBatch(ctx, Batch{AppID: "s", BatchID: 2, Records: recs}); err != nil {
		t.Fatal(err)
	}
	if vacErr != nil {
		t.Fatal(vacErr)
	}
	for _, k := range deleted {
		if !strings.Contains(k, "quarantine") {
			t.Errorf("vacuum deleted %s, a file of a writer in flight", k)
		}
	}
	if _, err := l.Compact(ctx, TableRawEvents, 1<<20); err != nil {
		t.Fatalf("compact after the vacuum: %v", err)
	}
	if got, want := len(scanAll(t, l, RawQuery{})), len(wantValid(testRecords(50)))+len(wantValid(recs)); got != want {
		t.Errorf("got %d rows, want %d", got, want)
	}
}

// TestWriterRewritesGoneFiles deletes a data file right after a writer
// stored it (a vacuum that judged it abandoned, a hand in the bucket): the
// pre-commit check sees it and the writer writes the file again, so the
// commit references only files that exist. A writer that cannot keep its
// files fails with ErrFilesGone and commits nothing.
func TestWriterRewritesGoneFiles(t *testing.T) {
	for _, table := range []string{TableRawEvents, TableQuarantine, TableWindowResults} {
		t.Run(table, func(t *testing.T) {
			l, hs, _ := openHookLake(t)
			ctx := context.Background()
			var gone []string
			hs.setPutHook(func(key string) {
				if strings.HasPrefix(key, table+"/") && len(gone) == 0 {
					gone = append(gone, key)
					if err := hs.Store.Delete(ctx, key); err != nil {
						t.Error(err)
					}
				}
			})
			recs := testRecords(100)
			closed := []WindowRow{windowRow(t0, "/a", 3, 1), windowRow(t0.Add(10*time.Minute), "/b", 1, 1)}
			if err := l.AppendBatch(ctx, Batch{AppID: "s", BatchID: 1, Records: recs, Closed: closed}); err != nil {
				t.Fatal(err)
			}
			if len(gone) != 1 {
				t.Fatalf("got %d files deleted, want 1", len(gone))
			}
			assertNoHoles(t, l)
			if got, want := len(scanAll(t, l, RawQuery{})), len(wantValid(recs)); got != want {
				t.Errorf("got %d raw rows, want %d", got, want)
			}
			if got := readTable(t, l, table); len(got) == 0 {
				t.Errorf("%s is empty", table)
			}

			// Every attempt loses its files: a clear error, no commit.
			before := tableVersion(t, l, table)
			hs.setPutHook(func(key string) {
				if strings.HasPrefix(key, table+"/") {
					hs.Store.Delete(ctx, key)
				}
			})
			err := l.AppendBatch(ctx, Batch{AppID: "s", BatchID: 2, Records: recs, Closed: []WindowRow{windowRow(t0, "/a", 4, 2)}})
			if !errors.Is(err, ErrFilesGone) {
				t.Errorf("got %v, want ErrFilesGone", err)
			}
			if v := tableVersion(t, l, table); v != before {
				t.Errorf("got version %d, want %d: a commit after the files were gone", v, before)
			}
			assertNoHoles(t, l)
		})
	}
}

// TestWriterRewritesStaleFiles: files whose writing began more than half the
// writer grace ago are rewritten rather than committed, as a vacuum may take
// them once they are a grace old.
func TestWriterRewritesStaleFiles(t *testing.T) {
	l, hs, clock := openHookLake(t)
	ctx := context.Background()
	puts := 0
	hs.setPutHook(func(key string) {
		if strings.HasPrefix(key, TableRawEvents+"/") {
			puts++
			if puts == 1 {
				clock.advance(DefaultWriterGrace/2 + time.Second) // a long pause after the put
			}
		}
	})
	recs := testRecords(50)
	if err := l.AppendBatch(ctx, Batch{AppID: "s", BatchID: 1, Records: recs}); err != nil {
		t.Fatal(err)
	}
	if puts != 2 {
		t.Errorf("got %d raw_events puts, want 2 (the stale file rewritten)", puts)
	}
	snap, err := l.tables[TableRawEvents].dt.Snapshot(ctx, -1)
	if err != nil {
		t.Fatal(err)
	}
	if len(snap.Files) != 1 {
		t.Errorf("got %d active files, want 1", len(snap.Files))
	}
	assertNoHoles(t, l)

	// Writing that is always that slow fails after a second try, saying why.
	puts = 0
	hs.setPutHook(func(key string) {
		if strings.HasPrefix(key, TableRawEvents+"/") {
			puts++
			clock.advance(DefaultWriterGrace/2 + time.Second)
		}
	})
	before := tableVersion(t, l, TableRawEvents)
	err = l.AppendBatch(ctx, Batch{AppID: "s", BatchID: 2, Records: recs})
	if !errors.Is(err, ErrFilesGone) || !strings.Contains(err.Error(), "half the writer grace") {
		t.Errorf("got %v, want ErrFilesGone saying the writing was too slow", err)
	}
	if puts != maxSlowAttempts {
		t.Errorf("got %d attempts, want %d", puts, maxSlowAttempts)
	}
	if v := tableVersion(t, l, TableRawEvents); v != before {
		t.Errorf("got version %d, want %d", v, before)
	}
}

// assertNoHoles fails if any table references a file that is not there.
func assertNoHoles(t *testing.T, l *Lake) {
	t.Helper()
	reps, err := l.Repair(context.Background(), RepairOptions{DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range reps {
		for _, f := range r.Lost {
			t.Errorf("%s references a missing file %s", r.Table, f.Path)
		}
	}
}

// TestVacuumRetentionFloor: a retention under SafeRetention is refused
// without Force; with Force, tombstoned files go at once but a file no
// version references waits for the writer grace.
func TestVacuumRetentionFloor(t *testing.T) {
	l, _, clock := openHookLake(t)
	ctx := context.Background()
	for b := range 3 {
		recs := testRecords(60)
		for i := range recs {
			recs[i].Offset += int64(b) * 1_000_000
		}
		if err := l.AppendBatch(ctx, Batch{AppID: "s", BatchID: int64(b), Records: recs}); err != nil {
			t.Fatal(err)
		}
	}
	_, err := l.Vacuum(ctx, VacuumOptions{Retain: time.Hour})
	if !errors.Is(err, ErrRetentionTooShort) || !strings.Contains(err.Error(), "--force") {
		t.Errorf("got %v, want ErrRetentionTooShort naming --force", err)
	}
	if _, err := l.Compact(ctx, TableRawEvents, 1<<20); err != nil {
		t.Fatal(err)
	}
	// An orphan: a writer's file not committed (yet).
	recs := testRecords(60)
	var valid []int
	for i := range recs {
		if recs[i].Valid() {
			valid = append(valid, i)
		}
	}
	orphans, err := l.writeRaw(ctx, recs, valid, 0, 9)
	if err != nil {
		t.Fatal(err)
	}
	clock.set(time.Now().Add(time.Second))
	rep, err := l.Vacuum(ctx, VacuumOptions{Retain: 0, Force: true})
	if err != nil {
		t.Fatal(err)
	}
	if rep.FilesRemoved != 3 {
		t.Errorf("got %d files vacuumed, want the 3 compacted away: %v", rep.FilesRemoved, rep.Deleted)
	}
	for _, o := range orphans {
		if slices.Contains(rep.Deleted, "raw_events/"+o.Path) {
			t.Errorf("vacuum deleted %s within the writer grace", o.Path)
		}
	}
	if rep.InFlight != len(orphans) {
		t.Errorf("got %d files reported in flight, want %d", rep.InFlight, len(orphans))
	}
	clock.set(time.Now().Add(DefaultWriterGrace + time.Second))
	rep, err = l.Vacuum(ctx, VacuumOptions{Retain: 0, Force: true})
	if err != nil {
		t.Fatal(err)
	}
	if rep.FilesRemoved != len(orphans) {
		t.Errorf("got %d files vacuumed after the grace, want the %d orphans: %v", rep.FilesRemoved, len(orphans), rep.Deleted)
	}
	assertNoHoles(t, l)
}

// TestMergeRedoneWhenReadFileVacuumed: compaction replaces window_results
// files and a forced vacuum deletes them while an upsert is between its
// snapshot and its reads; the upsert redoes its merge on the new version
// instead of failing.
func TestMergeRedoneWhenReadFileVacuumed(t *testing.T) {
	l, hs, clock := openHookLake(t)
	ctx := context.Background()
	for i := range 4 {
		rows := []WindowRow{windowRow(t0.Add(time.Duration(i)*10*time.Minute), "/a", int64(i+1), 1)}
		if err := l.AppendBatch(ctx, Batch{AppID: "s", BatchID: int64(i), Records: nil, Closed: rows}); err != nil {
			t.Fatal(err)
		}
	}
	struck := false
	hs.setOpenHook(func(key string) {
		if struck || !strings.HasPrefix(key, TableWindowResults+"/") || strings.Contains(key, "_delta_log") {
			return
		}
		struck = true
		// The upsert took its snapshot and is about to read a file of it:
		// first another client compacts and vacuums the table under it.
		hs.setOpenHook(nil)
		if _, err := l.Compact(ctx, TableWindowResults, 1<<20); err != nil {
			t.Error(err)
		}
		clock.set(time.Now().Add(time.Second))
		if _, err := l.Vacuum(ctx, VacuumOptions{Retain: 0, Force: true}); err != nil {
			t.Error(err)
		}
	})
	rows := []WindowRow{windowRow(t0, "/a", 7, 2), windowRow(t0.Add(20*time.Minute), "/a", 9, 2)}
	if err := l.Upsert(ctx, rows, "reconcile", 1, nil); err != nil {
		t.Fatal(err)
	}
	if !struck {
		t.Fatal("the hook never ran")
	}
	got := readTable(t, l, TableWindowResults)
	if len(got) != 4 {
		t.Errorf("got %d window rows, want 4: %v", len(got), got)
	}
	assertNoHoles(t, l)
}

// TestVacuumSweepsStaleTemps checks that vacuum removes what a crashed
// writer left in a directory lake's .tidemark-tmp (older than the
// retention, held by no writer), lists it on a dry run without deleting it,
// and keeps a young temp file and a live writer's old one.
func TestVacuumSweepsStaleTemps(t *testing.T) {
	l, dir, clock := openTestLake(t)
	ctx := context.Background()
	if err := l.AppendBatch(ctx, Batch{AppID: "s", BatchID: 1, Records: testRecords(40)}); err != nil {
		t.Fatal(err)
	}
	clock.set(time.Now())
	tmp := filepath.Join(dir, ".tidemark-tmp")
	stale := filepath.Join(tmp, "put-0123456789abcdef01234567.tmp")
	young := filepath.Join(tmp, "put-76543210fedcba9876543210.tmp")
	for _, p := range []string{stale, young} {
		if err := os.WriteFile(p, []byte("PAR1 half a file"), 0o666); err != nil {
			t.Fatal(err)
		}
	}
	old := clock.Now().Add(-200 * time.Hour)
	if err := os.Chtimes(stale, old, old); err != nil {
		t.Fatal(err)
	}
	live, err := l.st.(store.Stager).Stage()
	if err != nil {
		t.Fatal(err)
	}
	defer live.Close()
	if err := os.Chtimes(live.Name(), old, old); err != nil {
		t.Fatal(err)
	}
	liveHeld := runtime.GOOS != "windows" // no flock there: age alone decides
	want := []string{".tidemark-tmp/" + filepath.Base(stale)}
	if !liveHeld {
		want = append(want, ".tidemark-tmp/"+filepath.Base(live.Name()))
		slices.Sort(want)
	}
	rep, err := l.Vacuum(ctx, VacuumOptions{Retain: SafeRetention, DryRun: true})
	if err != nil || !slices.Equal(rep.Deleted, want) {
		t.Fatalf("dry run: got %v, %v, want %v", rep.Deleted, err, want)
	}
	if _, err := os.Stat(stale); err != nil {
		t.Errorf("dry run deleted the stale temp file: %v", err)
	}
	rep, err = l.Vacuum(ctx, VacuumOptions{Retain: SafeRetention})
	if err != nil || !slices.Equal(rep.Deleted, want) {
		t.Fatalf("vacuum: got %v, %v, want %v", rep.Deleted, err, want)
	}
	if liveHeld && rep.BytesRemoved != int64(len("PAR1 half a file")) {
		t.Errorf("vacuum removed %d bytes, want %d", rep.BytesRemoved, len("PAR1 half a file"))
	}
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Errorf("stale temp file still there: %v", err)
	}
	for _, p := range []string{young, live.Name()} {
		if _, err := os.Stat(p); err != nil && (p == young || liveHeld) {
			t.Errorf("%s deleted: %v", p, err)
		}
	}
	if got, want := len(scanAll(t, l, RawQuery{})), len(wantValid(testRecords(40))); got != want {
		t.Errorf("got %d rows after vacuum, want %d", got, want)
	}
}
