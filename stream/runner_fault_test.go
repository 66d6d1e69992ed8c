package stream

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"tidemark/lake"
	"tidemark/lake/store"
)

// disk plays one filesystem under the lake and the checkpoint stores: once
// limit writes have succeeded, every write fails with ENOSPC until the
// limit is lifted (fill(-1): space freed).
type disk struct {
	mu     sync.Mutex
	writes int // writes done
	limit  int // writes that succeed before the disk is full; -1: no limit
	failed int // writes refused
}

func (d *disk) write(key string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.limit >= 0 && d.writes >= d.limit {
		d.failed++
		return &fs.PathError{Op: "put", Path: key, Err: syscall.ENOSPC}
	}
	d.writes++
	return nil
}

func (d *disk) fill(after int) {
	d.mu.Lock()
	d.writes, d.limit, d.failed = 0, after, 0
	d.mu.Unlock()
}

// fullStore is a directory store on the disk.
type fullStore struct {
	store.Store
	d *disk
}

func (s *fullStore) Put(ctx context.Context, key string, r io.Reader, size int64) error {
	if err := s.d.write(key); err != nil {
		return err
	}
	return s.Store.Put(ctx, key, r, size)
}

func (s *fullStore) PutIfAbsent(ctx context.Context, key string, data []byte) error {
	if err := s.d.write(key); err != nil {
		return err
	}
	return s.Store.PutIfAbsent(ctx, key, data)
}

func openFull(t *testing.T, path string, d *disk) store.Store {
	t.Helper()
	st, err := store.OpenDir(path)
	if err != nil {
		t.Fatal(err)
	}
	return &fullStore{Store: st, d: d}
}

// faultInput writes 1200 lines to dir (every 50th malformed), with some
// disorder so that some rows are late.
func faultInput(t *testing.T, dir string) int {
	t.Helper()
	base := time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC)
	var b strings.Builder
	n := 1200
	for i := range n {
		if i%50 == 49 {
			fmt.Fprintf(&b, "{\"event_time\": broken %d\n", i)
			continue
		}
		ts := base.Add(time.Duration(i)*100*time.Millisecond - time.Duration(i%7)*400*time.Millisecond)
		fmt.Fprintf(&b, "{\"event_time\":%q,\"page\":\"/p%d\",\"value\":%d}\n", ts.Format(time.RFC3339Nano), i%3, i%10)
	}
	if err := os.WriteFile(filepath.Join(dir, "events.ndjson"), []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return n
}

