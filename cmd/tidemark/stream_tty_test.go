package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"tidemark"
	"tidemark/stream"
)

// fakeTerminal is the display writing to a buffer, with a fixed width and clock.
func fakeTerminal(once bool, width int) (*terminal, *bytes.Buffer) {
	var out bytes.Buffer
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	now := start
	t := &terminal{out: &out, once: once, start: start, width: func() int { return width },
		now: func() time.Time { now = now.Add(time.Second); return now }}
	return t, &out
}

func TestTerminalOnceBar(t *testing.T) {
	tty, out := fakeTerminal(true, 200)
	p := stream.Progress{BatchID: 0, Rows: 500, Watermark: time.Date(2026, 1, 1, 10, 9, 0, 0, time.UTC),
		Totals:  stream.Summary{Lines: 500, OK: 490, Late: 4, Quarantined: map[tidemark.Reason]int64{tidemark.ReasonMalformed: 6}},
		Backlog: stream.Backlog{Known: true, Bytes: 4 << 20, DoneBytes: 1 << 20, Files: 2}}
	tty.observe(p)
	first := out.String()
	for _, want := range []string{"reading  25% |", "1.0/4.0 MiB", "500 lines, 500 lines/s | ok 490 | late 4 | quarantined 6 | watermark 2026-01-01T10:09:00Z"} {
		if !strings.Contains(first, want) {
			t.Errorf("display lacks %q:\n%q", want, first)
		}
	}
	if strings.Contains(first, "\x1b[") {
		t.Errorf("the first draw erases something: %q", first)
	}
	out.Reset()
	p.Drain = true
	tty.observe(p)
	// Two lines on screen: clear the second, go up, clear the first.
	if !strings.HasPrefix(out.String(), "\r\x1b[2K\x1b[1A\r\x1b[2K") || !strings.Contains(out.String(), "draining") || !strings.Contains(out.String(), "watermark drained") {
		t.Errorf("redraw: %q", out.String())
	}
}

func TestTerminalAboveAndWidth(t *testing.T) {
	tty, out := fakeTerminal(false, 40)
	tty.observe(stream.Progress{BatchID: 7, Rows: 10, Duration: 20 * time.Millisecond, Totals: stream.Summary{Quarantined: map[tidemark.Reason]int64{}}})
	line := out.String()
	if n := len([]rune(line)); n != 37 || !strings.HasPrefix(line, "batch 7 | 500 lines/s | watermark ") || !strings.HasSuffix(line, "...") {
		t.Errorf("status line (%d runes, want 37: the width less room for ^C): %q", n, line)
	}
	out.Reset()
	var logs bytes.Buffer
	tty.above(&logs).Write([]byte("a log line\n"))
	if logs.String() != "a log line\n" || out.String() != "\r\x1b[2K"+line {
		t.Errorf("above: logs %q, screen %q; want the line erased and drawn again", logs.String(), out.String())
	}
	out.Reset()
	tty.clear()
	tty.above(&logs).Write([]byte("x\n"))
	if out.String() != "\r\x1b[2K" {
		t.Errorf("after clear nothing is redrawn: %q", out.String())
	}
}

func TestSummaryTable(t *testing.T) {
	var b bytes.Buffer
	writeSummaryTable(&b, &stream.Summary{Batches: 3, Lines: 1234567, OK: 1234000, Late: 500, Emitted: 42, Lake: "/l",
		Quarantined: map[tidemark.Reason]int64{tidemark.ReasonMalformed: 60, tidemark.ReasonFutureTime: 7}}, 2*time.Second, 100<<20)
	want := `tidemark stream: 3 batches in 2s, lake /l
  lines read                1,234,567   617k lines/s, 50.0 MiB/s
    ok                      1,234,000
    late                          500   left out of closed windows; reconcile absorbs them
    quarantined                    67
      malformed                    60
      future_time                   7
  windows emitted                  42
`
	if b.String() != want {
		t.Errorf("got:\n%s\nwant:\n%s", b.String(), want)
	}
}

func TestGroupHuman(t *testing.T) {
	for _, c := range []struct {
		n    int64
		want string
	}{{0, "0"}, {999, "999"}, {1000, "1,000"}, {-1234567, "-1,234,567"}} {
		if got := tidemark.FormatCount(c.n); got != c.want {
			t.Errorf("FormatCount(%d): got %q, want %q", c.n, got, c.want)
		}
	}
	for _, c := range []struct {
		v    float64
		want string
	}{{12.4, "12"}, {9999, "9999"}, {81300, "81k"}, {2.34e6, "2.3M"}} {
		if got := human(c.v); got != c.want {
			t.Errorf("human(%v): got %q, want %q", c.v, got, c.want)
		}
	}
}

// A quiet continuous stream says how long it has been waiting for data.
func TestTerminalIdle(t *testing.T) {
	tty, out := fakeTerminal(false, 200)
	tty.tick() // nothing on screen yet: nothing drawn
	if out.Len() != 0 {
		t.Errorf("tick before the first batch drew %q", out.String())
	}
	tty.observe(stream.Progress{BatchID: 1, Rows: 10, Totals: stream.Summary{Quarantined: map[tidemark.Reason]int64{}}})
	out.Reset()
	tty.tick() // the fake clock moves 1 s per reading: not idle yet
	if strings.Contains(out.String(), "waiting") {
		t.Errorf("idle after 1 s: %q", out.String())
	}
	out.Reset()
	tty.tick()
	if !strings.Contains(out.String(), "batch 1 | waiting for data 2s | watermark none yet") {
		t.Errorf("after 2 s without a batch: %q", out.String())
	}
	tty.clear()
	out.Reset()
	tty.tick()
	if out.Len() != 0 {
		t.Errorf("tick after clear drew %q", out.String())
	}
}

// A stalled watermark is named under the status line while it lasts.
func TestTerminalStall(t *testing.T) {
	tty, out := fakeTerminal(false, 400)
	st := &stream.Stall{Source: "logs", File: "day-01.log", For: "2m0s", Silent: "2m3s", IdleTimeout: "0s", Release: "--idle-timeout 2m0s"}
	tty.observe(stream.Progress{BatchID: 4, Rows: 10, Stalled: st, Totals: stream.Summary{Quarantined: map[tidemark.Reason]int64{}}})
	want := "stalled: the watermark has not moved for 2m0s: file day-01.log of source logs holds it (no new line for 2m3s; --idle-timeout 2m0s would release it)"
	if !strings.Contains(out.String(), want) {
		t.Errorf("display %q lacks %q", out.String(), want)
	}
	out.Reset()
	tty.tick()
	if !strings.Contains(out.String(), want) {
		t.Errorf("redrawn display %q lacks the stall", out.String())
	}
	out.Reset()
	tty.observe(stream.Progress{BatchID: 5, Rows: 10, Totals: stream.Summary{Quarantined: map[tidemark.Reason]int64{}}})
	if strings.Contains(out.String(), "stalled:") {
		t.Errorf("the watermark moved, the display still says %q", out.String())
	}
}
