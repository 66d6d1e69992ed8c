package stream

import (
	"bufio"
	"encoding/json"
	"io"
	"math"
	"strconv"
	"time"

	"tidemark"
)

// progress is one line of the per-batch progress log (SPEC §7), shaped like
// Spark's StreamingQueryProgress.
type progress struct {
	BatchID       int64            `json:"batch_id"`
	Timestamp     string           `json:"timestamp"`
	InputRows     map[string]int64 `json:"input_rows"`
	NumInputRows  int64            `json:"num_input_rows"`
	RowsPerSecond float64          `json:"processed_rows_per_second"`
	EventTime     eventTime        `json:"event_time"`
	Dropped       int64            `json:"rows_dropped_by_watermark"`
	Quarantined   map[string]int64 `json:"quarantined"`
	StateRows     int              `json:"state_rows"`
	StateBytes    int64            `json:"state_bytes"`
	CkptBytes     int64            `json:"checkpoint_bytes"` // written for the batch: write-ahead entry, state file, commit entry
	Emitted       int              `json:"windows_emitted"`
	DurationMs    float64          `json:"duration_ms"`
	Drain         bool             `json:"drain,omitempty"`
}

type eventTime struct {
	Min       string `json:"min,omitempty"`
	Max       string `json:"max,omitempty"`
	Avg       string `json:"avg,omitempty"`
	Watermark string `json:"watermark,omitempty"`
}

// report writes the batch's progress line and updates metrics.
func (r *runner) report(entry offsetsEntry, recs []tidemark.Record, res BatchResult, took time.Duration) {
	p := progress{
		BatchID:     entry.BatchID,
		Timestamp:   tidemark.FormatTime(entry.ReadTime),
		InputRows:   map[string]int64{},
		Quarantined: map[string]int64{},
		Dropped:     res.Dropped,
		StateRows:   res.OpenWindows,
		StateBytes:  res.StateBytes,
		CkptBytes:   r.ck.takeWritten(),
		Emitted:     len(res.Emitted),
		DurationMs:  float64(took.Microseconds()) / 1000,
		Drain:       entry.Drain,
	}
	for i := range recs {
		p.InputRows[recs[i].Source]++
		if !recs[i].Valid() {
			p.Quarantined[string(recs[i].Reason)]++
		}
	}
	p.NumInputRows = int64(len(recs))
	if took > 0 {
		p.RowsPerSecond = math.Round(float64(len(recs))/took.Seconds()*10) / 10
	}
	if res.Rows > 0 {
		p.EventTime.Min = tidemark.FormatTime(res.MinEventTime)
		p.EventTime.Max = tidemark.FormatTime(res.MaxEventTime)
		p.EventTime.Avg = tidemark.FormatTime(res.AvgEventTime)
	}
	if res.HasWatermark && res.Watermark != tidemark.MaxTime {
		p.EventTime.Watermark = tidemark.FormatTime(res.Watermark)
	}
	if r.metrics != nil {
		r.metrics.observe(p, res)
	}
	if r.cfg.Progress == nil {
		return
	}
	line, _ := json.Marshal(p)
	r.cfg.Progress.Write(append(line, '\n'))
}

// printResults writes emitted windows as JSON lines (SPEC §3):
// window_start, window_end, one property per key, count, sum/min/max (with a
// value field; null when no row had a value), final.
func printResults(w io.Writer, keys []string, withValue bool, results []tidemark.Result) error {
	bw := bufio.NewWriter(w)
	buf := make([]byte, 0, 256)
	for _, res := range results {
		buf = append(buf[:0], `{"window_start":"`...)
		buf = append(buf, tidemark.FormatTime(res.Window.Start)...)
		buf = append(buf, `","window_end":"`...)
		buf = append(buf, tidemark.FormatTime(res.Window.End)...)
		buf = append(buf, '"')
		parts := res.Key.Parts()
		for i, k := range keys {
			buf = append(buf, ',')
			buf = strconv.AppendQuote(buf, k)
			buf = append(buf, ':')
			if i >= len(parts) || parts[i].Null {
				buf = append(buf, "null"...)
			} else {
				kb, _ := json.Marshal(parts[i].Value)
				buf = append(buf, kb...)
			}
		}
		buf = append(buf, `,"count":`...)
		buf = strconv.AppendInt(buf, res.Agg.Count, 10)
		if withValue {
			for _, f := range []struct {
				name string
				v    float64
			}{{"sum", res.Agg.Total()}, {"min", res.Agg.Min}, {"max", res.Agg.Max}} {
				buf = append(buf, `,"`...)
				buf = append(buf, f.name...)
				buf = append(buf, `":`...)
				if res.Agg.Values == 0 {
					buf = append(buf, "null"...)
				} else {
					buf = appendFloat(buf, f.v)
				}
			}
		}
		buf = append(buf, `,"final":`...)
		buf = strconv.AppendBool(buf, res.Final)
		buf = append(buf, "}\n"...)
		if _, err := bw.Write(buf); err != nil {
			return err
		}
	}
	return bw.Flush()
}

// appendFloat writes a float as JSON: shortest round-trip form, and never
// NaN or Inf (not JSON), which become null.
func appendFloat(buf []byte, v float64) []byte {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return append(buf, "null"...)
	}
	return strconv.AppendFloat(buf, v, 'g', -1, 64)
}
