package ingest

import (
	"fmt"
	"math"
	"strconv"
	"unicode/utf8"
	"unsafe"

	"tidemark"
)

// Decoder fills a record's event fields from its Payload. The caller sets
// Source, File, Offset, Payload and a default Arrival (the read wall clock)
// first; Decode sets EventTime, Key, Value, HasValue, Reason and Err, and
// Arrival when the configuration names an arrival field. A bad line becomes
// a quarantine record; Decode never fails or panics.
//
// A Decoder reuses internal buffers and is not safe for concurrent use.
type Decoder interface {
	Decode(r *tidemark.Record)
}

// NewDecoder returns the NDJSON decoder for an NDJSON configuration. CSV
// needs the file's header first: use NewCSVDecoder.
func NewDecoder(cfg DecoderConfig) (Decoder, error) {
	cfg = cfg.withDefaults()
	if cfg.Format == FormatCSV {
		return nil, fmt.Errorf("ingest: a csv decoder needs the header line: use NewCSVDecoder")
	}
	return NewNDJSONDecoder(cfg)
}

// fields is the decoding state both formats share: the parsed time and
// value settings and the reused key buffer with its intern table.
type fields struct {
	cfg       DecoderConfig
	paths     fieldPaths
	tp        timeParser
	maxFuture int64 // µs; < 0 disables
	floor     int64 // µs; MinEventTime, or tidemark.MinTime without one
	keyBuf    []byte
	scratch   []byte
	keys      keyTable
	slab      []tidemark.AggValue // Record.Fields are cut from it (aggFields)
}

// aggSlabRecords is how many records' Fields one slab allocation holds.
const aggSlabRecords = 256

// aggFields returns a new Fields slice for one record: cut from a slab,
// never reused (a record keeps its Fields while the lake writes it).
func (f *fields) aggFields() []tidemark.AggValue {
	n := len(f.cfg.Aggs)
	if len(f.slab) < n {
		f.slab = make([]tidemark.AggValue, n*aggSlabRecords)
	}
	out := f.slab[:n:n]
	f.slab = f.slab[n:]
	return out
}

// badAgg quarantines r for input i's value b, which is not a number.
func (f *fields) badAgg(r *tidemark.Record, i int, b []byte, kind string) {
	field := f.cfg.Aggs[i].Field.String()
	if kind != "" {
		quarantine(r, tidemark.ReasonBadValue, fmt.Sprintf("--agg field %q is %s, not a number", field, kind))
		return
	}
	quarantine(r, tidemark.ReasonBadValue, fmt.Sprintf("--agg field %q is not a finite number: %s", field, quote(b)))
}

func newFields(cfg DecoderConfig) (fields, error) {
	cfg = cfg.withDefaults()
	if err := cfg.Validate(); err != nil {
		return fields{}, err
	}
	tp, err := newTimeParser(cfg.TimeLayout, cfg.TimeUnit)
	if err != nil {
		return fields{}, err
	}
	mf := int64(-1)
	if cfg.MaxFuture >= 0 {
		mf = cfg.MaxFuture.Microseconds()
	}
	floor := tidemark.MinTime
	if !cfg.MinEventTime.IsZero() {
		floor = cfg.MinEventTime.UnixMicro()
	}
	paths, err := cfg.paths()
	if err != nil {
		return fields{}, err
	}
	return fields{cfg: cfg, paths: paths, tp: tp, maxFuture: mf, floor: floor, keys: newKeyTable()}, nil
}

// key returns the Key for the parts accumulated in keyBuf, interned
// (keyTable) so a repeated key costs no allocation.
func (f *fields) key() tidemark.Key {
	if len(f.keyBuf) == 0 {
		return ""
	}
	return f.keys.intern(f.keyBuf)
}

