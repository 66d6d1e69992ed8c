package stream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path"
	"strings"
	"time"

	"tidemark"
	"tidemark/ingest"
	"tidemark/lake/store"
)

// RunnerConfig is everything `tidemark stream` needs. The zero value of each
// optional field means the documented default.
type RunnerConfig struct {
	Sources []string             // one watermark input each: directory, glob or s3://bucket/prefix
	Decoder ingest.DecoderConfig // how lines become records
	Engine  Config               // windows, watermark, late rule, output mode
	Lake    string               // directory or s3://bucket/prefix
	S3      store.S3Config       // endpoint and credentials for s3:// lakes and sources
	Name    string               // stream name; default "stream"

	Checkpoint   string        // default <Lake>/_checkpoints/<Name>
	MaxBatchRows int           // input lines per micro-batch; default 100000
	Trigger      time.Duration // minimum interval between batches
	Once         bool          // process what is available now, then return
	Drain        bool          // with Once: then close every open window
	Poll         bool          // local sources: rescans only, no fsnotify
	Rescan       time.Duration // rescan / S3 poll interval; default 10s
	MetricsAddr  string        // serve Prometheus metrics here; "" = off

	Print    io.Writer        // emitted windows as JSON lines; nil = off
	Progress io.Writer        // one JSON progress line per batch; nil = off
	Logger   *slog.Logger     // nil discards
	Clock    func() time.Time // nil = time.Now
}

func (c *RunnerConfig) defaults() {
	if c.Name == "" {
		c.Name = "stream"
	}
	if c.MaxBatchRows <= 0 {
		c.MaxBatchRows = 100_000
	}
	if c.Rescan <= 0 {
		c.Rescan = 10 * time.Second
	}
	if c.Checkpoint == "" {
		c.Checkpoint = joinLocation(c.Lake, "_checkpoints", c.Name)
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Clock == nil {
		c.Clock = time.Now
	}
}

// joinLocation appends path elements to a directory or s3:// URL.
func joinLocation(base string, elem ...string) string {
	if strings.HasPrefix(base, "s3://") {
		return strings.TrimSuffix(base, "/") + "/" + path.Join(elem...)
	}
	return strings.TrimSuffix(base, string(os.PathSeparator)) + string(os.PathSeparator) + path.Join(elem...)
}

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

func (s *Summary) count(recs []tidemark.Record) {
	for i := range recs {
		r := &recs[i]
		s.Lines++
		switch {
		case !r.Valid():
			s.Quarantined[r.Reason]++
		case r.Status == tidemark.StatusLate:
			s.Late++
		default:
			s.OK++
		}
	}
}

// Run runs the stream until ctx is cancelled (a clean exit: the current batch
// is finished and committed first) or, with Once, until the available input
// is processed.
func Run(ctx context.Context, cfg RunnerConfig) (*Summary, error) {
	cfg.defaults()
	r, err := newRunner(ctx, cfg)
	if err != nil {
		return nil, err
	}
	runErr := r.run(ctx)
	return r.sum, errors.Join(runErr, r.close())
}

// errNotJSON marks a position that cannot be serialised.
var errNotJSON = errors.New("stream: source position is not serialisable")

func marshalPositions(srcs []ingest.Source) (map[string]json.RawMessage, error) {
	out := make(map[string]json.RawMessage, len(srcs))
	for _, s := range srcs {
		b, err := json.Marshal(s.Position())
		if err != nil {
			return nil, fmt.Errorf("%w: %v", errNotJSON, err)
		}
		out[s.Name()] = b
	}
	return out, nil
}
