package reconcile_test

import (
	"context"
	"testing"
	"time"

	"tidemark"
	"tidemark/lake"
	"tidemark/reconcile"
)

// A window that only late rows reached was closed by the stream without
// emitting anything. The stream's watermark recorded with its raw_events
// commits tells reconcile so: the window is inserted now, not at a later
// run after some other window happens to record a higher watermark.
func TestLateOnlyWindowClosedByRecordedWatermark(t *testing.T) {
	spec, err := tidemark.NewWindowSpec(10*time.Second, 0)
	if err != nil {
		t.Fatal(err)
	}
	tl := newTestLake(t, spec)
	ctx := context.Background()
	t0us := t0.UnixMicro()
	// Batch 0: an on-time row in [0s,10s); W ends at 12s, closing it; the
	// window row records W = 12s.
	w0 := t0us + 12*second
	b0 := []tidemark.Record{rec(0, t0us+1*second, "a", 1), rec(1, t0us+17*second, "a", 1)}
	closed := streamRows([]tidemark.Result{{Window: tidemark.Window{Start: t0us, End: t0us + 10*second}, Key: b0[0].Key, Agg: agg(1), Final: true}}, w0, true)
	if err := tl.lk.AppendBatch(ctx, lake.Batch{AppID: "s", BatchID: 0, Records: b0, Closed: closed, Watermark: &w0}); err != nil {
		t.Fatal(err)
	}
	// Batch 1: W moves to 45s (a row at 50s), closing [10s,20s) and
	// [20s,30s) — the latter never had a row, so nothing is emitted — and a
	// late row arrives for [20s,30s).
	w1 := t0us + 45*second
	late := rec(3, t0us+25*second, "b", 7)
	late.Status = tidemark.StatusLate
	b1 := []tidemark.Record{rec(2, t0us+50*second, "a", 1), late}
	if err := tl.lk.AppendBatch(ctx, lake.Batch{AppID: "s", BatchID: 1, Records: b1, Watermark: &w1}); err != nil {
		t.Fatal(err)
	}
	rep := tl.reconcile(t, reconcile.Config{})
	if rep.Inserted != 1 || rep.Pending != 0 {
		t.Fatalf("inserted %d, pending %d; want the late-only window inserted now", rep.Inserted, rep.Pending)
	}
	rows, err := tl.lk.Windows(ctx, t0us+20*second, t0us+30*second, -1)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 1 || rows[0].Agg.Count != 1 || rows[0].Origin != lake.OriginBatch || rows[0].Revision != 1 {
		t.Errorf("window [20s,30s): %+v", rows)
	}
}

func agg(n int64) tidemark.Agg {
	var a tidemark.Agg
	for range n {
		a.Add(1, true)
	}
	return a
}
