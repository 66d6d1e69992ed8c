package reconcile

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"tidemark"
)

// Report is what a run did.
type Report struct {
	RunID  string `json:"run_id"`
	DryRun bool   `json:"dry_run"`
	// Sessions: the lake holds session windows; the windows_* counts are
	// of (session, key) rows.
	Sessions bool `json:"sessions,omitempty"`

	// Counts of (window, key) aggregates.
	Checked   int64 `json:"windows_checked"`
	Corrected int64 `json:"windows_corrected"` // existing rows rewritten
	Inserted  int64 `json:"windows_inserted"`  // windows the stream never emitted (only late rows)
	Unchanged int64 `json:"windows_unchanged"`
	// Pending counts windows with late rows that the stream has not closed
	// yet; a later run checks them once it has.
	Pending int64 `json:"windows_pending"`
	// Orphans are window_results rows without a single raw row (raw data
	// deleted?); reconcile cannot delete them and only reports them.
	Orphans int64 `json:"windows_orphaned"`
	// Merged counts, on a session lake, the stored sessions that late rows
	// bridged: each was removed and replaced by the one exact session it
	// merged into with others. Merges lists the first of those exact
	// sessions (at most 20; reconcile_log names every one).
	Merged int64   `json:"sessions_merged,omitempty"`
	Merges []Merge `json:"merges,omitempty"`

	LateRowsAbsorbed int64 `json:"late_rows_absorbed"`

	// Largest deltas among corrected rows, on sum with a value field, on
	// count otherwise. Relative delta is |new-old|/|old|.
	LargestAbs *Change `json:"largest_abs_delta,omitempty"`
	LargestRel *Change `json:"largest_rel_delta,omitempty"`

	// RawFrom and RawTo are the raw_events versions consumed: late rows in
	// files committed in (RawFrom, RawTo].
	RawFrom int64 `json:"raw_version_from"`
	RawTo   int64 `json:"raw_version_to"`
	// Watermark is the highest stream watermark seen; windows ending at or
	// before it are closed.
	Watermark int64 `json:"watermark_us"`

	RowsRead       int64 `json:"rows_read"`
	PartitionsRead int64 `json:"partitions_read"`
	FilesRead      int64 `json:"files_read"`
	BytesRead      int64 `json:"bytes_read"`

	Duration time.Duration `json:"duration_ns"`
}

// Merge is one exact session written in place of several stored ones.
type Merge struct {
	Window   tidemark.Window
	Key      tidemark.Key
	Replaced []tidemark.Window
}

// MarshalJSON renders the sessions and key readably.
func (m Merge) MarshalJSON() ([]byte, error) {
	type window struct {
		Start string `json:"window_start"`
		End   string `json:"window_end"`
	}
	w := func(x tidemark.Window) window {
		return window{tidemark.FormatTime(x.Start), tidemark.FormatTime(x.End)}
	}
	out := struct {
		window
		Key      string   `json:"key"`
		Replaced []window `json:"replaced"`
	}{window: w(m.Window), Key: m.Key.String()}
	for _, x := range m.Replaced {
		out.Replaced = append(out.Replaced, w(x))
	}
	return json.Marshal(out)
}

// Change is how a correction moved one window's value (the report's
// "largest delta" is one): old and new, absolute and relative difference.
type Change struct {
	Window   tidemark.Window `json:"-"`
	Key      tidemark.Key    `json:"-"`
	Field    string          `json:"field"`
	Old      float64         `json:"old"`
	New      float64         `json:"new"`
	Abs      float64         `json:"abs"`
	Relative float64         `json:"relative"`
}

// MarshalJSON renders the window and key readably.
func (d Change) MarshalJSON() ([]byte, error) {
	type plain Change
	return json.Marshal(struct {
		WindowStart string `json:"window_start"`
		WindowEnd   string `json:"window_end"`
		Key         string `json:"key"`
		plain
	}{tidemark.FormatTime(d.Window.Start), tidemark.FormatTime(d.Window.End), d.Key.String(), plain(d)})
}

// WriteText prints the report for people.
func (r *Report) WriteText(w io.Writer) error {
	mode := ""
	if r.DryRun {
		mode = " (dry run: nothing written)"
	}
	fmt.Fprintf(w, "reconcile %s%s\n", r.RunID, mode)
	if r.Sessions {
		fmt.Fprintf(w, "  sessions checked   %d\n", r.Checked)
	} else {
		fmt.Fprintf(w, "  windows checked    %d\n", r.Checked)
	}
	fmt.Fprintf(w, "  corrected          %d\n", r.Corrected)
	fmt.Fprintf(w, "  inserted           %d\n", r.Inserted)
	fmt.Fprintf(w, "  unchanged          %d\n", r.Unchanged)
	if r.Pending > 0 {
		fmt.Fprintf(w, "  pending (open)     %d\n", r.Pending)
	}
	if r.Orphans > 0 {
		fmt.Fprintf(w, "  orphaned           %d\n", r.Orphans)
	}
	if r.Merged > 0 {
		fmt.Fprintf(w, "  sessions merged    %d\n", r.Merged)
		for _, m := range r.Merges {
			parts := make([]string, len(m.Replaced))
			for i, x := range m.Replaced {
				parts[i] = x.String()
			}
			fmt.Fprintf(w, "    %s <- %s (key %s)\n", m.Window, strings.Join(parts, " + "), m.Key)
		}
		if len(r.Merges) == maxMerges {
			fmt.Fprintf(w, "    ... (reconcile_log names every merge)\n")
		}
	}
	fmt.Fprintf(w, "  late rows absorbed %d\n", r.LateRowsAbsorbed)
	for _, d := range []struct {
		name string
		d    *Change
	}{{"largest abs delta ", r.LargestAbs}, {"largest rel delta ", r.LargestRel}} {
		if d.d != nil {
			fmt.Fprintf(w, "  %s %s %g -> %g (%s %s, key %s)\n", d.name, d.d.Field, d.d.Old, d.d.New, fmtChange(d.d), d.d.Window, d.d.Key)
		}
	}
	fmt.Fprintf(w, "  raw_events         versions %d..%d\n", r.RawFrom, r.RawTo)
	fmt.Fprintf(w, "  read               %d rows, %d partitions, %d files, %d bytes\n", r.RowsRead, r.PartitionsRead, r.FilesRead, r.BytesRead)
	_, err := fmt.Fprintf(w, "  duration           %s\n", r.Duration.Round(time.Millisecond))
	return err
}

func fmtChange(d *Change) string {
	return fmt.Sprintf("Δ %+g, %.3g%%", d.New-d.Old, d.Relative*100)
}

// WriteJSON prints the report as one JSON object.
func (r *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	return enc.Encode(r)
}
