package delta

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestParseInterval(t *testing.T) {
	for _, c := range []struct {
		in   string
		want time.Duration
	}{
		{"interval 7 days", 7 * 24 * time.Hour},
		{"interval 1 week", 7 * 24 * time.Hour},
		{"INTERVAL 30 DAYS", 30 * 24 * time.Hour},
		{"168 hours", 168 * time.Hour},
		{"interval 2 days 12 hours", 60 * time.Hour},
		{"interval 90 seconds", 90 * time.Second},
		{"interval 0 days", 0},
	} {
		got, err := ParseInterval(c.in)
		if err != nil || got != c.want {
			t.Errorf("ParseInterval(%q) = %v, %v; want %v", c.in, got, err, c.want)
		}
	}
	for _, bad := range []string{"", "interval", "interval 7", "interval x days", "interval 7 days extra", "interval 1 month", "interval -1 days", "interval 99999999999999999 weeks"} {
		if _, err := ParseInterval(bad); err == nil {
			t.Errorf("ParseInterval(%q): got nil error, want one", bad)
		}
	}
}

func FuzzParseInterval(f *testing.F) {
	for _, s := range []string{"interval 7 days", "interval 2 days 12 hours", "1 week", "interval 9223372036854775807 nanoseconds", "interval 1 month"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := ParseInterval(s)
		if err == nil && d < 0 {
			t.Errorf("ParseInterval(%q) = %v, negative", s, d)
		}
	})
}

// ageLog sets the modification time of every file in the table's log to at.
func ageLog(t *testing.T, root, table string, at time.Time) {
	t.Helper()
	dir := filepath.Join(root, table, "_delta_log")
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if err := os.Chtimes(filepath.Join(dir, e.Name()), at, at); err != nil {
			t.Fatal(err)
		}
	}
}

