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
	"sync/atomic"
	"testing"
	"time"

	"tidemark/lake/store"
)

// lakeFiles is what a lake directory holds: its data files, and per table
// the files its Delta log added and the batch ids of this stream's txns.
type lakeFiles struct {
	data  []string           // table-relative paths of every *.parquet file
	added map[string]bool    // "table/path" added by some log version
	txns  map[string][]int64 // table -> txn versions of its commits
}

func readLakeFiles(t *testing.T, root, appID string) lakeFiles {
	t.Helper()
	lf := lakeFiles{added: map[string]bool{}, txns: map[string][]int64{}}
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

// stageCounter is the lake's directory store, counting the data files
// staged (raw_events and quarantine files are staged as their writing
// begins) and telling whoever waits for a count.
type stageCounter struct {
	*store.Dir
	mu      sync.Mutex
	staged  int
	changed chan struct{} // closed and replaced at each Stage
}

func (s *stageCounter) Stage() (*os.File, error) {
	f, err := s.Dir.Stage()
	if err == nil {
		s.mu.Lock()
		s.staged++
		close(s.changed)
		s.changed = make(chan struct{})
		s.mu.Unlock()
	}
	return f, err
}

// await waits until n files are staged, or fails after a generous bound
// (a deadlock guard, not a wait for time to pass).
func (s *stageCounter) await(n int) bool {
	guard := time.NewTimer(30 * time.Second)
	defer guard.Stop()
	for {
		s.mu.Lock()
		got, changed := s.staged, s.changed
		s.mu.Unlock()
		if got >= n {
			return true
		}
		select {
		case <-changed:
		case <-guard.C:
			return false
		}
	}
}

// orderStore is a checkpoint store that checks the lake each time a
// write-ahead or commit entry is about to be written, and holds commits/N
// back until batch N+1's data files are being written: that happens only
// if the batches overlap as pipeline.go says.
type orderStore struct {
	store.Store
	check func(key string)
}

func (s *orderStore) Put(ctx context.Context, key string, r io.Reader, size int64) error {
	s.check(key)
	return s.Store.Put(ctx, key, r, size)
}

// TestPipelineWriteAhead checks the write-ahead protocol while batches
// overlap (pipeline.go): batch N+1's data files are being written before
// commits/N; when offsets/N is about to be written, commits/N-1 is written,
// no table holds batch N or later and every data file in the tables is
// one a commit added (the next batch's wait in the temp area); when
// commits/N is about to be written, offsets/N is there and raw_events
// holds the batch. After the run every data file in the lake is one a
// commit added.
func TestPipelineWriteAhead(t *testing.T) {
	// 1200 lines in one event hour and a malformed one in 50, so each
	// batch stages two files: one raw_events, one quarantine.
	in := t.TempDir()
	const n, rows = 1200, 100
	var lines strings.Builder
	base := time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC)
	for i := range n {
		if i%50 == 49 {
			fmt.Fprintf(&lines, "{\"event_time\": broken %d\n", i)
			continue
		}
		fmt.Fprintf(&lines, "{\"event_time\":%q,\"page\":\"/p%d\",\"value\":%d}\n", base.Add(time.Duration(i)*100*time.Millisecond).Format(time.RFC3339Nano), i%3, i%10)
	}
	if err := os.WriteFile(filepath.Join(in, "events.ndjson"), []byte(lines.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	batches := (n + rows - 1) / rows
	lakeDir, ckDir := t.TempDir(), t.TempDir()
	lakeDirStore, err := store.OpenDir(lakeDir)
	if err != nil {
		t.Fatal(err)
	}
	lakeStore := &stageCounter{Dir: lakeDirStore, changed: make(chan struct{})}
	ckInner, err := store.OpenDir(ckDir)
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu       sync.Mutex
		problems []string
		appID    string
		logged   int
		stalled  atomic.Bool
	)
	problem := func(format string, args ...any) {
		mu.Lock()
		problems = append(problems, fmt.Sprintf(format, args...))
		mu.Unlock()
	}
	exists := func(key string) bool {
		_, err := os.Stat(filepath.Join(ckDir, filepath.FromSlash(key)))
		return err == nil
	}
	ck := &orderStore{Store: ckInner}
	ck.check = func(key string) {
		var id int64
		kind, _, _ := strings.Cut(key, "/")
		if kind != "offsets" && kind != "commits" {
			return
		}
		fmt.Sscanf(strings.TrimPrefix(key, kind+"/"), "%d.json", &id)
		if kind == "commits" && id+1 < int64(batches) && !stalled.Load() && !lakeStore.await(2*int(id)+3) {
			stalled.Store(true) // once is enough: the others would wait as long
			problem("commits/%d was written with batch %d's data files still not begun after 30 s: the batches did not overlap", id, id+1)
		}
		mu.Lock()
		defer mu.Unlock()
		if appID == "" {
			data, err := os.ReadFile(filepath.Join(ckDir, "metadata.json"))
			if err != nil {
				problems = append(problems, fmt.Sprintf("before %s: metadata.json: %v", key, err))
				return
			}
			var meta checkpointMeta
			if err := json.Unmarshal(data, &meta); err != nil {
				problems = append(problems, fmt.Sprintf("before %s: metadata.json: %v", key, err))
				return
			}
			appID = meta.ID
		}
		lf := readLakeFiles(t, lakeDir, appID)
		for _, f := range lf.data {
			if !lf.added[f] {
				problems = append(problems, fmt.Sprintf("before %s: %s is in the lake, no commit added it", key, f))
			}
		}
		switch kind {
		case "offsets":
			logged++
			if id > 0 && !exists(batchKey("commits", id-1)) {
				problems = append(problems, fmt.Sprintf("offsets/%d is written before commits/%d", id, id-1))
			}
			for table, vs := range lf.txns {
				for _, v := range vs {
					if v >= id {
						problems = append(problems, fmt.Sprintf("before offsets/%d: %s already holds batch %d", id, table, v))
					}
				}
			}
		case "commits":
			if !exists(batchKey("offsets", id)) {
				problems = append(problems, fmt.Sprintf("commits/%d is written before offsets/%d", id, id))
			}
			var entry offsetsEntry
			data, err := os.ReadFile(filepath.Join(ckDir, filepath.FromSlash(batchKey("offsets", id))))
			if err == nil {
				err = json.Unmarshal(data, &entry)
			}
			if err != nil {
				problems = append(problems, fmt.Sprintf("before commits/%d: its write-ahead entry: %v", id, err))
				return
			}
			table := "raw_events" // every batch has valid rows
			if entry.Drain {
				table = "window_results" // the drain closes the open windows
			}
			if !slices.Contains(lf.txns[table], id) {
				problems = append(problems, fmt.Sprintf("before commits/%d: %s does not hold the batch", id, table))
			}
		}
	}
	cfg := runnerConfig(t, in, lakeDir)
	cfg.MaxBatchRows = rows
	cfg.Once, cfg.Drain = true, true
	cfg.LakeStore, cfg.CheckpointStore = lakeStore, ck
	sum, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if sum.Lines != int64(n) || logged != batches+1 {
		t.Fatalf("read %d lines in %d logged batches, want %d lines in %d (and the drain)", sum.Lines, logged, n, batches)
	}
	lf := readLakeFiles(t, lakeDir, appID)
	for _, f := range lf.data {
		if !lf.added[f] {
			problem("after the run, %s is in the lake and no commit added it", f)
		}
	}
	placed, _ := lakeFacts(t, lakeStore)
	if len(placed) != n {
		problem("the lake holds %d distinct lines, want %d", len(placed), n)
	}
	for line, c := range placed {
		if c != 1 {
			problem("line %s is in the lake %d times", line, c)
		}
	}
	for _, p := range problems {
		t.Error(p)
	}
}
