package stream

import (
	"maps"
	"testing"

	"tidemark"
)

// TestCountRecords holds the one-pass count to a record-by-record one,
// with the quarantined and late records among the valid ones.
func TestCountRecords(t *testing.T) {
	var recs []tidemark.Record
	wantReason := map[tidemark.Reason]int64{}
	var ok, late int64
	for i := range 500 {
		r := tidemark.Record{Source: []string{"a", "b", "", "c"}[(i/7+i/50)%4]}
		switch {
		case i%11 == 0:
			r.Reason = tidemark.ReasonMalformed
		case i%13 == 0:
			r.Reason = tidemark.ReasonMissingTime
		case i%3 == 0:
			r.Status = tidemark.StatusLate
		default:
			r.Status = tidemark.StatusOK
		}
		recs = append(recs, r)
		switch {
		case !r.Valid():
			wantReason[r.Reason]++
		case r.Status == tidemark.StatusLate:
			late++
		default:
			ok++
		}
	}
	c := countRecords(recs)
	if !maps.Equal(c.quarantined, wantReason) || c.ok != ok || c.late != late {
		t.Fatalf("got quarantined %v, ok %d, late %d; want %v, %d, %d", c.quarantined, c.ok, c.late, wantReason, ok, late)
	}
	s := Summary{Quarantined: map[tidemark.Reason]int64{}}
	s.count(c)
	s.count(countRecords(nil))
	if s.Lines != int64(len(recs)) || s.OK != ok || s.Late != late || !maps.Equal(s.Quarantined, wantReason) {
		t.Fatalf("summary %+v, want %d lines", s, len(recs))
	}
}
