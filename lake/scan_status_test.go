package lake

import (
	"context"
	"strings"
	"testing"

	"tidemark"
	"tidemark/lake/store"
)

// A scan for late rows opens only the files that hold some: a file whose
// stats say every row is ok is skipped without being read.
func TestScanRawSkipsFilesByStatus(t *testing.T) {
	l, _, _ := openTestLake(t)
	ctx := context.Background()
	recs := testRecords(40)
	var okOnly, mixed []tidemark.Record
	for _, r := range recs {
		if !r.Valid() {
			continue
		}
		mixed = append(mixed, r)
		if r.Status == tidemark.StatusOK {
			okOnly = append(okOnly, r)
		}
	}
	if err := l.AppendBatch(ctx, Batch{AppID: "s", BatchID: 0, Records: okOnly}); err != nil {
		t.Fatal(err)
	}
	if err := l.AppendBatch(ctx, Batch{AppID: "s", BatchID: 1, Records: mixed}); err != nil {
		t.Fatal(err)
	}
	late := 0
	for _, r := range mixed {
		if r.Status == tidemark.StatusLate {
			late++
		}
	}
	counter := &countingStore{Store: l.st}
	l.st = counter
	got := 0
	err := l.ScanRaw(ctx, RawQuery{Status: "late", Columns: []string{ColEventTime}}, func(b RawBatch) error {
		got += b.N
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if got != late || late == 0 {
		t.Errorf("late rows: got %d, want %d", got, late)
	}
	infos, err := l.Tables(ctx)
	if err != nil {
		t.Fatal(err)
	}
	files := infos[0].Files // raw_events: the ok-only batch's files, then the mixed batch's
	if counter.opens == 0 || counter.opens > files/2 {
		t.Errorf("opened %d of %d data files, want only (some of) the mixed batch's %d", counter.opens, files, files/2)
	}
}

// countingStore counts the data files opened through it.
type countingStore struct {
	store.Store
	opens int
}

func (c *countingStore) Open(ctx context.Context, key string) (store.Reader, error) {
	if strings.HasSuffix(key, ".parquet") {
		c.opens++
	}
	return c.Store.Open(ctx, key)
}
