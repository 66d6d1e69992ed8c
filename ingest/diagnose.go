package ingest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"tidemark"
)

// The first-batch check. A stream started with a wrong --time-field,
// --time-unit, --format or a misspelt --key does not fail: every line is
// valid data for quarantine, and a lake fills with it. So a new stream
// looks at its first batch before committing it, and stops with the fix
// when the batch shows a mistake (Diagnose). After that, bad data never
// stops a stream (SPEC §1); MissingFields is the per-batch warning.

// Thresholds of Diagnose.
const (
	// DiagnoseMinLines is the fewest lines a first batch must have to be
	// judged: on fewer, one odd line would be a pattern.
	DiagnoseMinLines = 5
	// diagnoseShare is the share of a batch's lines (in percent) that one
	// quarantine reason, or implausible times, must reach to be a mistake
	// rather than dirty data.
	diagnoseShare = 90
	// diagnoseSample is how many lines the diagnosis parses to learn what
	// fields the lines have and what their times look like.
	diagnoseSample = 1000
	// plausibleYears: an event more than this far before its arrival is
	// implausible when another --time-unit makes it recent.
	plausibleYears = 30
)

// Mistake is a configuration mistake a stream's first batch shows.
type Mistake struct {
	Problem string // what the batch shows, e.g. "60 of 60 lines would be quarantined as missing_time"
	Hint    string // what to change, e.g. `no "event_time" in the lines; they have ts, path: --time-field ts`
}

func (m *Mistake) Error() string { return m.Problem + ": " + m.Hint }

// Diagnose judges a new stream's first batch of decoded records. It
// returns nil when the batch looks like what the configuration expects,
// and a Mistake when (nearly) every line would be quarantined for one
// reason, when the event times are implausible under --time-unit while
// another unit fits, or when a --key or --value field is in no line.
// headers maps a CSV file's path (Record.File) to its header line.
func Diagnose(cfg DecoderConfig, recs []tidemark.Record, headers map[string][]byte) *Mistake {
	cfg = cfg.withDefaults()
	n := len(recs)
	if n < DiagnoseMinLines {
		return nil
	}
	counts := map[tidemark.Reason]int{}
	valid := 0
	for i := range recs {
		if recs[i].Valid() {
			valid++
		} else {
			counts[recs[i].Reason]++
		}
	}
	var top tidemark.Reason
	for r, c := range counts {
		if c > counts[top] || c == counts[top] && r < top {
			top = r
		}
	}
	s := &sample{cfg: cfg, recs: recs, headers: headers}
	if c := counts[top]; top != tidemark.ReasonNone && c*100 >= diagnoseShare*n {
		return &Mistake{
			Problem: fmt.Sprintf("%d of the first %d lines would be quarantined as %s", c, n, top),
			Hint:    s.explain(top),
		}
	}
	if valid == 0 {
		return nil
	}
	if m := s.implausible(valid); m != nil {
		return m
	}
	for _, f := range MissingFields(cfg, recs) {
		if s.load(); s.seen[f] > 0 {
			continue // in some lines, null in all: data, not a misspelling
		}
		role := "--key"
		switch {
		case f == cfg.ValueField:
			role = "--value"
		case !slices.Contains(cfg.Keys, f):
			role = "--agg" // an aggregate's field
		}
		hint := fmt.Sprintf("no line has %q; fields seen: %s", f, s.fieldList())
		if c := closest(s.names, f); c != "" {
			hint += fmt.Sprintf(": %s %s", role, c)
		}
		return &Mistake{Problem: fmt.Sprintf("%s %q is in none of the first %d lines", role, f, n), Hint: hint}
	}
	return nil
}

