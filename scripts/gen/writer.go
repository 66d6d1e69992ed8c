package main

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"
)

// Generate writes the data set cfg describes and returns its summary.
// Events go to sources round-robin by draw order; each source's lines are
// split over cfg.Files files in arrival order, named so that lexical order is
// arrival order.
func Generate(cfg Config) (*Summary, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	dirs := cfg.dirs()
	outs := make([]*splitWriter, len(dirs))
	for i, d := range dirs {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, fmt.Errorf("create %s: %w", d, err)
		}
		// Source i gets draws i, i+S, i+2S, ...: a known count, so the
		// split into files is even.
		n := cfg.Events / len(dirs)
		if i < cfg.Events%len(dirs) {
			n++
		}
		outs[i] = &splitWriter{dir: d, files: cfg.Files, lines: n, format: cfg.Format}
	}
	sum := &Summary{Bad: map[string]int{}}
	for _, k := range append([]kind{kindFuture}, badKinds[:]...) {
		sum.Bad[k.reason()] = 0
	}
	var first, last int64 = -1, -1
	var line []byte
	err = inArrivalOrder(newSource(cfg), cfg.Events, func(e *event) error {
		sum.Lines++
		switch {
		case e.kind != kindValid:
			sum.Bad[e.kind.reason()]++
		default:
			sum.Valid++
			if e.late {
				sum.LateMobile++
			}
			if e.valueNull != 0 {
				sum.NullValue++
			}
			if first < 0 || e.eventMS < first {
				first = e.eventMS
			}
			last = max(last, e.eventMS)
		}
		if cfg.Format == "csv" {
			line = appendCSV(line[:0], e)
		} else {
			line = appendJSON(line[:0], e)
		}
		return outs[e.seq%int64(len(outs))].write(line)
	})
	for _, w := range outs {
		if cerr := w.close(); err == nil {
			err = cerr
		}
		sum.Files = append(sum.Files, w.names...)
		sum.Bytes += w.bytes
	}
	if err != nil {
		return nil, err
	}
	if first >= 0 {
		sum.FirstEvent = fmtMS(first)
		sum.LastEvent = fmtMS(last)
	}
	return sum, nil
}

// splitWriter writes one source's lines over a fixed number of files.
type splitWriter struct {
	dir    string
	files  int
	lines  int // lines this source will get in total
	format string

	n     int // lines written so far
	cur   int // index of the open file, -1 before the first
	f     *os.File
	bw    *bufio.Writer
	names []string
	bytes int64
}

func (w *splitWriter) fileName(i int) string {
	return filepath.Join(w.dir, fmt.Sprintf("events-%05d.%s", i, w.format))
}

func (w *splitWriter) write(line []byte) error {
	idx := int(int64(w.n) * int64(w.files) / int64(max(w.lines, 1)))
	if w.f == nil || idx != w.cur {
		if err := w.open(idx); err != nil {
			return err
		}
	}
	w.n++
	w.bytes += int64(len(line))
	if _, err := w.bw.Write(line); err != nil {
		return fmt.Errorf("write %s: %w", w.f.Name(), err)
	}
	return nil
}

func (w *splitWriter) open(idx int) error {
	if err := w.closeFile(); err != nil {
		return err
	}
	name := w.fileName(idx)
	f, err := os.Create(name)
	if err != nil {
		return fmt.Errorf("create %s: %w", name, err)
	}
	w.f, w.cur = f, idx
	w.bw = bufio.NewWriterSize(f, 1<<20)
	w.names = append(w.names, name)
	if w.format == "csv" {
		n, _ := w.bw.WriteString(csvHeader)
		w.bytes += int64(n)
	}
	return nil
}

func (w *splitWriter) closeFile() error {
	if w.f == nil {
		return nil
	}
	err := w.bw.Flush()
	if cerr := w.f.Close(); err == nil {
		err = cerr
	}
	w.f = nil
	if err != nil {
		return fmt.Errorf("close %s: %w", w.names[len(w.names)-1], err)
	}
	return nil
}

// close flushes the open file. A source that got no lines still gets one
// (empty) file, so a reader's glob never matches nothing.
func (w *splitWriter) close() error {
	if w.n == 0 {
		if err := w.open(0); err != nil {
			return err
		}
	}
	return w.closeFile()
}

// fmtMS formats epoch milliseconds as RFC 3339 UTC with exactly 3 decimals.
func fmtMS(ms int64) string {
	return time.UnixMilli(ms).UTC().Format("2006-01-02T15:04:05.000Z07:00")
}

// eventTime is the event time as written, for a valid or future line.
func (e *event) eventTime() string {
	if e.kind == kindFuture {
		t := time.UnixMilli(e.eventMS).UTC()
		t = time.Date(2099, t.Month(), min(t.Day(), 28), t.Hour(), t.Minute(), t.Second(), t.Nanosecond(), time.UTC)
		return t.Format("2006-01-02T15:04:05.000Z07:00")
	}
	return fmtMS(e.eventMS)
}

func (e *event) value(b []byte) []byte {
	return strconv.AppendFloat(b, float64(e.cents)/100, 'f', -1, 64)
}

func (e *event) pageName(b []byte) []byte {
	b = append(b, "/p/"...)
	b = strconv.AppendInt(b, int64(e.page), 10)
	if e.kind == kindBadUTF8 {
		b = append(b, "/\xff\xfe"...) // not UTF-8
	}
	return b
}
