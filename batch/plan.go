package batch

import (
	"cmp"
	"context"
	"fmt"
	"slices"

	"tidemark"
	"tidemark/lake"
)

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
		last := tidemark.FloorDiv(q.To-1, spec.Slide) * spec.Slide
		if last < first {
			return p, nil
		}
		p.want.lo, p.want.hi = first, last+1
		ranges = append(ranges, slice{first, last + spec.Size})
	}
	ranges = mergeRanges(ranges)

	layout, err := lk.RawLayout(ctx, q.Version)
	if err != nil {
		return nil, err
	}
	p.version = layout.Version
	if !layout.Partitioned {
		// Not partitioned the way tidemark writes: scan the ranges whole.
		p.slices = ranges
		p.stats.FilesRead, p.stats.BytesRead, p.stats.PartitionsRead = layout.Files, layout.Bytes, layout.Partitions
		return p, nil
	}
	hours := layout.Hours // sorted by Start
	// One slice per event hour, spanning every wanted range in it: several
	// windows in one hour then read its row groups once.
	perHour := map[int64]*slice{}
	var order []int64
	for _, r := range ranges {
		i, _ := slices.BinarySearchFunc(hours, tidemark.FloorDiv(r.from, tidemark.MicrosPerHour)*tidemark.MicrosPerHour, func(h lake.RawHour, t int64) int { return cmp.Compare(h.Start, t) })
		for ; i < len(hours) && hours[i].Start < r.to; i++ {
			h := hours[i].Start
			from, to := max(r.from, h), min(r.to, h+tidemark.MicrosPerHour)
			if s := perHour[h]; s != nil {
				s.from, s.to = min(s.from, from), max(s.to, to)
				continue
			}
			perHour[h] = &slice{from, to}
			order = append(order, h)
			p.stats.PartitionsRead++
			p.stats.FilesRead += hours[i].Files
			p.stats.BytesRead += hours[i].Bytes
		}
	}
	for _, h := range order {
		p.slices = append(p.slices, *perHour[h])
	}
	return p, nil
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

func ceilDiv(a, b int64) int64 { return -tidemark.FloorDiv(-a, b) }

func floorMod(a, b int64) int64 { return a - tidemark.FloorDiv(a, b)*b }
