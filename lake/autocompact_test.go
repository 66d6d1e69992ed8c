package lake

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"tidemark"
	"tidemark/lake/delta"
)

func TestSizeTier(t *testing.T) {
	tests := []struct {
		size, target, factor int64
		want                 int
	}{
		{64 << 20, 128 << 20, 16, 0},
		{8 << 20, 128 << 20, 16, 0},
		{8<<20 - 1, 128 << 20, 16, 1},
		{512 << 10, 128 << 20, 16, 1},
		{400 << 10, 128 << 20, 16, 2},
		{0, 128 << 20, 16, 6}, // as 1 byte
		{3, 100, 2, 5},
	}
	for _, tc := range tests {
		if got := sizeTier(tc.size, tc.target, tc.factor); got != tc.want {
			t.Errorf("sizeTier(%d, %d, %d): got %d, want %d", tc.size, tc.target, tc.factor, got, tc.want)
		}
	}
}

func TestTierGroups(t *testing.T) {
	day := func(d string) map[string]*string { return map[string]*string{"date": &d} }
	var files []delta.Add
	add := func(n int, size int64, pv map[string]*string) {
		for range n {
			files = append(files, delta.Add{Path: fmt.Sprintf("f%03d", len(files)), Size: size, PartitionValues: pv})
		}
	}
	add(4, 100, day("a"))  // tier 3 of target 10000 with factor 4: 4 files, merged
	add(3, 1000, day("a")) // tier 1: 3 files, too few
	add(2, 6000, day("a")) // at least half the target: done
	add(3, 100, day("b"))  // too few in b
	add(9, 1000, day("c")) // tier 1: 9 files of 1000 binned to 10000
	got := tierGroups(files, 10000, 4)
	var sizes []string
	for _, g := range got {
		var total int64
		for _, a := range g {
			total += a.Size
			if *a.PartitionValues["date"] != *g[0].PartitionValues["date"] {
				t.Fatalf("group %v spans partitions", g)
			}
		}
		sizes = append(sizes, fmt.Sprintf("%s:%dx%d", *g[0].PartitionValues["date"], len(g), total))
	}
	want := []string{"a:4x400", "c:9x9000"}
	if !slices.Equal(sizes, want) {
		t.Errorf("got groups %v, want %v", sizes, want)
	}
}

// AutoCompact merges a partition's batch files once MinFiles gathered,
// keeps every row, commits dataChange=false, and leaves the merged file
// alone until MinFiles of its own tier gathered.
func TestAutoCompactKeepsRows(t *testing.T) {
	l, _, _ := openTestLake(t)
	ctx := context.Background()
	o := AutoCompactOptions{MinFiles: 4, TargetFileBytes: 1 << 30}
	var all []tidemark.Record
	appendBatch := func(b int) {
		recs := testRecords(300)
		for i := range recs {
			recs[i].Offset += int64(b) * 1_000_000
		}
		all = append(all, recs...)
		if err := l.AppendBatch(ctx, Batch{AppID: "s", BatchID: int64(b), Records: recs}); err != nil {
			t.Fatal(err)
		}
	}
	for b := range 3 {
		appendBatch(b)
	}
	rep, err := l.AutoCompact(ctx, TableRawEvents, o)
	if err != nil || rep.Version != -1 {
		t.Fatalf("3 files of 4: got %+v, %v, want no commit", rep, err)
	}
	appendBatch(3)
	before := tableVersion(t, l, TableRawEvents)
	rep, err = l.AutoCompact(ctx, TableRawEvents, o)
	if err != nil {
		t.Fatal(err)
	}
	if rep.FilesRemoved != 4 || rep.FilesAdded != 1 || rep.Version != before+1 {
		t.Errorf("got report %+v, want 4 files into 1 at version %d", rep, before+1)
	}
	if got, want := scanAll(t, l, RawQuery{}), wantValid(all); !slices.Equal(got, want) {
		t.Errorf("got %d rows, want %d", len(got), len(want))
	}
	snap, err := l.tables[TableRawEvents].dt.Snapshot(ctx, -1)
	if err != nil {
		t.Fatal(err)
	}
	if len(snap.Files) != 1 || snap.Files[0].DataChange {
		t.Errorf("got %d files (%+v), want one with dataChange=false", len(snap.Files), snap.Files)
	}
	// Four more batch files: merged among themselves, the bigger file of
	// the first merge stays.
	for b := 4; b < 8; b++ {
		appendBatch(b)
	}
	rep, err = l.AutoCompact(ctx, TableRawEvents, o)
	if err != nil || rep.FilesRemoved != 4 {
		t.Fatalf("got %+v, %v, want the 4 new files merged", rep, err)
	}
	if got, want := scanAll(t, l, RawQuery{}), wantValid(all); !slices.Equal(got, want) {
		t.Errorf("got %d rows, want %d", len(got), len(want))
	}
	if _, err := l.AutoCompact(ctx, TableRawEvents, AutoCompactOptions{MinFiles: 1}); err == nil {
		t.Error("MinFiles 1: got no error")
	}
}

// VacuumIfDue vacuums once per interval, whoever asks, and again once the
// interval passed.
func TestVacuumIfDue(t *testing.T) {
	l, _, clock := openTestLake(t)
	ctx := context.Background()
	o := VacuumOptions{Retain: SafeRetention}
	for i, tc := range []struct {
		advance time.Duration
		want    bool
	}{{0, true}, {time.Hour, false}, {22 * time.Hour, false}, {time.Hour, true}, {time.Minute, false}} {
		clock.advance(tc.advance)
		_, ran, err := l.VacuumIfDue(ctx, 24*time.Hour, o)
		if err != nil {
			t.Fatal(err)
		}
		if ran != tc.want {
			t.Errorf("step %d: got ran=%v, want %v", i, ran, tc.want)
		}
	}
	// The record is the lake's: another process opening it agrees.
	l2, err := Open(ctx, l.st, testConfig(clock))
	if err != nil {
		t.Fatal(err)
	}
	if _, ran, err := l2.VacuumIfDue(ctx, 24*time.Hour, o); err != nil || ran {
		t.Errorf("another process: got ran=%v, %v, want not due", ran, err)
	}
}
