package ingest

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"tidemark"
)

// CSVDecoder decodes RFC 4180 records against a header line: fields are
// separated by commas, a quoted field may hold commas, newlines and ""
// for a quote, a trailing "\r" ends the record like "\n". An empty field,
// quoted or not, is null (a null time is missing_time). A record with a
// different number of fields than the header is malformed. When the header
// names a column twice, the last one wins, as for duplicate JSON fields.
type CSVDecoder struct {
	fields
	headerErr string // non-empty: the header is unusable, every record is malformed
	columns   int
	timeCol   int // -1 when the header lacks the column
	keyCols   []int
	valCol    int
	aggCols   []int // the --agg inputs' columns, -1 where the header lacks one
	arrCol    int
	buf       []byte // unquoted field contents
	bounds    []int  // field i is buf[bounds[2i]:bounds[2i+1]]
}

var _ Decoder = (*CSVDecoder)(nil)

// NewCSVDecoder validates cfg and returns a decoder for records under the
// given header line (without its newline; a UTF-8 byte order mark is
// skipped). A header that cannot be parsed is not an error: every record
// is then quarantined as malformed, because bad data never stops a stream.
func NewCSVDecoder(cfg DecoderConfig, header []byte) (*CSVDecoder, error) {
	f, err := newFields(cfg)
	if err != nil {
		return nil, err
	}
	d := &CSVDecoder{fields: f, timeCol: -1, valCol: -1, arrCol: -1}
	header = bytes.TrimPrefix(header, []byte("\xef\xbb\xbf"))
	if !utf8.Valid(header) {
		d.headerErr = "csv header is not valid UTF-8"
		return d, nil
	}
	if err := d.split(header); err != nil {
		d.headerErr = "csv header: " + err.Error()
		return d, nil
	}
	d.columns = len(d.bounds) / 2
	col := func(name string) int {
		c := -1
		for i := 0; i < d.columns; i++ {
			if string(d.field(i)) == name {
				c = i
			}
		}
		return c
	}
	// CSV has no nesting: a field path names the header of its segments
	// joined by dots (request.path and `request.path` both read the
	// header request.path).
	d.timeCol = col(dotted(f.paths.time))
	for _, k := range f.paths.keys {
		d.keyCols = append(d.keyCols, col(dotted(k)))
	}
	if f.paths.value != nil {
		d.valCol = col(dotted(f.paths.value))
	}
	if f.paths.arrival != nil {
		d.arrCol = col(dotted(f.paths.arrival))
	}
	for _, p := range f.paths.aggs {
		d.aggCols = append(d.aggCols, col(dotted(p)))
	}
	return d, nil
}

// Columns returns the number of columns in the header.
func (d *CSVDecoder) Columns() int { return d.columns }

func (d *CSVDecoder) field(i int) []byte { return d.buf[d.bounds[2*i]:d.bounds[2*i+1]] }

