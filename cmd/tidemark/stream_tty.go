package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"

	"tidemark"
	"tidemark/stream"
)

// terminal is the live display of `tidemark stream` when stderr is a
// terminal and no --progress file was given: with --once a bar over the
// input pending at the start (progressbar renders it) and a line of counts
// under it; in a continuous run one status line. Both are redrawn in place.
// Logs and --print output on the same terminal go through above(), which
// lifts the display out of the way, writes, and draws it again.
type terminal struct {
	mu    sync.Mutex
	out   io.Writer
	width func() int
	now   func() time.Time
	once  bool

	start time.Time
	bar   *progressbar.ProgressBar
	lines []string // what is on screen now, cursor at the end of the last
	last  stream.Progress
	seen  bool      // last is set
	prev  time.Time // when the previous batch was reported (continuous rate)
	rate  string    // the continuous status's rate, of the last batch; "" when not shown
}

// isTerminal reports whether f is a terminal.
func isTerminal(f *os.File) bool { return f != nil && term.IsTerminal(int(f.Fd())) }

// newTerminal returns the display on f when f is a terminal, else nil.
func newTerminal(f *os.File, once bool) *terminal {
	if !isTerminal(f) {
		return nil
	}
	fd := int(f.Fd())
	return &terminal{out: f, once: once, now: time.Now, start: time.Now(), width: func() int {
		if w, _, err := term.GetSize(fd); err == nil && w > 0 {
			return w
		}
		return 80
	}}
}

// observe is the stream's OnProgress: it redraws the display.
func (t *terminal) observe(p stream.Progress) {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.now()
	var lines []string
	if t.once && p.Backlog.Known && p.Backlog.Bytes > 0 {
		if t.bar == nil {
			t.bar = progressbar.NewOptions64(p.Backlog.Bytes, progressbar.OptionSetWriter(io.Discard),
				progressbar.OptionShowBytes(true), progressbar.OptionShowCount(), progressbar.OptionShowTotalBytes(true), progressbar.OptionSetPredictTime(true),
				progressbar.OptionUseIECUnits(true), progressbar.OptionSetWidth(24),
				progressbar.OptionSetDescription("reading"))
			t.bar.StartWithoutRender()
		}
		if p.Drain {
			t.bar.Describe("draining")
		}
		_ = t.bar.Set64(p.Backlog.DoneBytes)
		lines = append(lines, strings.TrimLeft(t.bar.String(), "\r"), t.counts(p, now))
	} else {
		t.rate = t.rateOf(p, now) + " lines/s"
		lines = append(lines, statusLine(p, t.rate))
	}
	if p.Stalled != nil { // the log warns too, rate-limited; the display says it while it lasts
		lines = append(lines, "stalled: "+p.Stalled.Message())
	}
	t.last, t.seen, t.prev = p, true, now
	t.redraw(lines)
}

// idleAfter is how long without a batch before the continuous status says
// it is waiting, so a quiet stream does not look hung.
const idleAfter = 2 * time.Second

// tick redraws the continuous status with how long the stream has been
// waiting for data; startTicker calls it every second.
func (t *terminal) tick() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.rate == "" || len(t.lines) == 0 {
		return
	}
	rate := t.rate
	if idle := t.now().Sub(t.prev); idle >= idleAfter {
		rate = fmt.Sprintf("waiting for data %s", idle.Round(time.Second))
	}
	lines := []string{statusLine(t.last, rate)}
	if t.last.Stalled != nil {
		lines = append(lines, "stalled: "+t.last.Stalled.Message())
	}
	t.redraw(lines)
}

// startTicker runs tick every interval until the returned stop is called
// (which waits for it).
func (t *terminal) startTicker(interval time.Duration) (stop func()) {
	done, finished := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(finished)
		tk := time.NewTicker(interval)
		defer tk.Stop()
		for {
			select {
			case <-done:
				return
			case <-tk.C:
				t.tick()
			}
		}
	}()
	return func() { close(done); <-finished }
}

// counts is the line under the --once bar: rate, outcomes, watermark.
func (t *terminal) counts(p stream.Progress, now time.Time) string {
	el := now.Sub(t.start).Seconds()
	rate := 0.0
	if el > 0 {
		rate = float64(p.Totals.Lines) / el
	}
	s := fmt.Sprintf("%s lines, %s lines/s | ok %s | late %s | quarantined %s | watermark %s",
		tidemark.FormatCount(p.Totals.Lines), human(rate), tidemark.FormatCount(p.Totals.OK), tidemark.FormatCount(p.Totals.Late), tidemark.FormatCount(p.Totals.QuarantinedTotal()), wmText(p))
	return s
}

// rateOf is the lines per second of the batch p, over the time since the
// previous one (idle time included, as a person watching would count it).
func (t *terminal) rateOf(p stream.Progress, now time.Time) string {
	rate := 0.0
	if !t.prev.IsZero() {
		if d := now.Sub(t.prev).Seconds(); d > 0 {
			rate = float64(p.Rows) / d
		}
	} else if p.Duration > 0 {
		rate = float64(p.Rows) / p.Duration.Seconds()
	}
	return human(rate)
}