// MissingFields returns the --key, --value and --agg fields that are
// missing or null in every valid record of recs, in configuration order;
// nil when recs holds no valid record. It reads the decoded records only
// (a key part is null, HasValue is false, a Fields value absent), so it
// costs a scan that ends at the first record with every field, in a
// healthy batch the first one.
func MissingFields(cfg DecoderConfig, recs []tidemark.Record) []string {
	keys := len(cfg.Keys)
	seenKey := make([]bool, keys)
	need := keys
	needValue := cfg.ValueField != ""
	seenAgg := make([]bool, len(cfg.Aggs))
	needAggs := len(cfg.Aggs)
	anyValid := false
	for i := range recs {
		r := &recs[i]
		if !r.Valid() {
			continue
		}
		anyValid = true
		if needValue && r.HasValue {
			needValue = false
		}
		for j := 0; needAggs > 0 && j < len(r.Fields) && j < len(seenAgg); j++ {
			if r.Fields[j].Present && !seenAgg[j] {
				seenAgg[j] = true
				needAggs--
			}
		}
		if need > 0 {
			for j, p := range r.Key.Parts() {
				if j < keys && !p.Null && !seenKey[j] {
					seenKey[j] = true
					need--
				}
			}
		}
		if need == 0 && !needValue && needAggs == 0 {
			return nil
		}
	}
	if !anyValid {
		return nil
	}
	var out []string
	for j, k := range cfg.Keys {
		if !seenKey[j] {
			out = append(out, k)
		}
	}
	if needValue {
		out = append(out, cfg.ValueField)
	}
	for j, in := range cfg.Aggs {
		if f := tidemark.FormatPath(in.Field.Path); !seenAgg[j] && !slices.Contains(out, f) {
			out = append(out, f)
		}
	}
	return out
}

// sample is what the diagnosis learns from parsing the first lines itself:
// the fields they have (nested objects as dotted paths) and their values.
type sample struct {
	cfg     DecoderConfig
	recs    []tidemark.Record
	headers map[string][]byte

	loaded bool
	rows   []map[string]any // json.Number, string, bool, nil; CSV: string
	seen   map[string]int   // lines holding each field
	names  []string         // fields in order of first appearance
}

// load parses up to diagnoseSample lines (once).
func (s *sample) load() {
	if s.loaded {
		return
	}
	s.loaded = true
	s.seen = map[string]int{}
	for i := range s.recs {
		if len(s.rows) == diagnoseSample {
			break
		}
		r := &s.recs[i]
		var row map[string]any
		if s.cfg.Format == FormatCSV {
			row = csvRow(s.headers[r.File], r.Payload)
		} else {
			row = jsonRow(r.Payload)
		}
		if row == nil {
			continue
		}
		s.rows = append(s.rows, row)
		var names []string // in the line's order: map order is random
		if s.cfg.Format == FormatCSV {
			names = csvNames(s.headers[r.File])
		} else {
			names = jsonNames(r.Payload)
		}
		for _, k := range names {
			if s.seen[k] == 0 {
				s.names = append(s.names, k)
			}
			s.seen[k]++
		}
	}
}

// fieldList renders the fields seen for a message, at most 12.
func (s *sample) fieldList() string {
	s.load()
	if len(s.names) == 0 {
		return "none (no line parsed as a record)"
	}
	if len(s.names) > 12 {
		return strings.Join(s.names[:12], ", ") + ", ..."
	}
	return strings.Join(s.names, ", ")
}