// Decode implements Decoder.
func (d *CSVDecoder) Decode(r *tidemark.Record) {
	resetEvent(r)
	line := r.Payload
	if isBlank(line) {
		quarantine(r, tidemark.ReasonBlank, "blank line")
		return
	}
	if !utf8.Valid(line) {
		quarantine(r, tidemark.ReasonBadUTF8, badUTF8(line))
		return
	}
	if d.headerErr != "" {
		quarantine(r, tidemark.ReasonMalformed, d.headerErr)
		return
	}
	if err := d.split(line); err != nil {
		quarantine(r, tidemark.ReasonMalformed, "csv: "+err.Error())
		return
	}
	if n := len(d.bounds) / 2; n != d.columns {
		quarantine(r, tidemark.ReasonMalformed, fmt.Sprintf("csv record has %d fields, header has %d", n, d.columns))
		return
	}
	t, reason, msg := d.timeAt(d.timeCol, d.cfg.TimeField)
	if reason != tidemark.ReasonNone {
		quarantine(r, reason, msg)
		return
	}
	r.EventTime = t
	if d.arrCol >= 0 && len(d.field(d.arrCol)) > 0 {
		a, reason, msg := d.timeAt(d.arrCol, d.cfg.ArrivalField)
		if reason != tidemark.ReasonNone {
			quarantine(r, tidemark.ReasonBadTime, msg)
			return
		}
		r.Arrival = a
	}
	if d.valCol >= 0 {
		if b := d.field(d.valCol); len(b) > 0 {
			v, ok := parseValue(b)
			if !ok {
				quarantine(r, tidemark.ReasonBadValue, fmt.Sprintf("value field %q is not a finite number: %s", d.cfg.ValueField, quote(b)))
				return
			}
			r.Value, r.HasValue = v, true
		}
	}
	if len(d.aggCols) > 0 {
		fs := d.aggFields()
		for i, c := range d.aggCols {
			if c < 0 || len(d.field(c)) == 0 {
				continue // null, as for keys
			}
			b := d.field(c)
			if d.cfg.Aggs[i].Text {
				fs[i] = tidemark.AggValue{Text: string(b), Present: true}
				continue
			}
			v, ok := parseValue(b)
			if !ok {
				d.badAgg(r, i, b, "")
				return
			}
			fs[i] = tidemark.AggValue{Num: v, Present: true}
		}
		r.Fields = fs
	}
	if len(d.keyCols) > 0 {
		d.keyBuf = d.keyBuf[:0]
		for _, c := range d.keyCols {
			if c < 0 || len(d.field(c)) == 0 {
				d.keyBuf = tidemark.AppendKeyPart(d.keyBuf, "", true)
			} else {
				d.keyBuf = appendKeyBytes(d.keyBuf, d.field(c))
			}
		}
		r.Key = d.key()
	}
	d.checkTime(r)
}

func (d *CSVDecoder) timeAt(col int, name string) (int64, tidemark.Reason, string) {
	if col < 0 {
		return 0, tidemark.ReasonMissingTime, fmt.Sprintf("no column %q", name)
	}
	b := d.field(col)
	if len(b) == 0 {
		return 0, tidemark.ReasonMissingTime, fmt.Sprintf("column %q is empty", name)
	}
	t, err := d.tp.parseString(b)
	if err != nil {
		return 0, tidemark.ReasonBadTime, fmt.Sprintf("column %q: %v", name, err)
	}
	return t, tidemark.ReasonNone, ""
}

var (
	errBareQuote = errors.New(`bare " in an unquoted field`)
	errQuote     = errors.New(`extraneous or missing " in a quoted field`)
)

// split parses one record into d.buf and d.bounds, following encoding/csv
// (strict quotes; "\r\n" inside a quoted field reads as "\n").
func (d *CSVDecoder) split(line []byte) error {
	d.buf, d.bounds = d.buf[:0], d.bounds[:0]
	if n := len(line); n > 0 && line[n-1] == '\r' {
		line = line[:n-1]
	}
	i := 0
	for {
		start := len(d.buf)
		if i < len(line) && line[i] == '"' {
			i++
			for {
				j := bytes.IndexByte(line[i:], '"')
				if j < 0 {
					return errQuote
				}
				d.buf = appendCRLF(d.buf, line[i:i+j])
				i += j + 1
				if i < len(line) && line[i] == '"' {
					d.buf = append(d.buf, '"')
					i++
					continue
				}
				break
			}
			if i < len(line) && line[i] != ',' {
				return errQuote
			}
		} else {
			j := bytes.IndexByte(line[i:], ',')
			if j < 0 {
				j = len(line) - i
			}
			f := line[i : i+j]
			if bytes.IndexByte(f, '"') >= 0 {
				return errBareQuote
			}
			d.buf = append(d.buf, f...)
			i += j
		}
		d.bounds = append(d.bounds, start, len(d.buf))
		if i >= len(line) {
			return nil
		}
		i++ // the comma
	}
}

// appendCRLF appends b with each "\r\n" turned into "\n".
func appendCRLF(dst, b []byte) []byte {
	for {
		j := bytes.Index(b, []byte("\r\n"))
		if j < 0 {
			return append(dst, b...)
		}
		dst = append(dst, b[:j]...)
		dst = append(dst, '\n')
		b = b[j+2:]
	}
}

// dotted joins a field path's segments with dots: a CSV header name.
func dotted(path []string) string { return strings.Join(path, ".") }