// statusLine is the one line of a continuous run; rate is what to say
// about the pace ("812k lines/s", or how long it has waited for data).
func statusLine(p stream.Progress, rate string) string {
	lag := "-"
	if !p.Watermark.IsZero() && !p.MaxEventTime.IsZero() {
		lag = max(0, p.MaxEventTime.Sub(p.Watermark)).String()
	}
	return fmt.Sprintf("batch %d | %s | watermark %s | %s behind newest event | batch %s | ok %s late %s quarantined %s",
		p.BatchID, rate, wmText(p), lag, p.Duration.Round(time.Millisecond),
		tidemark.FormatCount(p.Totals.OK), tidemark.FormatCount(p.Totals.Late), tidemark.FormatCount(p.Totals.QuarantinedTotal()))
}

func wmText(p stream.Progress) string {
	switch {
	case p.Drain:
		return "drained"
	case p.Watermark.IsZero():
		return "none yet"
	}
	return tidemark.FormatTime(p.Watermark.UnixMicro())
}

// redraw replaces what is on screen with lines, each cut to the terminal
// width so that none wraps (a wrapped line would break the cursor moves).
func (t *terminal) redraw(lines []string) {
	var b strings.Builder
	t.erase(&b)
	w := t.width() - 3 // room for an echoed ^C, so that it does not wrap
	for i, l := range lines {
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(cut(l, w))
	}
	t.lines = lines
	io.WriteString(t.out, b.String())
}

// erase clears the lines on screen, leaving the cursor at the start of the first.
func (t *terminal) erase(b *strings.Builder) {
	for i := range t.lines {
		if i > 0 {
			b.WriteString("\x1b[1A")
		}
		b.WriteString("\r\x1b[2K")
	}
}

// above returns a writer whose output appears above the display (logs,
// --print windows on the same terminal).
func (t *terminal) above(w io.Writer) io.Writer { return aboveWriter{t: t, w: w} }

type aboveWriter struct {
	t *terminal
	w io.Writer
}

func (a aboveWriter) Write(p []byte) (int, error) {
	t := a.t
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.lines) == 0 {
		return a.w.Write(p)
	}
	var b strings.Builder
	t.erase(&b)
	io.WriteString(t.out, b.String())
	n, err := a.w.Write(p)
	lines := t.lines
	t.lines = nil
	t.redraw(lines)
	return n, err
}

// clear takes the display off the screen.
func (t *terminal) clear() {
	t.mu.Lock()
	defer t.mu.Unlock()
	var b strings.Builder
	t.erase(&b)
	t.lines, t.rate = nil, ""
	io.WriteString(t.out, b.String())
}

// finish clears the display and prints the closing table.
func (t *terminal) finish(w io.Writer, sum *stream.Summary) {
	t.clear()
	t.mu.Lock()
	last, seen := t.last, t.seen
	t.mu.Unlock()
	var bytes int64
	if seen && last.Backlog.Known {
		bytes = last.Backlog.DoneBytes
	}
	writeSummaryTable(w, sum, t.now().Sub(t.start), bytes)
}

// writeSummaryTable is the closing summary for a person: lines by outcome,
// quarantine by reason, windows emitted, time and throughput. bytes is the
// input read, 0 when unknown.
func writeSummaryTable(w io.Writer, s *stream.Summary, took time.Duration, bytes int64) {
	row := func(indent int, name, value, note string) {
		line := fmt.Sprintf("%*s%-*s %14s", indent, "", 22-indent, name, value)
		if note != "" {
			line += "   " + note
		}
		fmt.Fprintln(w, line)
	}
	batches := "batches"
	if s.Batches == 1 {
		batches = "batch"
	}
	fmt.Fprintf(w, "tidemark stream: %d %s in %s, lake %s\n", s.Batches, batches, took.Round(time.Millisecond), s.Lake)
	rate := ""
	if secs := took.Seconds(); secs > 0 {
		rate = human(float64(s.Lines)/secs) + " lines/s"
		if bytes > 0 {
			rate += ", " + iec(float64(bytes)/secs) + "/s"
		}
	}
	row(2, "lines read", tidemark.FormatCount(s.Lines), rate)
	row(4, "ok", tidemark.FormatCount(s.OK), "")
	late := ""
	if s.Late > 0 {
		late = "left out of closed windows; reconcile absorbs them"
	}
	row(4, "late", tidemark.FormatCount(s.Late), late)
	row(4, "quarantined", tidemark.FormatCount(s.QuarantinedTotal()), "")
	for _, r := range tidemark.Reasons {
		if n := s.Quarantined[r]; n > 0 {
			row(6, string(r), tidemark.FormatCount(n), "")
		}
	}
	row(2, "windows emitted", tidemark.FormatCount(s.Emitted), "")
}

// human writes a rate with a k/M suffix: 812k, 1.2M.
func human(v float64) string {
	switch {
	case v >= 1e6:
		return fmt.Sprintf("%.1fM", v/1e6)
	case v >= 1e4:
		return fmt.Sprintf("%.0fk", v/1e3)
	}
	return fmt.Sprintf("%.0f", v)
}

// iec writes a byte count in binary units: 8.3 MiB.
func iec(v float64) string {
	units := []string{"B", "KiB", "MiB", "GiB", "TiB"}
	i := 0
	for v >= 1024 && i < len(units)-1 {
		v /= 1024
		i++
	}
	if i == 0 {
		return fmt.Sprintf("%.0f B", v)
	}
	return fmt.Sprintf("%.1f %s", v, units[i])
}

// cut shortens s to at most n characters (runes). The display's text is
// ASCII but for the bar's blocks, one column each on a UTF-8 terminal (an
// East Asian "ambiguous width" separator such as "·" is avoided: a line
// wider than the screen would wrap and break the redraw).
func cut(s string, n int) string {
	if n <= 0 || utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-3]) + "..."
}
