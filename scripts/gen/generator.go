package main

import (
	"container/heap"
	"math"
	"math/rand/v2"
)

// kind is what an event line is: valid, or which defect it carries.
type kind uint8

const (
	kindValid kind = iota
	kindFuture
	kindMalformed
	kindMissingTime
	kindBadTime
	kindBadValue
	kindBadUTF8
)

// badKinds are the bad-line kinds, drawn evenly.
var badKinds = [...]kind{kindMalformed, kindMissingTime, kindBadTime, kindBadValue, kindBadUTF8}

// reason names a kind as tidemark's quarantine reason ("" for valid).
func (k kind) reason() string {
	return [...]string{"", "future_time", "malformed", "missing_time", "bad_time", "bad_value", "bad_utf8"}[k]
}

// event is one line before formatting. Times are milliseconds since the epoch.
type event struct {
	seq       int64
	eventMS   int64
	arrivalMS int64
	page      int32
	user      int32
	country   uint8
	client    uint8
	action    uint8
	valueNull uint8 // 0 = value present, 1 = null, 2 = absent
	kind      kind
	variant   uint8 // which flavour of the defect
	cents     int64 // value in cents
	late      bool
}

var (
	countries = []string{"US", "DE", "IN", "BR", "GB", "FR", "JP", "ID", "IT", "RO", "RU", "CN", "MX", "ES", "CA", "NG", "KR", "AU", "PL", "NL"}
	clients   = []string{"web", "ios", "android"}
	actions   = []string{"view", "view", "view", "view", "click", "click", "add_to_cart", "purchase"}
)

// source draws events in event-time order from a seeded PCG.
type source struct {
	cfg     Config
	rng     *rand.Rand
	pages   *rand.Zipf
	users   *rand.Zipf
	country *rand.Zipf
	t       float64 // current event time, ms since epoch, fractional
	seq     int64
}

func newSource(cfg Config) *source {
	r := rand.New(rand.NewPCG(cfg.Seed, 0x7469646d61726b)) // "tidemark"
	return &source{
		cfg:     cfg,
		rng:     r,
		pages:   rand.NewZipf(r, 1.1, 1, uint64(cfg.Keys-1)),
		users:   rand.NewZipf(r, 1.05, 10, 999_999),
		country: rand.NewZipf(r, 1.3, 1, uint64(len(countries)-1)),
		t:       float64(cfg.Start.UnixMilli()),
	}
}

// medianLagMS and lagSigma shape the lognormal arrival lag of ordinary
// events: median 2 s, p99 about 20 s, p99.9 about 44 s.
const (
	medianLagMS = 2000
	lagSigma    = 1.0
	maxLagMS    = 30 * 60 * 1000 // cap on the lognormal tail
)

// next draws the next event in event-time order.
func (s *source) next() event {
	r := s.rng
	s.t += r.ExpFloat64() * 1000 / s.cfg.Rate
	e := event{
		seq:     s.seq,
		eventMS: int64(s.t),
		page:    int32(s.pages.Uint64()),
		user:    int32(s.users.Uint64()),
		country: uint8(s.country.Uint64()),
		action:  uint8(r.IntN(len(actions))),
		cents:   int64(math.Round(math.Exp(2.5+r.NormFloat64()) * 100)),
	}
	s.seq++
	e.client = uint8(pick(r, []float64{0.6, 0.2, 0.2}))
	lag := medianLagMS * math.Exp(lagSigma*r.NormFloat64())
	e.arrivalMS = e.eventMS + int64(math.Min(lag, maxLagMS))

	u := r.Float64()
	switch {
	case u < s.cfg.BadFrac:
		e.kind = badKinds[r.IntN(len(badKinds))]
		e.variant = uint8(r.IntN(2))
	case u < s.cfg.BadFrac+s.cfg.FutureFrac:
		e.kind = kindFuture
	case u < s.cfg.BadFrac+s.cfg.FutureFrac+s.cfg.LateFrac:
		// A phone that was offline: it sends its buffered events hours later.
		e.late = true
		e.client = 1 + uint8(r.IntN(2))
		e.arrivalMS = e.eventMS + int64(3600_000*(1+5*r.Float64()))
	}
	if e.kind == kindValid && r.Float64() < s.cfg.NullValueFrac {
		e.valueNull = 1 + uint8(r.IntN(2))
	}
	return e
}

// pick returns an index drawn with the given weights (summing to 1).
func pick(r *rand.Rand, weights []float64) int {
	u := r.Float64()
	for i, w := range weights {
		if u < w {
			return i
		}
		u -= w
	}
	return len(weights) - 1
}

// arrivalHeap orders in-flight events by arrival, then by draw order.
type arrivalHeap []event

func (h arrivalHeap) Len() int { return len(h) }
func (h arrivalHeap) Less(i, j int) bool {
	if h[i].arrivalMS != h[j].arrivalMS {
		return h[i].arrivalMS < h[j].arrivalMS
	}
	return h[i].seq < h[j].seq
}
func (h arrivalHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *arrivalHeap) Push(x any)   { *h = append(*h, x.(event)) }
func (h *arrivalHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	*h = old[:len(old)-1]
	return e
}

// inArrivalOrder draws n events and calls emit for each in arrival order.
// Events are drawn in event-time order and held in a heap until no later
// draw can arrive before them (every later event has arrival >= its event
// time >= the current one), so memory is bounded by the events in flight,
// not by n.
func inArrivalOrder(s *source, n int, emit func(*event) error) error {
	h := &arrivalHeap{}
	for range n {
		e := s.next()
		for h.Len() > 0 && (*h)[0].arrivalMS <= e.eventMS {
			top := heap.Pop(h).(event)
			if err := emit(&top); err != nil {
				return err
			}
		}
		heap.Push(h, e)
	}
	for h.Len() > 0 {
		top := heap.Pop(h).(event)
		if err := emit(&top); err != nil {
			return err
		}
	}
	return nil
}
