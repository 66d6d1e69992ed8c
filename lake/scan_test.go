package lake

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"tidemark"
	"tidemark/lake/store"
)

// TestScanRawOneKey covers the dictionary paths of ScanRaw (one key
// column, status and strings decoded per dictionary entry), with and
// without filters, across several pages and row groups.
func TestScanRawOneKey(t *testing.T) {
	st, err := store.OpenDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	clock := &fakeClock{now: t0}
	cfg := testConfig(clock)
	cfg.Keys = []string{"page"}
	l, err := Open(context.Background(), st, cfg)
	if err != nil {
		t.Fatal(err)
	}
	recs := testRecords(rowGroupRows + 5000)
	for i := range recs {
		r := &recs[i]
		r.Reason, r.Err = tidemark.ReasonNone, ""
		r.EventTime = us(t0) + int64(i)*1000
		r.Key = tidemark.MakeKey(tidemark.KeyPart{Value: string(rune('a' + i%5))})
		if i%13 == 0 {
			r.Key = tidemark.MakeKey(tidemark.KeyPart{Null: true})
		}
	}
	if err := l.AppendBatch(context.Background(), Batch{AppID: "s", BatchID: 1, Records: recs}); err != nil {
		t.Fatal(err)
	}
	from, to := us(t0.Add(time.Minute)), us(t0.Add(2*time.Minute))
	tests := []struct {
		name string
		q    RawQuery
		keep func(r *tidemark.Record) bool
	}{
		{"all", RawQuery{}, func(*tidemark.Record) bool { return true }},
		{"late", RawQuery{Status: "late"}, func(r *tidemark.Record) bool { return r.Status == tidemark.StatusLate }},
		{"ok in range", RawQuery{Time: Between(from, to), Status: "ok"}, func(r *tidemark.Record) bool {
			return r.Status == tidemark.StatusOK && r.EventTime >= from && r.EventTime < to
		}},
	}
	for _, tc := range tests {
		var want []string
		for i := range recs {
			if tc.keep(&recs[i]) {
				want = append(want, recordText(&recs[i]))
			}
		}
		slices.Sort(want)
		got := scanAll(t, l, tc.q)
		if len(got) != len(want) {
			t.Fatalf("%s: got %d rows, want %d", tc.name, len(got), len(want))
		}
		for i := range got {
			if got[i] != want[i] {
				t.Fatalf("%s: row %d got %s, want %s", tc.name, i, got[i], want[i])
			}
		}
	}
}

// TestScanRawStopsEarly checks that an error from fn ends the scan with
// that error while row groups are still being decoded ahead (TestMain
// checks that the decoder stops).
func TestScanRawStopsEarly(t *testing.T) {
	l, _, _ := openTestLake(t)
	ctx := context.Background()
	recs := testRecords(3 * rowGroupRows)
	for i := range recs {
		recs[i].Reason = tidemark.ReasonNone
	}
	if err := l.AppendBatch(ctx, Batch{AppID: "s", BatchID: 1, Records: recs}); err != nil {
		t.Fatal(err)
	}
	stop := errors.New("stop")
	for _, after := range []int{1, 2, 3} {
		calls := 0
		err := l.ScanRaw(ctx, RawQuery{Columns: WindowColumns}, func(RawBatch) error {
			calls++
			if calls == after {
				return stop
			}
			return nil
		})
		if !errors.Is(err, stop) || calls != after {
			t.Errorf("stop after %d: got %v after %d calls, want %v", after, err, calls, stop)
		}
	}
}
