package lake

import (
	"context"
	"testing"
)

func TestEventTimeRange(t *testing.T) {
	l, _, _ := openTestLake(t)
	ctx := context.Background()
	if _, _, ok, err := l.EventTimeRange(ctx); err != nil || ok {
		t.Fatalf("empty lake: ok %v, err %v", ok, err)
	}
	recs := testRecords(50)
	if err := l.AppendBatch(ctx, Batch{AppID: "s", BatchID: 0, Records: recs}); err != nil {
		t.Fatal(err)
	}
	var lo, hi int64
	first := true
	for i := range recs {
		if r := &recs[i]; r.Valid() {
			if first || r.EventTime < lo {
				lo = r.EventTime
			}
			if first || r.EventTime >= hi {
				hi = r.EventTime + 1
			}
			first = false
		}
	}
	gotLo, gotHi, ok, err := l.EventTimeRange(ctx)
	if err != nil || !ok {
		t.Fatalf("ok %v, err %v", ok, err)
	}
	// Stats keep milliseconds: the range may widen by up to 1 ms, never narrow.
	if gotLo > lo || gotLo < lo-1000 || gotHi < hi || gotHi > hi+1000 {
		t.Errorf("range [%d, %d), want about [%d, %d)", gotLo, gotHi, lo, hi)
	}
}
