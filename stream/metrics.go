package stream

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"tidemark"
	"tidemark/stream/engine"
)

// metrics are the Prometheus view of the progress lines (SPEC §7).
type metrics struct {
	reg         *prometheus.Registry
	watermark   prometheus.Gauge
	maxEvent    prometheus.Gauge
	dropped     prometheus.Counter
	rows        *prometheus.CounterVec
	quarantined *prometheus.CounterVec
	batches     prometheus.Counter
	emitted     prometheus.Counter
	stateRows   prometheus.Gauge
	stateBytes  prometheus.Gauge
	ckptBytes   prometheus.Counter
	duration    prometheus.Histogram
	srcMark     *prometheus.GaugeVec
	srcMax      *prometheus.GaugeVec
	srcIdle     *prometheus.GaugeVec
	info        *prometheus.GaugeVec

	status *status // the page at / and /api/progress
	srv    *http.Server
	done   chan error
}

func newMetrics(cfg RunnerConfig) *metrics {
	m := &metrics{
		status: newStatus(cfg),
		reg:    prometheus.NewRegistry(),
		watermark: prometheus.NewGauge(prometheus.GaugeOpts{Name: "tidemark_watermark_seconds",
			Help: "Global event-time watermark, seconds since the epoch."}),
		maxEvent: prometheus.NewGauge(prometheus.GaugeOpts{Name: "tidemark_max_event_time_seconds",
			Help: "Largest event time seen in the last batch, seconds since the epoch."}),
		dropped: prometheus.NewCounter(prometheus.CounterOpts{Name: "tidemark_rows_dropped_by_watermark_total",
			Help: "Valid rows left out of a closed window (stored in raw_events as late)."}),
		rows: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "tidemark_input_rows_total",
			Help: "Input lines read, per source."}, []string{"source"}),
		quarantined: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "tidemark_quarantined_rows_total",
			Help: "Lines sent to quarantine, per reason."}, []string{"reason"}),
		batches: prometheus.NewCounter(prometheus.CounterOpts{Name: "tidemark_batches_total",
			Help: "Micro-batches committed."}),
		emitted: prometheus.NewCounter(prometheus.CounterOpts{Name: "tidemark_windows_emitted_total",
			Help: "Window results emitted."}),
		stateRows: prometheus.NewGauge(prometheus.GaugeOpts{Name: "tidemark_state_rows",
			Help: "Open (window, key) aggregates held in memory."}),
		stateBytes: prometheus.NewGauge(prometheus.GaugeOpts{Name: "tidemark_state_bytes",
			Help: "Estimated bytes held by open window state."}),
		ckptBytes: prometheus.NewCounter(prometheus.CounterOpts{Name: "tidemark_checkpoint_bytes_total",
			Help: "Bytes written to the checkpoint: write-ahead entries, state changelogs and snapshots, commit entries."}),
		duration: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "tidemark_batch_duration_seconds",
			Help: "Wall time to process and commit one batch.", Buckets: prometheus.ExponentialBuckets(0.001, 4, 10)}),
		srcMark: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "tidemark_source_watermark_seconds",
			Help: "Per source: max event time seen minus the lateness budget, seconds since the epoch."}, []string{"source"}),
		srcMax: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "tidemark_source_max_event_time_seconds",
			Help: "Per source: largest valid event time seen, seconds since the epoch."}, []string{"source"}),
		srcIdle: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "tidemark_source_idle",
			Help: "Per source: 1 while idle (silent for --idle-timeout, not holding the watermark back)."}, []string{"source"}),
		info: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "tidemark_stream_info",
			Help: "Always 1: where the stream reads and writes, as labels."}, []string{"name", "lake", "checkpoint"}),
	}
	m.reg.MustRegister(m.watermark, m.maxEvent, m.dropped, m.rows, m.quarantined, m.batches,
		m.emitted, m.stateRows, m.stateBytes, m.ckptBytes, m.duration, m.srcMark, m.srcMax, m.srcIdle, m.info)
	m.info.WithLabelValues(cfg.Name, cfg.Lake, cfg.Checkpoint).Set(1)
	for _, r := range tidemark.Reasons {
		m.quarantined.WithLabelValues(string(r))
	}
	return m
}

// DefaultMetricsAddr is where `tidemark stream` serves its status page and
// metrics when it follows its sources and --metrics-addr is not given.
const DefaultMetricsAddr = "127.0.0.1:9464"

// serve starts the /metrics endpoint, the status page at / and its JSON at
// /api/progress, and returns the address it listens on; stop shuts them
// down. With fallback, an address in use is replaced by a free port of the
// same host (the default address, taken by another stream of this host).
func (m *metrics) serve(addr string, fallback bool) (string, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil && fallback && errors.Is(err, syscall.EADDRINUSE) {
		if host, _, serr := net.SplitHostPort(addr); serr == nil {
			ln, err = net.Listen("tcp", net.JoinHostPort(host, "0"))
		}
	}
	if err != nil {
		return "", fmt.Errorf("--metrics-addr %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("/api/progress", m.status.serveJSON)
	mux.HandleFunc("/", servePage)
	m.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	m.done = make(chan error, 1)
	go func() { m.done <- m.srv.Serve(ln) }()
	return ln.Addr().String(), nil
}

func (m *metrics) stop() error {
	if m == nil || m.srv == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	err := m.srv.Shutdown(ctx)
	if serr := <-m.done; !errors.Is(serr, http.ErrServerClosed) {
		err = errors.Join(err, serr)
	}
	m.srv = nil
	return err
}

func (m *metrics) observe(p progress, res engine.BatchResult, marks []engine.SourceMark) {
	m.status.add(p, res.Emitted)
	for _, s := range marks {
		if s.HasEventTime {
			m.srcMax.WithLabelValues(s.Name).Set(float64(s.MaxEventTime) / 1e6)
		}
		if s.HasWatermark {
			m.srcMark.WithLabelValues(s.Name).Set(float64(s.Watermark) / 1e6)
		}
		idle := 0.0
		if s.Idle {
			idle = 1
		}
		m.srcIdle.WithLabelValues(s.Name).Set(idle)
	}
	for src, n := range p.InputRows {
		m.rows.WithLabelValues(src).Add(float64(n))
	}
	for reason, n := range p.Quarantined {
		m.quarantined.WithLabelValues(reason).Add(float64(n))
	}
	if res.HasWatermark && res.Watermark != tidemark.MaxTime {
		m.watermark.Set(float64(res.Watermark) / 1e6)
	}
	if res.Rows > 0 {
		m.maxEvent.Set(float64(res.MaxEventTime) / 1e6)
	}
	m.dropped.Add(float64(res.Dropped))
	m.batches.Inc()
	m.emitted.Add(float64(len(res.Emitted)))
	m.stateRows.Set(float64(res.OpenWindows))
	m.stateBytes.Set(float64(res.StateBytes))
	m.ckptBytes.Add(float64(p.CkptBytes))
	m.duration.Observe(p.DurationMs / 1000)
}