// explain says what to change when one reason takes (nearly) every line.
func (s *sample) explain(reason tidemark.Reason) string {
	first := s.firstErr(reason)
	switch reason {
	case tidemark.ReasonMalformed:
		return s.explainFormat(first)
	case tidemark.ReasonMissingTime:
		return s.explainMissingTime()
	case tidemark.ReasonBadTime:
		return s.explainBadTime(first)
	case tidemark.ReasonFutureTime, tidemark.ReasonTooOld:
		if h := s.unitHint(); h != "" {
			return h
		}
		if reason == tidemark.ReasonTooOld {
			return first + " (is --min-event-time right?)"
		}
		return first + ": if the producer writes local time as UTC (Z), fix its zone; if its clock is ahead, fix the clock or raise --max-future"
	case tidemark.ReasonBadValue:
		hint := first
		if nums := s.numericFields(); len(nums) > 0 {
			hint += "; fields with numbers: " + strings.Join(nums, ", ")
			if c := closest(nums, s.cfg.ValueField); c != "" || len(nums) == 1 {
				hint += ": --value " + cmpOr(c, nums[0])
			}
		}
		return hint
	case tidemark.ReasonLineTooLong:
		return first + ": raise --max-line-bytes (or is the input a single-line JSON array or a binary file?)"
	case tidemark.ReasonBadUTF8:
		return first + ": the input is not UTF-8 text (a compressed file without a .gz or .zst name, or another encoding: convert it to UTF-8)"
	}
	return first
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// firstErr is the detail of the first record quarantined for reason.
func (s *sample) firstErr(reason tidemark.Reason) string {
	for i := range s.recs {
		if s.recs[i].Reason == reason {
			return s.recs[i].Err
		}
	}
	return string(reason)
}

// explainFormat: malformed lines in the other format say so.
func (s *sample) explainFormat(first string) string {
	json, other := 0, 0
	for i := range s.recs[:min(len(s.recs), diagnoseSample)] {
		b := bytes.TrimSpace(s.recs[i].Payload)
		switch {
		case len(b) > 0 && b[0] == '{':
			json++
		case bytes.IndexByte(b, ',') >= 0 || bytes.IndexByte(b, '\t') >= 0:
			other++
		}
	}
	switch {
	case s.cfg.Format != FormatCSV && other > json:
		return "the lines look like CSV: --format csv (with a header line naming the fields)"
	case s.cfg.Format == FormatCSV && json > other:
		return "the lines look like JSON objects: --format ndjson"
	}
	return first
}

// explainMissingTime: the time field is absent; name the field that holds
// times, and its unit when it is a number.
func (s *sample) explainMissingTime() string {
	s.load()
	tf := s.cfg.TimeField
	if s.seen[tf] > 0 {
		return fmt.Sprintf("%q is empty or null in the lines", tf)
	}
	what := "no %q in the lines; they have %s"
	if s.cfg.Format == FormatCSV {
		what = "no column %q in the CSV header; it has %s"
	}
	hint := fmt.Sprintf(what, tf, s.fieldList())
	field, unit, layout := s.timeCandidate()
	if field == "" {
		return hint + ": name the field that holds the event time with --time-field"
	}
	hint += ": --time-field " + field
	if unit != "" && unit != s.cfg.TimeUnit {
		hint += " --time-unit " + unit
	}
	if layout != "" {
		hint += " --time-layout '" + layout + "'"
	}
	return hint
}

// explainBadTime: the time field holds text that is no time under the
// settings; find a layout or unit that parses it.
func (s *sample) explainBadTime(first string) string {
	vals := s.values(s.cfg.TimeField)
	if len(vals) == 0 {
		return first
	}
	if unit := s.fittingUnit(vals); unit != "" && unit != s.cfg.TimeUnit {
		return fmt.Sprintf("%v looks like epoch %s: --time-unit %s", vals[0], unitName(unit), unit)
	}
	if layout := fittingLayout(vals); layout != "" {
		return fmt.Sprintf("%q fits the Go layout %q: --time-layout '%s'", fmt.Sprint(vals[0]), layout, layout)
	}
	return first + ": give its Go layout with --time-layout, e.g. '2006-01-02 15:04:05' or '02/Jan/2006:15:04:05 -0700'"
}

// unitHint names the --time-unit under which the time field's numbers are
// plausible, if that is not the configured one.
func (s *sample) unitHint() string {
	vals := s.values(s.cfg.TimeField)
	if len(vals) == 0 {
		return ""
	}
	unit := s.fittingUnit(vals)
	if unit == "" || unit == s.cfg.TimeUnit {
		return ""
	}
	return fmt.Sprintf("%v looks like epoch %s: --time-unit %s", vals[0], unitName(unit), unit)
}

// implausible: the valid events' times are decades before their arrival
// under --time-unit (seconds read as milliseconds land in 1970) while
// another unit makes them recent.
func (s *sample) implausible(valid int) *Mistake {
	old := 0
	for i := range s.recs {
		r := &s.recs[i]
		if r.Valid() && r.EventTime < r.Arrival-plausibleYears*365*24*3600*1_000_000 {
			old++
		}
	}
	if old*100 < diagnoseShare*valid {
		return nil
	}
	h := s.unitHint()
	if h == "" {
		return nil // old data, and no unit makes it recent: the user's business
	}
	first := time.UnixMicro(s.recs[0].EventTime).UTC()
	for i := range s.recs {
		if s.recs[i].Valid() {
			first = time.UnixMicro(s.recs[i].EventTime).UTC()
			break
		}
	}
	return &Mistake{
		Problem: fmt.Sprintf("%d of the first %d events are dated more than %d years before they were read (the first %s)", old, len(s.recs), plausibleYears, first.Format(time.RFC3339)),
		Hint:    h,
	}
}

// values returns the sampled values of field (non-null).
func (s *sample) values(field string) []any {
	s.load()
	var out []any
	for _, row := range s.rows {
		if v, ok := row[field]; ok && v != nil && v != "" {
			out = append(out, v)
		}
	}
	return out
}

// numericFields lists the fields whose sampled values are all numbers.
func (s *sample) numericFields() []string {
	s.load()
	var out []string
	for _, name := range s.names {
		vals := s.values(name)
		ok := len(vals) > 0
		for _, v := range vals {
			if _, isNum := v.(json.Number); !isNum {
				if str, isStr := v.(string); !isStr || !isNumber(str) {
					ok = false
					break
				}
			}
		}
		if ok && name != s.cfg.TimeField {
			out = append(out, name)
		}
	}
	return out
}

func isNumber(s string) bool {
	_, err := strconv.ParseFloat(s, 64)
	return err == nil
}

// timeCandidate finds the field most lines hold a plausible time in: its
// name, and the unit (numbers) or Go layout (text not RFC 3339) it needs.
func (s *sample) timeCandidate() (field, unit, layout string) {
	s.load()
	best := 0
	for _, name := range s.names {
		vals := s.values(name)
		if len(vals) == 0 || len(vals) <= best {
			continue
		}
		if u := s.fittingUnit(vals); u != "" {
			field, unit, layout, best = name, u, "", len(vals)
			continue
		}
		if rfc3339Share(vals)*100 >= diagnoseShare*len(vals) {
			field, unit, layout, best = name, "", "", len(vals)
			continue
		}
		if l := fittingLayout(vals); l != "" {
			field, unit, layout, best = name, "", l, len(vals)
		}
	}
	return field, unit, layout
}

// units are the --time-unit values, in the order a tie is decided.
var units = []string{"s", "ms", "us", "ns"}

func unitName(u string) string {
	return map[string]string{"s": "seconds", "ms": "milliseconds", "us": "microseconds", "ns": "nanoseconds"}[u]
}

// fittingUnit returns the unit under which (nearly) all of vals, numbers
// or numeric strings, are times within plausibleYears before the lines'
// arrival and at most --max-future after it; "" if none or not numbers.
// The configured unit wins a tie.
func (s *sample) fittingUnit(vals []any) string {
	arrival := s.recs[0].Arrival
	lo := arrival - plausibleYears*365*24*3600*1_000_000
	hi := arrival + s.cfg.MaxFuture.Microseconds()
	if s.cfg.MaxFuture < 0 {
		hi = math.MaxInt64
	}
	order := append([]string{s.cfg.TimeUnit}, units...)
	for _, u := range order {
		tp, err := newTimeParser("", u)
		if err != nil {
			continue
		}
		ok := 0
		for _, v := range vals {
			text := fmt.Sprint(v)
			if !isNumber(text) {
				return ""
			}
			if t, err := tp.parseNumber([]byte(text)); err == nil && t >= lo && t <= hi {
				ok++
			}
		}
		if ok*100 >= diagnoseShare*len(vals) {
			return u
		}
	}
	return ""
}

// rfc3339Share counts the values that are RFC 3339 times.
func rfc3339Share(vals []any) int {
	n := 0
	for _, v := range vals {
		if str, ok := v.(string); ok {
			if _, ok := parseRFC3339([]byte(str)); ok {
				n++
			}
		}
	}
	return n
}

// commonLayouts are the time formats logs use most besides RFC 3339.
var commonLayouts = []string{
	"02/Jan/2006:15:04:05 -0700", // Apache, nginx
	"2006-01-02 15:04:05.999999999 -0700",
	"2006-01-02 15:04:05,999",
	"2006/01/02 15:04:05",
	"01/02/2006 15:04:05",
	"02.01.2006 15:04:05",
	"Jan _2 15:04:05",
	"Mon Jan _2 15:04:05 2006",
	"Mon Jan _2 15:04:05 MST 2006",
	time.RFC1123,
	time.RFC1123Z,
	time.RFC850,
	"2006-01-02T15:04:05",
	"20060102T150405Z0700",
}

// fittingLayout returns the first common layout (nearly) all string
// values parse under.
func fittingLayout(vals []any) string {
	for _, l := range commonLayouts {
		ok := 0
		for _, v := range vals {
			if str, isStr := v.(string); isStr {
				if _, err := time.Parse(l, str); err == nil {
					ok++
				}
			}
		}
		if ok*100 >= diagnoseShare*len(vals) {
			return l
		}
	}
	return ""
}
