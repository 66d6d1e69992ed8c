package batch

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"tidemark"
	"tidemark/lake"
	"tidemark/lake/delta"
)

const usPerHour = int64(time.Hour / time.Microsecond)

// windowSet is the set of window starts a query wants: explicit starts, or
// every start in [lo, hi).
type windowSet struct {
	starts map[int64]struct{}
	lo, hi int64
}

func (s *windowSet) has(start int64) bool {
	if s.starts != nil {
		_, ok := s.starts[start]
		return ok
	}
	return start >= s.lo && start < s.hi
}

// plan is how a query is read: the raw_events version, the event-time
// slices to scan (one per event hour that holds files, cut to the wanted
// ranges) and what those hours hold.
type plan struct {
	want    *windowSet
	version int64
	slices  []slice
	stats   Stats
}

// newPlan turns the query into event-time ranges, pins the raw_events
// version and cuts the ranges at the event hours (raw_events partitions)
// that hold files, so empty hours cost nothing and the slices spread over
// workers.
func newPlan(ctx context.Context, lk *lake.Lake, spec tidemark.WindowSpec, q Query) (*plan, error) {
	p := &plan{want: &windowSet{}}
	var ranges []slice
	if q.Windows != nil {
		p.want.starts = make(map[int64]struct{}, len(q.Windows))
		for _, w := range q.Windows {
			if w.End-w.Start != spec.Size || floorMod(w.Start, spec.Slide) != 0 {
				return nil, fmt.Errorf("window %s is not a window of the lake (size %dµs, slide %dµs)", w, spec.Size, spec.Slide)
			}
			p.want.starts[w.Start] = struct{}{}
			ranges = append(ranges, slice{w.Start, w.End})
		}
	} else {
		if q.To <= q.From || q.From < lake.AllFrom/2 || q.To > lake.AllTo/2 {
			return nil, fmt.Errorf("range [%d, %d): want a bounded, non-empty range", q.From, q.To)
		}
		first := ceilDiv(q.From, spec.Slide) * spec.Slide
		last := floorDiv(q.To-1, spec.Slide) * spec.Slide
		if last < first {
			return p, nil
		}
		p.want.lo, p.want.hi = first, last+1
		ranges = append(ranges, slice{first, last + spec.Size})
	}
	ranges = mergeRanges(ranges)

	dt := delta.Open(lk.Store(), lake.TableRawEvents, delta.Options{})
	snap, err := dt.Snapshot(ctx, cmp.Or(max(q.Version, 0), -1))
	if errors.Is(err, delta.ErrNoTable) {
		return p, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read raw events log: %w", err)
	}
	p.version = snap.Version
	// Files per event hour.
	type hourInfo struct{ files, bytes int64 }
	hours := map[int64]*hourInfo{}
	for i := range snap.Files {
		a := &snap.Files[i]
		h, ok := fileHour(a)
		if !ok {
			// Not partitioned the way tidemark writes: scan the ranges whole.
			return p.whole(ranges, snap), nil
		}
		hi := hours[h]
		if hi == nil {
			hi = &hourInfo{}
			hours[h] = hi
		}
		hi.files++
		hi.bytes += a.Size
	}
	keys := make([]int64, 0, len(hours))
	for h := range hours {
		keys = append(keys, h)
	}
	slices.Sort(keys)
	// One slice per event hour, spanning every wanted range in it: several
	// windows in one hour then read its row groups once.
	perHour := map[int64]*slice{}
	var order []int64
	for _, r := range ranges {
		i, _ := slices.BinarySearch(keys, floorDiv(r.from, usPerHour)*usPerHour)
		for ; i < len(keys) && keys[i] < r.to; i++ {
			h := keys[i]
			from, to := max(r.from, h), min(r.to, h+usPerHour)
			if s := perHour[h]; s != nil {
				s.from, s.to = min(s.from, from), max(s.to, to)
				continue
			}
			perHour[h] = &slice{from, to}
			order = append(order, h)
			p.stats.PartitionsRead++
			p.stats.FilesRead += hours[h].files
			p.stats.BytesRead += hours[h].bytes
		}
	}
	for _, h := range order {
		p.slices = append(p.slices, *perHour[h])
	}
	return p, nil
}

// whole scans the ranges as they are and counts every file.
func (p *plan) whole(ranges []slice, snap *delta.Snapshot) *plan {
	p.slices = ranges
	seen := map[string]bool{}
	for _, a := range snap.Files {
		p.stats.FilesRead++
		p.stats.BytesRead += a.Size
		pk := fmt.Sprint(a.PartitionValues)
		if !seen[pk] {
			seen[pk] = true
			p.stats.PartitionsRead++
		}
	}
	return p
}

// fileHour returns the start (µs) of the event hour partition of a file.
func fileHour(a *delta.Add) (int64, bool) {
	d, h := a.PartitionValues["event_date"], a.PartitionValues["event_hour"]
	if d == nil || h == nil {
		return 0, false
	}
	t, err := time.Parse(time.DateOnly, *d)
	if err != nil {
		return 0, false
	}
	hr, err := strconv.Atoi(*h)
	if err != nil || hr < 0 || hr > 23 {
		return 0, false
	}
	return t.UnixMicro() + int64(hr)*usPerHour, true
}

// mergeRanges sorts ranges and joins overlapping or touching ones.
func mergeRanges(rs []slice) []slice {
	slices.SortFunc(rs, func(a, b slice) int { return cmp.Compare(a.from, b.from) })
	out := rs[:0]
	for _, r := range rs {
		if n := len(out); n > 0 && r.from <= out[n-1].to {
			out[n-1].to = max(out[n-1].to, r.to)
			continue
		}
		out = append(out, r)
	}
	return out
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && (a < 0) != (b < 0) {
		q--
	}
	return q
}

func ceilDiv(a, b int64) int64 { return -floorDiv(-a, b) }

func floorMod(a, b int64) int64 { return a - floorDiv(a, b)*b }
