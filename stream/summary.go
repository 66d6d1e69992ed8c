package stream

import (
	"fmt"
	"strings"

	"tidemark"
)

// Summary is the row accounting of one run: every line read is ok, late or
// quarantined (SPEC §1).
type Summary struct {
	Batches     int64
	Lines       int64
	OK          int64
	Late        int64
	Quarantined map[tidemark.Reason]int64
	Emitted     int64
	Lake        string
}

// QuarantinedTotal sums the quarantine counts.
func (s *Summary) QuarantinedTotal() int64 {
	var n int64
	for _, v := range s.Quarantined {
		n += v
	}
	return n
}

// Accounting renders the identity "lines read = ok + late + quarantined".
func (s *Summary) Accounting() string {
	var b strings.Builder
	fmt.Fprintf(&b, "lines read %d = ok %d + late %d + quarantined %d", s.Lines, s.OK, s.Late, s.QuarantinedTotal())
	var parts []string
	for _, r := range tidemark.Reasons {
		if n := s.Quarantined[r]; n > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", r, n))
		}
	}
	if len(parts) > 0 {
		fmt.Fprintf(&b, " (%s)", strings.Join(parts, ", "))
	}
	fmt.Fprintf(&b, "; %d batches, %d windows emitted, lake %s", s.Batches, s.Emitted, s.Lake)
	return b.String()
}

func (s *Summary) count(c recordCounts) {
	s.OK += c.ok
	s.Late += c.late
	for reason, n := range c.quarantined {
		s.Lines += n
		s.Quarantined[reason] += n
	}
	s.Lines += c.ok + c.late
}

// recordCounts is what the summary and the progress line count of a
// batch's records by outcome, in one pass (countRecords). Their count by
// source is the batch's offsets entry's SourceRows, made by the reader.
type recordCounts struct {
	ok, late    int64
	quarantined map[tidemark.Reason]int64 // by reason: the invalid records
	missing     []string                  // key and value fields no valid record has (ingest.MissingFields)
}

// countRecords counts recs by outcome.
func countRecords(recs []tidemark.Record) recordCounts {
	c := recordCounts{quarantined: map[tidemark.Reason]int64{}}
	for i := range recs {
		r := &recs[i]
		switch {
		case !r.Valid():
			c.quarantined[r.Reason]++
		case r.Status == tidemark.StatusLate:
			c.late++
		default:
			c.ok++
		}
	}
	return c
}
