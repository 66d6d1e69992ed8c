package store_test

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"tidemark/lake/store"
)

// TestGate checks that Put, PutIfAbsent and Publish with a gated context
// publish nothing until the gate opens, that Reached tells a writer waits,
// that a gate opened with an error fails them and leaves no object and no
// temp file, and that a temp file left behind by a writer that died at the
// gate is swept.
func TestGate(t *testing.T) {
	root := t.TempDir()
	d, err := store.OpenDir(root)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	g := store.NewGate()
	gated := store.WithGate(ctx, g)
	f, err := d.Stage()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString("data"); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 3)
	go func() { done <- d.Put(gated, "a/put.json", strings.NewReader("put"), 3) }()
	go func() { done <- d.PutIfAbsent(gated, "a/absent.json", []byte("absent")) }()
	go func() { done <- d.Publish(gated, "a/staged.parquet", f) }()
	select {
	case <-g.Reached():
	case <-time.After(10 * time.Second):
		t.Fatal("no writer reached the gate")
	}
	time.Sleep(50 * time.Millisecond) // let all three get there
	if infos, err := d.List(ctx, "a/"); err != nil || len(infos) != 0 {
		t.Fatalf("before the gate opened: listed %v, %v, want nothing", infos, err)
	}
	select {
	case err := <-done:
		t.Fatalf("a gated write returned before the gate opened: %v", err)
	default:
	}
	g.Open(nil)
	for range 3 {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	if infos, err := d.List(ctx, "a/"); err != nil || len(infos) != 3 {
		t.Fatalf("after the gate opened: listed %v, %v, want the three objects", infos, err)
	}

	shut := store.NewGate()
	stop := errors.New("abandoned")
	shut.Open(stop)
	failed := store.WithGate(ctx, shut)
	f, err = d.Stage()
	if err != nil {
		t.Fatal(err)
	}
	for name, err := range map[string]error{
		"put":     d.Put(failed, "b/put.json", strings.NewReader("put"), 3),
		"absent":  d.PutIfAbsent(failed, "b/absent.json", []byte("absent")),
		"publish": d.Publish(failed, "b/staged.parquet", f),
	} {
		if !errors.Is(err, stop) {
			t.Errorf("%s through a gate opened with an error: got %v, want it", name, err)
		}
	}
	if infos, err := d.List(ctx, "b/"); err != nil || len(infos) != 0 {
		t.Errorf("after the failed writes: listed %v, %v, want nothing", infos, err)
	}
	tmp, err := os.ReadDir(filepath.Join(root, ".tidemark-tmp"))
	if err != nil || len(tmp) != 0 {
		t.Errorf("temp area after the failed writes: %v, %v, want empty", tmp, err)
	}

	// A writer killed while it waited at the gate leaves its temp file,
	// closed (so no longer locked): the sweep of old temp files takes it.
	left := filepath.Join(root, ".tidemark-tmp", "put-dead.tmp")
	if err := os.WriteFile(left, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	swept, err := d.SweepTemps(ctx, time.Now().Add(time.Second), false)
	if err != nil || len(swept) != 1 {
		t.Errorf("sweep: got %v, %v, want the dead writer's temp file", swept, err)
	}
	if _, err := os.Stat(left); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the dead writer's temp file is still there: %v", err)
	}

	// A gate does not outlive its context.
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if err := d.Put(store.WithGate(cctx, store.NewGate()), "c/put.json", strings.NewReader("put"), 3); !errors.Is(err, context.Canceled) {
		t.Errorf("Put with a cancelled context at a closed gate: got %v, want context.Canceled", err)
	}
}
