package stream

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"tidemark/lake/store"
)

// lakeFiles is what a lake directory holds: its data files, and per table
// the files its Delta log ever added and the batch ids of its txns.
type lakeFiles struct {
	data  []string            // table-relative paths of every *.parquet file
	added map[string]bool     // "table/path" added by some log version
	txns  map[string][]int64  // table -> txn versions of its commits
	logs  map[string][]string // table -> its log entries
}

func readLakeFiles(t *testing.T, root, appID string) lakeFiles {
	t.Helper()
	lf := lakeFiles{added: map[string]bool{}, txns: map[string][]int64{}, logs: map[string][]string{}}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		rel = filepath.ToSlash(rel)
		if d.IsDir() && strings.HasPrefix(rel, ".") && rel != "." {
			return filepath.SkipDir // the temp area: nothing there is visible
		}
		table, rest, _ := strings.Cut(rel, "/")
		switch {
		case d.IsDir():
		case strings.HasSuffix(rel, ".parquet"):
			lf.data = append(lf.data, rel)
		case strings.HasPrefix(rest, "_delta_log/") && strings.HasSuffix(rest, ".json"):
			lf.logs[table] = append(lf.logs[table], rest)
			f, err := os.Open(p)
			if err != nil {
				return err
			}
			defer f.Close()
			sc := bufio.NewScanner(f)
			sc.Buffer(nil, 1<<24)
			for sc.Scan() {
				var a struct {
					Add *struct{ Path string }
					Txn *struct {
						AppID   string `json:"appId"`
						Version int64
					}
				}
				if err := json.Unmarshal(sc.Bytes(), &a); err != nil {
					return fmt.Errorf("%s: %w", rel, err)
				}
				if a.Add != nil {
					path, err := url.PathUnescape(a.Add.Path)
					if err != nil {
						return err
					}
					lf.added[table+"/"+path] = true
				}
				if a.Txn != nil && a.Txn.AppID == appID {
					lf.txns[table] = append(lf.txns[table], a.Txn.Version)
				}
			}
			return sc.Err()
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return lf
}

// orderStore is a checkpoint store that checks the lake each time a
// write-ahead or commit entry is about to be written, and holds each commit
// entry back a little, so that a next batch has time to publish what it
// must not yet.
type orderStore struct {
	store.Store
	check func(key string)
}

func (s *orderStore) Put(ctx context.Context, key string, r io.Reader, size int64) error {
	s.check(key)
	if strings.HasPrefix(key, "commits/") {
		time.Sleep(20 * time.Millisecond)
	}
	return s.Store.Put(ctx, key, r, size)
}

// TestPipelineWriteAhead checks the write-ahead protocol while batches
// overlap (pipeline.go): when offsets/N is about to be written, the lake
// holds no data file or log entry of batch N or later (every data file is
// one a commit added); when commits/N is about to be written, every table
// the batch wrote holds its commit.
func TestPipelineWriteAhead(t *testing.T) {
	in := t.TempDir()
	n := faultInput(t, in)
	lakeDir, ckDir := t.TempDir(), t.TempDir()
	lakeStore, err := store.OpenDir(lakeDir)
	if err != nil {
		t.Fatal(err)
	}
	ckInner, err := store.OpenDir(ckDir)
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu       sync.Mutex
		problems []string
		appID    string
		logged   int
	)
	ck := &orderStore{Store: ckInner}
	ck.check = func(key string) {
		mu.Lock()
		defer mu.Unlock()
		var id int64
		if appID == "" {
			data, err := os.ReadFile(filepath.Join(ckDir, "metadata.json"))
			if err != nil {
				return
			}
			var meta checkpointMeta
			if json.Unmarshal(data, &meta) != nil {
				return
			}
			appID = meta.ID
		}
		lf := readLakeFiles(t, lakeDir, appID)
		switch {
		case strings.HasPrefix(key, "offsets/"):
			fmt.Sscanf(strings.TrimPrefix(key, "offsets/"), "%d.json", &id)
			logged++
			for _, f := range lf.data {
				if !lf.added[f] {
					problems = append(problems, fmt.Sprintf("before offsets/%d: %s is in the lake, no commit added it", id, f))
				}
			}
			for table, vs := range lf.txns {
				for _, v := range vs {
					if v >= id {
						problems = append(problems, fmt.Sprintf("before offsets/%d: %s already holds batch %d", id, table, v))
					}
				}
			}
		case strings.HasPrefix(key, "commits/"):
			fmt.Sscanf(strings.TrimPrefix(key, "commits/"), "%d.json", &id)
			var entry offsetsEntry
			data, err := os.ReadFile(filepath.Join(ckDir, filepath.FromSlash(batchKey("offsets", id))))
			if err == nil {
				err = json.Unmarshal(data, &entry)
			}
			if err != nil {
				problems = append(problems, fmt.Sprintf("before commits/%d: its write-ahead entry: %v", id, err))
				return
			}
			table := "raw_events" // every batch of faultInput has valid rows
			if entry.Drain {
				table = "window_results" // the drain closes the open windows
			}
			if !slices.Contains(lf.txns[table], id) {
				problems = append(problems, fmt.Sprintf("before commits/%d: %s does not hold the batch", id, table))
			}
		}
	}
	cfg := runnerConfig(t, in, lakeDir)
	cfg.MaxBatchRows = 100
	cfg.Once, cfg.Drain = true, true
	cfg.LakeStore, cfg.CheckpointStore = lakeStore, ck
	sum, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if sum.Lines != int64(n) || logged < 10 {
		t.Fatalf("read %d lines in %d logged batches, want %d lines in at least 10", sum.Lines, logged, n)
	}
	for _, p := range problems {
		t.Error(p)
	}
}
