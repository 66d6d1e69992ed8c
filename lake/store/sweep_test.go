package store_test

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"tidemark/lake/store"
)

// sweepChildEnv makes TestDirSweepTemps's child stage a file in the store
// at this path, print its name and wait to be killed.
const sweepChildEnv = "TIDEMARK_TEST_SWEEP_CHILD"

// TestDirSweepTemps checks what SweepTemps removes from .tidemark-tmp: the
// staged file of a writer killed with SIGKILL before publishing (a real
// process, so the kernel drops its lock as a crash does), once older than
// the cutoff; never a file a live writer still holds, however old, nor a
// young one; and nothing at all on a dry run.
func TestDirSweepTemps(t *testing.T) {
	if root := os.Getenv(sweepChildEnv); root != "" {
		sweepChild(root)
		return
	}
	if runtime.GOOS == "windows" {
		t.Skip("no flock: the age alone decides there")
	}
	root := t.TempDir()
	d, err := store.OpenDir(root)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()

	// The crashed writer: a child that stages a file, then is killed.
	cmd := exec.Command(os.Args[0], "-test.run=^TestDirSweepTemps$", "-test.count=1")
	cmd.Env = append(os.Environ(), sweepChildEnv+"="+root)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		cmd.Process.Kill()
		t.Fatalf("child: %v", err)
	}
	crashed := strings.TrimSpace(strings.TrimPrefix(line, "staged "))
	// While the child lives its file is held, even when old.
	old := time.Now().Add(-10 * 24 * time.Hour)
	if err := os.Chtimes(crashed, old, old); err != nil {
		t.Fatal(err)
	}
	if swept, err := d.SweepTemps(ctx, time.Now(), false); err != nil || len(swept) != 0 {
		t.Errorf("sweep while the child lives: got %v, %v, want nothing", swept, err)
	}
	cmd.Process.Kill()
	cmd.Wait()

	// A live writer of this process: staged, written, old, not published.
	live, err := d.Stage()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := live.WriteString("in flight"); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(live.Name(), old, old); err != nil {
		t.Fatal(err)
	}
	// A young leftover, closed: too recent to judge.
	young, err := d.Stage()
	if err != nil {
		t.Fatal(err)
	}
	young.Close()

	cutoff := time.Now().Add(-7 * 24 * time.Hour)
	want := []string{".tidemark-tmp/" + filepath.Base(crashed)}
	dry, err := d.SweepTemps(ctx, cutoff, true)
	if err != nil || !slices.Equal(infoKeys(dry), want) {
		t.Errorf("dry run: got %v, %v, want %v", infoKeys(dry), err, want)
	}
	if _, err := os.Stat(crashed); err != nil {
		t.Errorf("dry run removed %s: %v", crashed, err)
	}
	swept, err := d.SweepTemps(ctx, cutoff, false)
	if err != nil || !slices.Equal(infoKeys(swept), want) {
		t.Errorf("sweep: got %v, %v, want %v", infoKeys(swept), err, want)
	}
	if len(swept) == 1 && swept[0].Size != int64(len("half a file")) {
		t.Errorf("swept size: got %d, want %d", swept[0].Size, len("half a file"))
	}
	if _, err := os.Stat(crashed); !os.IsNotExist(err) {
		t.Errorf("the crashed writer's file is still there: %v", err)
	}
	for _, f := range []string{live.Name(), young.Name()} {
		if _, err := os.Stat(f); err != nil {
			t.Errorf("%s was swept: %v", f, err)
		}
	}
	// The live writer publishes as if nothing happened.
	if err := d.Publish(ctx, "t/a.zstd.parquet", live); err != nil {
		t.Fatal(err)
	}
	if got, err := store.ReadAll(ctx, d, "t/a.zstd.parquet"); err != nil || string(got) != "in flight" {
		t.Errorf("published: got %q, %v", got, err)
	}
}

func infoKeys(infos []store.Info) []string {
	var out []string
	for _, i := range infos {
		out = append(out, i.Key)
	}
	return out
}

// sweepChild stages a file, writes part of it, says its name and waits.
func sweepChild(root string) {
	d, err := store.OpenDir(root)
	if err != nil {
		os.Exit(2)
	}
	f, err := d.Stage()
	if err != nil {
		os.Exit(2)
	}
	f.WriteString("half a file")
	os.Stdout.WriteString("staged " + f.Name() + "\n")
	time.Sleep(time.Minute)
	os.Exit(3)
}