// TestLogRetention runs a table through 40 days on an injected clock:
// 30 versions 40 days ago, each adding a file and removing the previous
// one, then 25 versions now. The checkpoint written now leaves out the
// 40-day-old tombstones (it is smaller than the old one with the same
// number of files), the log loses the commits and checkpoints below the
// newest checkpoint older than the retention, and every version from that
// checkpoint on still reads, while an older one is ErrVersionExpired.
func TestLogRetention(t *testing.T) {
	ctx := context.Background()
	st := newStore(t)
	now := time.Now()
	clock := now.Add(-40 * 24 * time.Hour)
	tbl := Open(st, "t", Options{CheckpointInterval: 10, Clock: func() time.Time { return clock }})
	mustCommit(t, tbl, testCreate(false))
	step := func(v int) {
		t.Helper()
		acts := []Action{addIn("", fmt.Sprintf("f%03d.parquet", v))}
		if v > 1 {
			acts = append(acts, Action{Remove: &Remove{Path: fmt.Sprintf("f%03d.parquet", v-1), DeletionTimestamp: clock.UnixMilli(), DataChange: true}})
		}
		if got := mustCommit(t, tbl, &Transaction{ReadVersion: int64(v - 1), Actions: acts}); got != int64(v) {
			t.Fatalf("committed version %d, want %d", got, v)
		}
	}
	for v := 1; v <= 30; v++ {
		step(v)
	}
	cp, err := readCheckpointFile(ctx, st, "t/_delta_log/00000000000000000030.checkpoint.parquet")
	if err != nil {
		t.Fatal(err)
	}
	oldRows := len(cp)
	if n := countRemoves(cp); n != 29 {
		t.Fatalf("checkpoint 30 (within retention when written) holds %d tombstones, want 29", n)
	}
	ageLog(t, st.String(), "t", clock)

	clock = now
	for v := 31; v <= 55; v++ {
		step(v)
	}
	cp, err = readCheckpointFile(ctx, st, "t/_delta_log/00000000000000000050.checkpoint.parquet")
	if err != nil {
		t.Fatal(err)
	}
	if n := countRemoves(cp); n != 20 {
		t.Errorf("checkpoint 50 holds %d tombstones, want the 20 of the last week (31..50)", n)
	}
	if len(cp) >= oldRows {
		t.Errorf("checkpoint 50 holds %d actions, checkpoint 30 %d: want fewer (expired tombstones left out)", len(cp), oldRows)
	}
	// The log: commits below 30 (the newest checkpoint older than 30 days)
	// are gone, and checkpoints 10 and 20; 30 on remain.
	ents, err := os.ReadDir(filepath.Join(st.String(), "t", "_delta_log"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	joined := strings.Join(names, " ")
	for _, gone := range []string{"00000000000000000000.json", "00000000000000000029.json", "00000000000000000010.checkpoint.parquet", "00000000000000000020.checkpoint.parquet"} {
		if strings.Contains(joined, gone) {
			t.Errorf("%s survived the log retention", gone)
		}
	}
	for _, kept := range []string{"00000000000000000030.json", "00000000000000000030.checkpoint.parquet", "00000000000000000031.json", "00000000000000000050.checkpoint.parquet"} {
		if !strings.Contains(joined, kept) {
			t.Errorf("%s was removed; a retained version needs it", kept)
		}
	}
	// The writer's cached state dropped the expired tombstones as well.
	if snap, err := tbl.Snapshot(ctx, -1); err != nil || len(snap.Tombstones) > 25 {
		t.Errorf("writer's latest snapshot: %d tombstones (%v), want at most the 25 of this week", len(snap.Tombstones), err)
	}
	// Time travel within the retention, on a fresh reader (no cache).
	fresh := Open(st, "t", Options{})
	for _, v := range []int64{30, 35, 49, 55} {
		s, err := fresh.Snapshot(ctx, v)
		if err != nil {
			t.Errorf("version %d: %v", v, err)
			continue
		}
		if got, want := paths(s), []string{fmt.Sprintf("f%03d.parquet", v)}; strings.Join(got, ",") != strings.Join(want, ",") {
			t.Errorf("version %d: got files %v, want %v", v, got, want)
		}
	}
	if _, err := fresh.Snapshot(ctx, 12); !errors.Is(err, ErrVersionExpired) || !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("version 12: got %v, want ErrVersionExpired", err)
	}
}

func countRemoves(actions []Action) int {
	n := 0
	for _, a := range actions {
		if a.Remove != nil {
			n++
		}
	}
	return n
}

// TestRetentionProperties: the table properties set both retentions, and
// delta.enableExpiredLogCleanup=false keeps the log whole.
func TestRetentionProperties(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		conf       map[string]string
		tombstones int  // in checkpoint 20
		cleaned    bool // commit 0 gone
	}{
		{map[string]string{PropDeletedFileRetention: "interval 1 hours", PropLogRetention: "interval 2 days"}, 0, true},
		{map[string]string{PropLogRetention: "interval 60 days"}, 19, false},
		{map[string]string{PropExpiredLogCleanup: "false"}, 19, false},
	} {
		st := newStore(t)
		now := time.Now()
		clock := now.Add(-3 * 24 * time.Hour)
		tbl := Open(st, "t", Options{CheckpointInterval: 10, Clock: func() time.Time { return clock }})
		create := testCreate(false)
		create.Actions[1].Metadata.Configuration = c.conf
		mustCommit(t, tbl, create)
		for v := 1; v <= 20; v++ {
			if v == 11 {
				ageLog(t, st.String(), "t", clock)
				clock = now
			}
			acts := []Action{addIn("", fmt.Sprintf("f%03d.parquet", v))}
			if v > 1 {
				acts = append(acts, Action{Remove: &Remove{Path: fmt.Sprintf("f%03d.parquet", v-1), DeletionTimestamp: clock.Add(-2 * time.Hour).UnixMilli(), DataChange: true}})
			}
			mustCommit(t, tbl, &Transaction{ReadVersion: int64(v - 1), Actions: acts})
		}
		cp, err := readCheckpointFile(ctx, st, "t/_delta_log/00000000000000000020.checkpoint.parquet")
		if err != nil {
			t.Fatal(err)
		}
		if n := countRemoves(cp); n != c.tombstones {
			t.Errorf("%v: checkpoint 20 holds %d tombstones, want %d", c.conf, n, c.tombstones)
		}
		_, err = os.Stat(filepath.Join(st.String(), "t", "_delta_log", "00000000000000000000.json"))
		if gone := errors.Is(err, fs.ErrNotExist); gone != c.cleaned {
			t.Errorf("%v: commit 0 gone = %v, want %v", c.conf, gone, c.cleaned)
		}
	}
}