// checkTime quarantines an event before the time floor (too_old) or too
// far ahead of its arrival (future_time).
func (f *fields) checkTime(r *tidemark.Record) {
	if r.EventTime < f.floor {
		t := r.EventTime
		quarantine(r, tidemark.ReasonTooOld, fmt.Sprintf("event time %s is before the floor %s (--min-event-time)",
			tidemark.FormatTime(t), tidemark.FormatTime(f.floor)))
		return
	}
	if f.maxFuture < 0 || r.EventTime <= r.Arrival || r.EventTime-r.Arrival <= f.maxFuture {
		return
	}
	r.Reason = tidemark.ReasonFutureTime
	r.Err = fmt.Sprintf("event time %s is %s ahead of arrival %s (max %s)",
		tidemark.FormatTime(r.EventTime), fmtMicros(r.EventTime-r.Arrival),
		tidemark.FormatTime(r.Arrival), f.cfg.MaxFuture)
}

// parseValue parses a numeric value given as a number or numeric string.
func parseValue(b []byte) (float64, bool) {
	if v, ok := parseShortDecimal(b); ok {
		return v, true
	}
	if !validNumber(b) {
		return 0, false
	}
	v, err := strconv.ParseFloat(unsafe.String(&b[0], len(b)), 64)
	if err != nil || math.IsInf(v, 0) {
		return 0, false
	}
	return v, true
}

// pow10 holds the powers of ten a float64 represents exactly.
var pow10 = [...]float64{1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15}

// parseShortDecimal is strconv.ParseFloat's exact case done directly, for
// the values most lines carry: a JSON number with at most 15 digits, an
// optional fraction and no exponent ("8.43", "-12", "0.5"). Its mantissa
// and the power of ten are then exact float64s, and one IEEE division
// rounds correctly, so the result is ParseFloat's (FuzzParseValue checks).
// Anything else reports false and takes the general path.
func parseShortDecimal(b []byte) (float64, bool) {
	i, neg := 0, false
	if len(b) > 0 && b[0] == '-' {
		i, neg = 1, true
	}
	if i >= len(b) || b[i] == '0' && i+1 < len(b) && isDigit(b[i+1]) {
		return 0, false // empty, or a leading zero JSON forbids
	}
	var m uint64
	digits, frac := 0, -1
	for ; i < len(b); i++ {
		c := b[i]
		switch {
		case '0' <= c && c <= '9':
			m = m*10 + uint64(c-'0')
			digits++
		case c == '.' && frac < 0 && digits > 0:
			frac = digits
		default:
			return 0, false
		}
	}
	if digits == 0 || digits > 15 || frac == digits {
		return 0, false
	}
	v := float64(m)
	if frac >= 0 {
		v /= pow10[digits-frac]
	}
	if neg {
		v = -v
	}
	return v, true
}

// isBlank reports whether a line is empty or only whitespace (a blank
// line is quarantined as blank, not malformed: it is noise, not bad data).
func isBlank(line []byte) bool {
	for _, c := range line {
		if c != ' ' && c != '\t' && c != '\r' && c != '\f' && c != '\v' {
			return false
		}
	}
	return true
}

// quarantine marks r as bad with reason and detail, clearing event fields.
func quarantine(r *tidemark.Record, reason tidemark.Reason, err string) {
	r.Reason, r.Err = reason, err
	r.EventTime, r.Key, r.Value, r.HasValue, r.Fields = 0, "", 0, false, nil
}

// resetEvent clears the fields a decoder sets.
func resetEvent(r *tidemark.Record) {
	r.EventTime, r.Key, r.Value, r.HasValue, r.Fields = 0, "", 0, false, nil
	r.Reason, r.Err = tidemark.ReasonNone, ""
}

// badUTF8 returns the quarantine detail for an invalid UTF-8 line.
func badUTF8(b []byte) string {
	for i := 0; i < len(b); {
		r, n := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && n == 1 {
			return fmt.Sprintf("invalid UTF-8 at byte %d", i)
		}
		i += n
	}
	return "invalid UTF-8"
}

func fmtMicros(us int64) string {
	return strconv.FormatFloat(float64(us)/1e6, 'f', -1, 64) + "s"
}

// quote renders a field value for an error message, shortened.
func quote(b []byte) string {
	if len(b) > 64 {
		return strconv.Quote(string(b[:64])) + "..."
	}
	return strconv.Quote(string(b))
}
