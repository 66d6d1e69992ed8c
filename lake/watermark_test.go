package lake

import (
	"context"
	"testing"
)

// The stream's watermark rides along in the raw_events commit and is read
// back as the highest any stream recorded.
func TestStreamWatermark(t *testing.T) {
	l, _, _ := openTestLake(t)
	ctx := context.Background()
	if _, ok, err := l.StreamWatermark(ctx); err != nil || ok {
		t.Fatalf("fresh lake: ok %v, err %v", ok, err)
	}
	recs := testRecords(20)
	for i, w := range []int64{1_000_000, 5_000_000, 3_000_000} { // a second stream lags behind
		app := "stream-a"
		if i == 2 {
			app = "stream-b"
		}
		w := w
		if err := l.AppendBatch(ctx, Batch{AppID: app, BatchID: int64(i), Records: recs, Watermark: &w}); err != nil {
			t.Fatal(err)
		}
	}
	w, ok, err := l.StreamWatermark(ctx)
	if err != nil || !ok || w != 5_000_000 {
		t.Errorf("got %d, %v, %v; want 5000000", w, ok, err)
	}
}
