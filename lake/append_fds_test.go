package lake

import (
	"context"
	"os"
	"slices"
	"testing"
	"time"

	"tidemark"
)

// TestPrepareManyHoursBoundsDescriptors checks that a batch spanning many
// event hours (one data file each) holds at most maxOpenStaged of its
// staged files open until the commit, and that every row is committed.
func TestPrepareManyHoursBoundsDescriptors(t *testing.T) {
	if _, err := os.ReadDir("/proc/self/fd"); err != nil {
		t.Skip("no /proc/self/fd to count descriptors")
	}
	l, _, _ := openTestLake(t)
	ctx := context.Background()
	const hours = 200
	recs := testRecords(hours * 3)
	for i := range recs {
		recs[i].Reason, recs[i].Err = tidemark.ReasonNone, ""
		recs[i].EventTime = us(t0) + int64(i/3)*int64(time.Hour/time.Microsecond) // 3 rows per hour
	}
	b := Batch{AppID: "s", BatchID: 1, Records: recs, IngestTime: us(t0)}
	before := openFDs(t)
	p := l.PrepareBatch(ctx, b)
	if p.raw.err != nil {
		t.Fatal(p.raw.err)
	}
	if got := len(p.raw.staged); got != hours {
		t.Fatalf("got %d staged files, want one per hour: %d", got, hours)
	}
	if grew := openFDs(t) - before; grew > maxOpenStaged+2 {
		t.Errorf("a prepared batch of %d hour partitions holds %d more descriptors, want at most %d", hours, grew, maxOpenStaged+2)
	}
	if err := l.CommitBatch(ctx, b, p); err != nil {
		t.Fatal(err)
	}
	var want []string
	for i := range recs {
		want = append(want, recordText(&recs[i]))
	}
	slices.Sort(want)
	got := scanAll(t, l, RawQuery{})
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Errorf("got %d rows back, want %d", len(got), len(want))
	}
	if grew := openFDs(t) - before; grew > 2 {
		t.Errorf("%d more descriptors open after the commit, want none left", grew)
	}
}

func openFDs(t *testing.T) int {
	t.Helper()
	es, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(es)
}