// lakeFacts renders what a lake holds: every input line's place (file and
// offset, in raw_events or quarantine, with a count) and the window results.
func lakeFacts(t *testing.T, st store.Store) (lines map[string]int, windows []string) {
	t.Helper()
	ctx := context.Background()
	lk, err := lake.Open(ctx, st, lake.Config{})
	if err != nil {
		t.Fatal(err)
	}
	lines = map[string]int{}
	err = lk.ScanRaw(ctx, lake.RawQuery{Columns: []string{lake.ColFile, lake.ColOffset}}, func(b lake.RawBatch) error {
		for i := range b.N {
			lines[fmt.Sprintf("%s@%d", b.File[i], b.Offset[i])]++
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	err = lk.ScanQuarantine(ctx, func(q lake.QuarantineRow) error {
		lines[fmt.Sprintf("%s@%d", q.File, q.Offset)]++
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	rows, err := lk.Windows(ctx, lake.AllFrom, lake.AllTo, -1)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		windows = append(windows, fmt.Sprintf("%s %s %+v %t", r.Window, r.Key, r.Agg, r.Final))
	}
	slices.Sort(windows)
	return lines, windows
}

// TestDiskFull fills the disk under the lake and the checkpoint at many
// points of a run (a data file, a Delta commit, the write-ahead offsets, a
// checkpoint commit): the stream stops with an error saying the disk is
// full and what to do; after space is freed a restart finishes the input,
// and the lake holds every line exactly once and the windows of a run that
// never failed.
func TestDiskFull(t *testing.T) {
	in := t.TempDir()
	n := faultInput(t, in)
	run := func(lakeDir string, d *disk) error {
		cfg := runnerConfig(t, in, lakeDir)
		cfg.Engine.Lateness = time.Second
		cfg.MaxBatchRows = 200
		cfg.Once, cfg.Drain = true, true
		cfg.LakeStore = openFull(t, lakeDir, d)
		cfg.CheckpointStore = openFull(t, filepath.Join(lakeDir, "_checkpoints", "stream"), d)
		_, err := Run(context.Background(), cfg)
		return err
	}
	refDir := t.TempDir()
	free := &disk{limit: -1}
	if err := run(refDir, free); err != nil {
		t.Fatal(err)
	}
	refStore, _ := store.OpenDir(refDir)
	refLines, refWindows := lakeFacts(t, refStore)
	if len(refLines) != n {
		t.Fatalf("reference run: got %d lines in the lake, want %d", len(refLines), n)
	}
	total := free.writes
	for _, after := range []int{0, 4, 9, 16, total / 2, total - 3, total - 1} {
		t.Run(fmt.Sprint(after), func(t *testing.T) {
			lakeDir := t.TempDir()
			d := &disk{}
			d.fill(after)
			err := run(lakeDir, d)
			if d.failed == 0 {
				t.Fatalf("the disk never filled (%d writes)", d.writes)
			}
			if !errors.Is(err, syscall.ENOSPC) || !strings.Contains(err.Error(), "disk is full; free space and start the stream again") {
				t.Fatalf("got %v, want a disk-full error saying what to do", err)
			}
			d.fill(-1) // space freed
			if err := run(lakeDir, d); err != nil {
				t.Fatalf("restart after freeing space: %v", err)
			}
			st, _ := store.OpenDir(lakeDir)
			lines, windows := lakeFacts(t, st)
			var missing, doubled []string
			for k := range refLines {
				switch lines[k] {
				case 0:
					missing = append(missing, k)
				case 1:
				default:
					doubled = append(doubled, k)
				}
			}
			if len(missing) > 0 || len(doubled) > 0 || len(lines) != n {
				t.Errorf("got %d lines, want %d; missing %d %v, doubled %d %v", len(lines), n, len(missing), head(missing), len(doubled), head(doubled))
			}
			if !slices.Equal(windows, refWindows) {
				t.Errorf("window results differ from the run without failures:\ngot  %d %v\nwant %d %v", len(windows), head(windows), len(refWindows), head(refWindows))
			}
		})
	}
}

func head(s []string) []string {
	slices.Sort(s)
	return s[:min(len(s), 5)]
}

// TestDiskFullTmpfs is TestDiskFull on a real full filesystem: the lake and
// its checkpoint on a tmpfs of half the size the run needs, so a write
// fails with ENOSPC part-way through a file; then the tmpfs is grown (space
// freed) and a restart finishes. It needs root to mount (skipped
// otherwise).
func TestDiskFullTmpfs(t *testing.T) {
	in := t.TempDir()
	n := faultInput(t, in)
	run := func(lakeDir string) error {
		cfg := runnerConfig(t, in, lakeDir)
		cfg.Engine.Lateness = time.Second
		cfg.MaxBatchRows = 200
		cfg.Once, cfg.Drain = true, true
		_, err := Run(context.Background(), cfg)
		return err
	}
	refDir := t.TempDir()
	if err := run(refDir); err != nil {
		t.Fatal(err)
	}
	var need int64
	filepath.WalkDir(refDir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			if fi, err := d.Info(); err == nil {
				need += (fi.Size() + 4095) / 4096 * 4096
			}
		}
		return nil
	})
	mnt := t.TempDir()
	size := need / 2 / 4096 * 4096
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", fmt.Sprintf("size=%d", size), "tmpfs", mnt).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs (needs root): %v: %s", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", mnt).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v: %s", mnt, err, out)
		}
	})
	lakeDir := filepath.Join(mnt, "lake")
	err := run(lakeDir)
	if !errors.Is(err, syscall.ENOSPC) || !strings.Contains(err.Error(), "disk is full; free space and start the stream again") {
		t.Fatalf("on a %d-byte tmpfs (the run needs ~%d): got %v, want a disk-full error saying what to do", size, need, err)
	}
	if out, err := exec.Command("mount", "-o", "remount,size=64m", mnt).CombinedOutput(); err != nil {
		t.Fatalf("grow the tmpfs: %v: %s", err, out)
	}
	if err := run(lakeDir); err != nil {
		t.Fatalf("restart after freeing space: %v", err)
	}
	refStore, _ := store.OpenDir(refDir)
	refLines, refWindows := lakeFacts(t, refStore)
	st, _ := store.OpenDir(lakeDir)
	lines, windows := lakeFacts(t, st)
	bad := 0
	for k := range refLines {
		if lines[k] != 1 {
			bad++
		}
	}
	if bad > 0 || len(lines) != n {
		t.Errorf("got %d lines, want %d; %d not exactly once", len(lines), n, bad)
	}
	if !slices.Equal(windows, refWindows) {
		t.Errorf("window results differ from the run without failures: got %d, want %d", len(windows), len(refWindows))
	}
}
