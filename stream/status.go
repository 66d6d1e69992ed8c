package stream

import (
	_ "embed"
	"encoding/json"
	"math"
	"net/http"
	"sync"
	"time"

	"tidemark"
	"tidemark/stream/engine"
)

// statusHistory bounds what the status page remembers: the newest
// historyBatches progress lines and historyWindows emitted windows.
const (
	historyBatches = 600
	historyWindows = 20
)

//go:embed status_page.html
var statusPage []byte

// sourceProgress is one source's part of a progress line: the figures its
// watermark comes from.
type sourceProgress struct {
	MaxEventTime string `json:"max_event_time,omitempty"`
	Watermark    string `json:"watermark,omitempty"`
	Idle         bool   `json:"idle,omitempty"`
}

// StatusInfo is what the status page says about the stream itself.
type StatusInfo struct {
	Name         string   `json:"name"`
	Lake         string   `json:"lake"`
	Checkpoint   string   `json:"checkpoint"`
	Sources      []string `json:"sources"`
	Window       string   `json:"window"`
	Slide        string   `json:"slide,omitempty"`
	SessionGap   string   `json:"session_gap,omitempty"` // session windows: the gap, and Window is ""
	Lateness     string   `json:"lateness"`
	LateRule     string   `json:"late_rule"`
	Policy       string   `json:"watermark_policy"`
	IdleTimeout  string   `json:"idle_timeout,omitempty"`
	Started      string   `json:"started"`
	HistoryLimit int      `json:"history_limit"`
	// Aggs are the --agg aggregates, as spelt (canonical).
	Aggs []string `json:"aggs,omitempty"`
}

// emittedWindow is one emitted window as the page lists it.
type emittedWindow struct {
	Start string `json:"window_start"`
	End   string `json:"window_end"`
	Key   string `json:"key"`
	Count int64  `json:"count"`
	Final bool   `json:"final"`
	Batch int64  `json:"batch_id"`
	// Aggs are the --agg aggregates' live estimates by column (null over
	// no values); the page lists them by column name.
	Aggs map[string]*float64 `json:"aggs,omitempty"`
}

// statusDoc is the /api/progress document.
type statusDoc struct {
	Info     StatusInfo      `json:"info"`
	Batches  int64           `json:"batches"` // all batches since start, also those no longer in Progress
	Progress []progress      `json:"progress"`
	Windows  []emittedWindow `json:"windows"` // newest first
}

// status keeps the recent progress lines for the status page: a ring of
// at most historyBatches lines, so memory is bounded over any run.
type status struct {
	mu      sync.Mutex
	info    StatusInfo
	ring    []progress
	next    int // ring index of the next line
	batches int64
	windows []emittedWindow // newest last, at most historyWindows
	aggs    tidemark.AggList
}

func newStatus(cfg RunnerConfig) *status {
	info := StatusInfo{
		Name: cfg.Name, Lake: cfg.Lake, Checkpoint: cfg.Checkpoint, Sources: cfg.Sources,
		Window:   us(cfg.Engine.Window.Size),
		Lateness: cfg.Engine.Lateness.String(),
		LateRule: "window", Policy: "min",
		Started:      tidemark.FormatTime(cfg.Clock().UnixMicro()),
		HistoryLimit: historyBatches,
	}
	if s := cfg.Engine.Window.Slide; s > 0 && s != cfg.Engine.Window.Size {
		info.Slide = us(s)
	}
	if cfg.SessionGap > 0 {
		info.Window, info.SessionGap = "", cfg.SessionGap.String()
	}
	if cfg.Engine.LateRule == engine.LateEvent {
		info.LateRule = "event"
	}
	if cfg.Engine.Policy == engine.PolicyMax {
		info.Policy = "max"
	}
	if cfg.Engine.IdleTimeout > 0 {
		info.IdleTimeout = cfg.Engine.IdleTimeout.String()
	}
	if !cfg.Engine.Aggs.Empty() {
		info.Aggs = cfg.Engine.Aggs.Strings()
	}
	return &status{info: info, aggs: cfg.Engine.Aggs}
}

func us(v int64) string { return (time.Duration(v) * time.Microsecond).String() }

// add records one batch's progress line and emitted windows.
func (s *status) add(p progress, emitted []tidemark.Result) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.ring) < historyBatches {
		s.ring = append(s.ring, p)
	} else {
		s.ring[s.next] = p
	}
	s.next = (s.next + 1) % historyBatches
	s.batches++
	from := max(0, len(emitted)-historyWindows)
	for _, r := range emitted[from:] {
		s.windows = append(s.windows, emittedWindow{
			Start: tidemark.FormatTime(r.Window.Start), End: tidemark.FormatTime(r.Window.End),
			Key: r.Key.String(), Count: r.Agg.Count, Final: r.Final, Batch: p.BatchID,
			Aggs: aggMap(s.aggs, r.State),
		})
	}
	if n := len(s.windows); n > historyWindows {
		s.windows = append(s.windows[:0], s.windows[n-historyWindows:]...)
	}
}

// doc returns a copy of the history, oldest batch first.
func (s *status) doc() statusDoc {
	s.mu.Lock()
	defer s.mu.Unlock()
	d := statusDoc{Info: s.info, Batches: s.batches, Progress: make([]progress, 0, len(s.ring)), Windows: make([]emittedWindow, 0, len(s.windows))}
	if len(s.ring) == historyBatches {
		d.Progress = append(d.Progress, s.ring[s.next:]...)
		d.Progress = append(d.Progress, s.ring[:s.next]...)
	} else {
		d.Progress = append(d.Progress, s.ring...)
	}
	for i := len(s.windows) - 1; i >= 0; i-- {
		d.Windows = append(d.Windows, s.windows[i])
	}
	return d
}

// serveJSON is /api/progress.
func (s *status) serveJSON(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	_ = json.NewEncoder(w).Encode(s.doc())
}

// servePage is /: one self-contained HTML page (inline CSS, inline script,
// SVG drawn by that script; nothing fetched but /api/progress), so it works
// with no network.
func servePage(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/" {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Content-Security-Policy", "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; connect-src 'self'; img-src data:")
	_, _ = w.Write(statusPage)
}

// aggMap is the --agg aggregates of state by column, null over no values;
// nil without --agg.
func aggMap(aggs tidemark.AggList, state *tidemark.AggState) map[string]*float64 {
	if aggs.Empty() {
		return nil
	}
	m := make(map[string]*float64, len(aggs.Specs))
	for i, v := range aggs.Values(state) {
		var p *float64
		if v.Valid && !math.IsNaN(v.V) && !math.IsInf(v.V, 0) {
			p = &v.V
		}
		m[aggs.Specs[i].Column()] = p
	}
	return m
}
