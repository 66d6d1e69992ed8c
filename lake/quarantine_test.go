package lake

import (
	"context"
	"fmt"
	"slices"
	"testing"
)

func TestScanQuarantine(t *testing.T) {
	l, _, _ := openTestLake(t)
	ctx := context.Background()
	recs := testRecords(100)
	for b := int64(0); b < 2; b++ {
		part := recs[b*50 : (b+1)*50]
		if err := l.AppendBatch(ctx, Batch{AppID: "s", BatchID: b, Records: part, IngestTime: us(t0)}); err != nil {
			t.Fatal(err)
		}
	}
	var want, got []string
	for i := range recs {
		if r := &recs[i]; !r.Valid() {
			want = append(want, fmt.Sprintf("%s %q %s %s %d %q", r.Reason, r.Err, r.Source, r.File, r.Offset, r.Payload))
		}
	}
	err := l.ScanQuarantine(ctx, func(q QuarantineRow) error {
		got = append(got, fmt.Sprintf("%s %q %s %s %d %q", q.Reason, q.Error, q.Source, q.File, q.Offset, q.Payload))
		if q.IngestTime != us(t0) {
			t.Errorf("ingest_time %d, want %d", q.IngestTime, us(t0))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(want)
	slices.Sort(got)
	if len(want) != 10 || !slices.Equal(got, want) {
		t.Errorf("quarantine rows:\n got %v\nwant %v", got, want)
	}
}
