package stream

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"tidemark/lake"
	"tidemark/lake/delta"
	"tidemark/lake/store"
)

// rawCommitFault is a directory store whose raw_events commit of batch
// failBatch fails (ENOSPC), but only once a window_results data file of
// that batch was written: the batch's windows are then written and wait
// for a raw_events commit that never lands.
type rawCommitFault struct {
	store.Store
	failBatch int64

	mu          sync.Mutex
	windowFiles int // window_results data files written
	mark        int // windowFiles when the previous batch's window_results commit landed
	failed      bool
	windowSeen  bool // a window file of the batch was written before its commit failed
}

// batchOf is the batch a commit of table holds (its stream txn's version),
// -1 for any other commit.
func batchOf(table, key string, data []byte) int64 {
	if !strings.HasPrefix(key, table+"/_delta_log/") {
		return -1
	}
	for line := range strings.SplitSeq(string(data), "\n") {
		var a delta.Action
		if json.Unmarshal([]byte(line), &a) == nil && a.Txn != nil && !strings.HasPrefix(a.Txn.AppID, "tidemark-watermark:") {
			return a.Txn.Version
		}
	}
	return -1
}

func (s *rawCommitFault) Put(ctx context.Context, key string, r io.Reader, size int64) error {
	if strings.HasPrefix(key, lake.TableWindowResults+"/") && !strings.Contains(key, "_delta_log") {
		s.mu.Lock()
		s.windowFiles++
		s.mu.Unlock()
	}
	return s.Store.Put(ctx, key, r, size)
}

func (s *rawCommitFault) PutIfAbsent(ctx context.Context, key string, data []byte) error {
	if batchOf(lake.TableWindowResults, key, data) == s.failBatch-1 {
		err := s.Store.PutIfAbsent(ctx, key, data)
		s.mu.Lock()
		s.mark = s.windowFiles
		s.mu.Unlock()
		return err
	}
	if batchOf(lake.TableRawEvents, key, data) == s.failBatch {
		s.mu.Lock()
		armed := !s.failed
		s.failed = true
		s.mu.Unlock()
		if !armed {
			return s.Store.PutIfAbsent(ctx, key, data)
		}
		for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline) && !s.windowSeen; time.Sleep(time.Millisecond) {
			s.mu.Lock()
			s.windowSeen = s.windowFiles > s.mark
			s.mu.Unlock()
		}
		return &fs.PathError{Op: "put", Path: key, Err: syscall.ENOSPC}
	}
	return s.Store.PutIfAbsent(ctx, key, data)
}

// TestWindowsCommitAfterRawEvents fails a batch's raw_events commit while
// its window_results files, written beside raw_events, wait to be
// committed: the windows must not be committed (no window of a batch is
// visible before its raw rows), their files must be deleted, and a restart
// must leave every line in the lake exactly once with the windows of a run
// that never failed.
func TestWindowsCommitAfterRawEvents(t *testing.T) {
	in := t.TempDir()
	n := faultInput(t, in)
	run := func(lakeDir string, st store.Store) error {
		cfg := runnerConfig(t, in, lakeDir)
		cfg.Engine.Lateness = time.Second
		cfg.MaxBatchRows = 200
		cfg.Once, cfg.Drain = true, true
		if st != nil {
			cfg.LakeStore = st
		}
		_, err := Run(context.Background(), cfg)
		return err
	}
	refDir := t.TempDir()
	if err := run(refDir, nil); err != nil {
		t.Fatal(err)
	}
	refStore, _ := store.OpenDir(refDir)
	refLines, refWindows := lakeFacts(t, refStore)
	if len(refLines) != n {
		t.Fatalf("reference run: got %d lines in the lake, want %d", len(refLines), n)
	}

	lakeDir := t.TempDir()
	dir, err := store.OpenDir(lakeDir)
	if err != nil {
		t.Fatal(err)
	}
	fault := &rawCommitFault{Store: dir, failBatch: 2}
	err = run(lakeDir, fault)
	if !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("got %v, want the raw_events commit's ENOSPC", err)
	}
	if !fault.windowSeen {
		t.Fatal("no window_results file was written before the raw_events commit failed: the windows were not written beside raw_events")
	}
	ctx := context.Background()
	txnOf := func(table string) (int64, *delta.Snapshot) {
		snap, err := delta.Open(dir, table, delta.Options{}).Snapshot(ctx, -1)
		if err != nil {
			t.Fatal(err)
		}
		v := int64(-1)
		for appID, txn := range snap.Txns {
			if !strings.HasPrefix(appID, "tidemark-watermark:") {
				v = max(v, txn.Version)
			}
		}
		return v, snap
	}
	raw, _ := txnOf(lake.TableRawEvents)
	win, snap := txnOf(lake.TableWindowResults)
	if raw != 1 || win > raw {
		t.Fatalf("after the failed commit of batch 2: raw_events holds batches up to %d, window_results up to %d; want 1 and at most 1", raw, win)
	}
	live := map[string]bool{}
	for i := range snap.Files {
		live[snap.Files[i].Path] = true
	}
	var orphans []string
	err = filepath.WalkDir(filepath.Join(lakeDir, lake.TableWindowResults), func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || strings.Contains(p, "_delta_log") {
			return err
		}
		rel, _ := filepath.Rel(filepath.Join(lakeDir, lake.TableWindowResults), p)
		if !live[filepath.ToSlash(rel)] {
			orphans = append(orphans, rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(orphans) > 0 {
		t.Fatalf("window_results files left uncommitted after the failed batch: %v", orphans)
	}

	if err := run(lakeDir, nil); err != nil {
		t.Fatalf("restart: %v", err)
	}
	lines, windows := lakeFacts(t, dir)
	var wrong []string
	for k := range refLines {
		if lines[k] != 1 {
			wrong = append(wrong, k)
		}
	}
	if len(wrong) > 0 || len(lines) != n {
		t.Errorf("got %d lines, want %d, each once; wrong counts: %v", len(lines), n, head(wrong))
	}
	if !slices.Equal(windows, refWindows) {
		t.Errorf("window results differ from the run without failures:\ngot  %d %v\nwant %d %v", len(windows), head(windows), len(refWindows), head(refWindows))
	}
}
