package ingest

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/bits"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"

	"tidemark"
)

// maxDepth is encoding/json's nesting limit, so both accept the same lines.
const maxDepth = 10000

type jsonKind uint8

const (
	kindNone jsonKind = iota
	kindString
	kindNumber
	kindTrue
	kindFalse
	kindNull
	kindObject
	kindArray
)

func (k jsonKind) String() string {
	return [...]string{"absent", "string", "number", "true", "false", "null", "object", "array"}[k]
}

// span locates one top-level field value in the line. For strings it
// covers the contents without the quotes.
type span struct {
	start, end int
	kind       jsonKind
	escaped    bool
}

// NDJSONDecoder decodes one JSON object per line with a single-pass scanner
// that validates the whole line (the same lines encoding/json.Valid accepts)
// and extracts only the configured top-level fields, without reflection and
// without allocating for a well-formed line with an already seen key.
//
// When a top-level field appears more than once the last occurrence wins,
// as with encoding/json.Unmarshal into a map. Invalid UTF-8 anywhere in a
// line makes it bad_utf8, before any other check.
type NDJSONDecoder struct {
	fields
	names   []string // wanted fields by slot
	lens    uint64   // bit n set: a wanted name is n bytes long (n < 64)
	timeIdx int
	keyIdx  []int
	valIdx  int   // -1 if none
	aggIdx  []int // spans of the --agg inputs
	arrIdx  int   // -1 if none
	spans   []span
	stack   []byte
	errPos  int
	errMsg  string
	utf8Bad bool
	// prev holds, by position in the line, the top-level field names of
	// the lines before (most lines of a stream name the same fields in
	// the same order): a name equal to the one there, followed by '"' and
	// ':', is that field at once, with the slot match gave it then.
	prev []prevName
	// nested are the wanted fields below the top level; their spans
	// follow the top-level slots' in spans.
	nested  []nestedField
	nameBuf []byte
}

// prevName is a plain (unescaped, nothing special) field name seen at
// its position in an earlier line, and its slot (-1: not wanted).
type prevName struct {
	name [maxPrevName]byte
	n    uint8
	slot int32
}

// maxPrevName is the longest name prevName keeps; longer ones always take
// the full path.
const maxPrevName = 32

var _ Decoder = (*NDJSONDecoder)(nil)

// NewNDJSONDecoder validates cfg and returns a decoder.
func NewNDJSONDecoder(cfg DecoderConfig) (*NDJSONDecoder, error) {
	f, err := newFields(cfg)
	if err != nil {
		return nil, err
	}
	d := &NDJSONDecoder{fields: f, valIdx: -1, arrIdx: -1}
	// A top-level field is its slot; a nested one (request.path) wants its
	// top-level object (request) and is found in it after the scan, at an
	// index past the top-level slots (fixed once every slot is known).
	var nested []int // indexes of the fields below that are nested
	var paths [][]string
	field := func(path []string) int {
		paths = append(paths, path)
		if len(path) == 1 {
			return d.slot(path[0])
		}
		d.slot(path[0])
		nested = append(nested, len(paths)-1)
		return -2 - (len(nested) - 1)
	}
	d.timeIdx = field(f.paths.time)
	for _, k := range f.paths.keys {
		d.keyIdx = append(d.keyIdx, field(k))
	}
	if f.paths.value != nil {
		d.valIdx = field(f.paths.value)
	}
	if f.paths.arrival != nil {
		d.arrIdx = field(f.paths.arrival)
	}
	for _, p := range f.paths.aggs {
		d.aggIdx = append(d.aggIdx, field(p))
	}
	top := len(d.names)
	fix := func(i int) int {
		if i <= -2 {
			return top + (-2 - i)
		}
		return i
	}
	d.timeIdx = fix(d.timeIdx)
	for i := range d.keyIdx {
		d.keyIdx[i] = fix(d.keyIdx[i])
	}
	if d.valIdx != -1 {
		d.valIdx = fix(d.valIdx)
	}
	if d.arrIdx != -1 {
		d.arrIdx = fix(d.arrIdx)
	}
	for i := range d.aggIdx {
		d.aggIdx[i] = fix(d.aggIdx[i])
	}
	for _, j := range nested {
		d.nested = append(d.nested, nestedField{top: d.slot(paths[j][0]), rest: paths[j][1:]})
	}
	d.spans = make([]span, top+len(d.nested))
	return d, nil
}

// nestedField is a wanted field below the top level: the slot of its
// top-level object and the names to follow in it.
type nestedField struct {
	top  int
	rest []string
}

// resolveNested sets the spans of the nested fields from their top-level
// objects' spans, after scan validated the line. A path through anything
// but objects finds nothing (absent), as DuckDB's and Spark's field access
// give null.
func (d *NDJSONDecoder) resolveNested(line []byte) {
	top := len(d.names)
	for j, n := range d.nested {
		s := d.spans[n.top]
		for _, name := range n.rest {
			if s.kind != kindObject {
				s = span{}
				break
			}
			s = d.find(line, s.start, name)
		}
		d.spans[top+j] = s
	}
}

// find returns the span of the named member of the valid object at i
// (the last one, when the name repeats, as at the top level), or the
// absent span.
func (d *NDJSONDecoder) find(b []byte, i int, name string) span {
	var found span
	i = skipSpace(b, i+1)
	if b[i] == '}' {
		return found
	}
	for {
		ke, esc, _ := d.str(b, i+1)
		key := b[i+1 : ke]
		if esc {
			d.nameBuf = appendUnescaped(d.nameBuf[:0], key)
			key = d.nameBuf
		}
		i = skipSpace(b, ke+1) // at ':'
		i = skipSpace(b, i+1)  // at the value
		var v span
		switch b[i] {
		case '"':
			e, es, _ := d.str(b, i+1)
			v, i = span{start: i + 1, end: e, kind: kindString, escaped: es}, e+1
		case '{', '[':
			e, _ := d.skipNested(b, i)
			v = span{start: i, end: e, kind: kindObject}
			if b[i] == '[' {
				v.kind = kindArray
			}
			i = e
		default:
			e, k, _ := d.scalar(b, i)
			v, i = span{start: i, end: e, kind: k}, e
		}
		if string(key) == name {
			found = v
		}
		i = skipSpace(b, i)
		if b[i] != ',' {
			return found // '}'
		}
		i = skipSpace(b, i+1)
	}
}

func (d *NDJSONDecoder) slot(name string) int {
	for i, n := range d.names {
		if n == name {
			return i
		}
	}
	d.names = append(d.names, name)
	d.lens |= lenBit(len(name))
	return len(d.names) - 1
}

// lenBit is the bit of a name length in NDJSONDecoder.lens: names of 63
// bytes or more share the top bit.
func lenBit(n int) uint64 { return 1 << min(n, 63) }

// Decode implements Decoder.
func (d *NDJSONDecoder) Decode(r *tidemark.Record) {
	resetEvent(r)
	line := r.Payload
	if len(line) == 0 || line[0] != '{' && isBlank(line) {
		quarantine(r, tidemark.ReasonBlank, "blank line")
		return
	}
	for i := range d.spans {
		d.spans[i] = span{}
	}
	if !d.scan(line) {
		if d.utf8Bad || !utf8.Valid(line) {
			quarantine(r, tidemark.ReasonBadUTF8, badUTF8(line))
			return
		}
		quarantine(r, tidemark.ReasonMalformed, fmt.Sprintf("malformed JSON at byte %d: %s", d.errPos, d.errMsg))
		return
	}
	if len(d.nested) > 0 {
		d.resolveNested(line)
	}
	// Time.
	ts := d.spans[d.timeIdx]
	t, reason, msg := d.timeOf(line, ts, d.cfg.TimeField)
	if reason != tidemark.ReasonNone {
		quarantine(r, reason, msg)
		return
	}
	r.EventTime = t
	if d.arrIdx >= 0 {
		as := d.spans[d.arrIdx]
		if as.kind != kindNone && as.kind != kindNull {
			a, reason, msg := d.timeOf(line, as, d.cfg.ArrivalField)
			if reason != tidemark.ReasonNone {
				quarantine(r, tidemark.ReasonBadTime, msg)
				return
			}
			r.Arrival = a
		}
	}
	if d.valIdx >= 0 {
		vs := d.spans[d.valIdx]
		switch vs.kind {
		case kindNone, kindNull:
		case kindNumber, kindString:
			b := d.text(line, vs)
			v, ok := parseValue(b)
			if !ok {
				quarantine(r, tidemark.ReasonBadValue, fmt.Sprintf("value field %q is not a finite number: %s", d.cfg.ValueField, quote(b)))
				return
			}
			r.Value, r.HasValue = v, true
		default:
			quarantine(r, tidemark.ReasonBadValue, fmt.Sprintf("value field %q is %s, not a number", d.cfg.ValueField, vs.kind))
			return
		}
	}
	if len(d.aggIdx) > 0 && !d.aggs(r, line) {
		return
	}
	if len(d.keyIdx) > 0 {
		d.keyBuf = d.keyBuf[:0]
		r.KeyKinds = 0
		for p, i := range d.keyIdx {
			ks := d.spans[i]
			switch ks.kind {
			case kindNone, kindNull:
				d.keyBuf = tidemark.AppendKeyPart(d.keyBuf, "", true)
			case kindObject, kindArray:
				d.scratch = appendCompact(d.scratch[:0], line[ks.start:ks.end])
				d.keyBuf = appendKeyBytes(d.keyBuf, d.scratch)
			case kindNumber:
				var kk tidemark.KeyKind
				d.scratch, kk = canonNumber(d.scratch[:0], line[ks.start:ks.end])
				d.keyBuf = appendKeyBytes(d.keyBuf, d.scratch)
				r.SetKeyKind(p, kk)
			case kindTrue, kindFalse:
				d.keyBuf = appendKeyBytes(d.keyBuf, d.text(line, ks))
				r.SetKeyKind(p, tidemark.KeyBool)
			default:
				d.keyBuf = appendKeyBytes(d.keyBuf, d.text(line, ks))
			}
		}
		r.Key = d.key()
	}
	d.checkTime(r)
}

// aggs sets r.Fields from the --agg inputs' spans; false when a number
// input's value is not a number (r is quarantined). A text input's value
// is its canonical text: a string's contents, a number as a key renders
// it, true or false, an object or array compacted; null is absent.
func (d *NDJSONDecoder) aggs(r *tidemark.Record, line []byte) bool {
	fs := d.aggFields()
	for i, j := range d.aggIdx {
		s := d.spans[j]
		if s.kind == kindNone || s.kind == kindNull {
			continue
		}
		if d.cfg.Aggs[i].Text {
			var b []byte
			switch s.kind {
			case kindObject, kindArray:
				d.scratch = appendCompact(d.scratch[:0], line[s.start:s.end])
				b = d.scratch
			case kindNumber:
				d.scratch, _ = canonNumber(d.scratch[:0], line[s.start:s.end])
				b = d.scratch
			default:
				b = d.text(line, s)
			}
			fs[i] = tidemark.AggValue{Text: string(b), Present: true}
			continue
		}
		switch s.kind {
		case kindNumber, kindString:
			b := d.text(line, s)
			v, ok := parseValue(b)
			if !ok {
				d.badAgg(r, i, b, "")
				return false
			}
			fs[i] = tidemark.AggValue{Num: v, Present: true}
		default:
			d.badAgg(r, i, nil, s.kind.String())
			return false
		}
	}
	r.Fields = fs
	return true
}

// canonNumber appends a JSON number key's canonical text to dst and
// returns its kind: an integral value that fits int64 in decimal (500.0
// and 5e2 are "500"), anything else as strconv.FormatFloat(v, 'g', -1,
// 64). A plain integer literal is copied as it is (no float rounding).
func canonNumber(dst, lit []byte) ([]byte, tidemark.KeyKind) {
	plain := len(lit) > 0
	for i, c := range lit {
		if (c < '0' || c > '9') && !(i == 0 && c == '-') {
			plain = false
			break
		}
	}
	if plain {
		if n, err := strconv.ParseInt(string(lit), 10, 64); err == nil {
			return strconv.AppendInt(dst, n, 10), tidemark.KeyInt
		}
	}
	f, err := strconv.ParseFloat(string(lit), 64)
	if err != nil { // out of float64's range: the literal, as text
		return append(dst, lit...), tidemark.KeyText
	}
	if f == math.Trunc(f) && f >= -(1<<63) && f < 1<<63 {
		return strconv.AppendInt(dst, int64(f), 10), tidemark.KeyInt
	}
	return strconv.AppendFloat(dst, f, 'g', -1, 64), tidemark.KeyFloat
}

// appendKeyBytes is tidemark.AppendKeyPart for a byte slice. It is a copy
// rather than a call because tidemark.AppendKeyPart(dst, string(v), false)
// allocates for values over 32 bytes (measured with testing.AllocsPerRun:
// the compiler's non-escaping conversion buffer is 32 bytes), once per key
// part per row. FuzzAppendKeyBytes holds the two encodings equal.
func appendKeyBytes(dst, v []byte) []byte {
	dst = append(dst, 1)
	dst = binary.AppendUvarint(dst, uint64(len(v)))
	return append(dst, v...)
}

// text returns a scalar field's text: string contents unescaped, or the
// literal of a number or bool. It may point into d.scratch.
func (d *NDJSONDecoder) text(line []byte, s span) []byte {
	b := line[s.start:s.end]
	if s.kind == kindString && s.escaped {
		d.scratch = appendUnescaped(d.scratch[:0], b)
		return d.scratch
	}
	return b
}

func (d *NDJSONDecoder) timeOf(line []byte, s span, name string) (int64, tidemark.Reason, string) {
	switch s.kind {
	case kindNone:
		return 0, tidemark.ReasonMissingTime, fmt.Sprintf("no field %q", name)
	case kindNull:
		return 0, tidemark.ReasonMissingTime, fmt.Sprintf("field %q is null", name)
	case kindString:
		t, err := d.tp.parseString(d.text(line, s))
		if err != nil {
			return 0, tidemark.ReasonBadTime, fmt.Sprintf("field %q: %v", name, err)
		}
		return t, tidemark.ReasonNone, ""
	case kindNumber:
		t, err := d.tp.parseNumber(line[s.start:s.end])
		if err != nil {
			return 0, tidemark.ReasonBadTime, fmt.Sprintf("field %q: %v", name, err)
		}
		return t, tidemark.ReasonNone, ""
	}
	return 0, tidemark.ReasonBadTime, fmt.Sprintf("field %q is %s, not a time", name, s.kind)
}

// strSpecial marks the bytes that end the fast path inside a string.
var strSpecial = func() (t [256]bool) {
	for c := 0; c < 0x20; c++ {
		t[c] = true
	}
	t['"'], t['\\'] = true, true
	for c := 0x80; c < 0x100; c++ {
		t[c] = true
	}
	return t
}()

func (d *NDJSONDecoder) fail(i int, msg string) bool {
	d.errPos, d.errMsg = i, msg
	return false
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\r' || c == '\n' }

func skipSpace(b []byte, i int) int {
	if i < len(b) && b[i] > ' ' {
		return i // the usual case: no space at all
	}
	for i < len(b) && isSpace(b[i]) {
		i++
	}
	return i
}

// scan validates line as one JSON object and records the spans of the
// wanted top-level fields.
func (d *NDJSONDecoder) scan(b []byte) bool {
	d.utf8Bad = false
	i := skipSpace(b, 0)
	if i >= len(b) {
		return d.fail(i, "empty line")
	}
	if b[i] != '{' {
		return d.fail(i, "not a JSON object")
	}
	i = skipSpace(b, i+1)
	if i < len(b) && b[i] == '}' {
		return d.end(b, i+1)
	}
	for field := 0; ; field++ {
		if i >= len(b) || b[i] != '"' {
			return d.fail(i, "expected a field name")
		}
		ks := i + 1
		slot, known := -1, false
		var ke int
		var esc bool
		if field < len(d.prev) {
			// The name of the line before at this position: its bytes held
			// nothing special, so the '"' after them ends this one, as
			// quickStr or str would find, unescaped.
			p := &d.prev[field]
			if e := ks + int(p.n); e+1 < len(b) && b[e] == '"' && b[e+1] == ':' && string(b[ks:e]) == string(p.name[:p.n]) {
				ke, slot, known, i = e, int(p.slot), true, e+1
			}
		}
		if !known {
			ke = quickStr(b, ks)
			if ke < 0 {
				var ok bool
				if ke, esc, ok = d.str(b, ks); !ok {
					return false
				}
			}
			i = skipSpace(b, ke+1)
			if i >= len(b) || b[i] != ':' {
				return d.fail(i, "expected ':'")
			}
		}
		i = skipSpace(b, i+1)
		vs := i
		var kind jsonKind
		var vesc bool
		var ve int
		if i >= len(b) {
			return d.fail(i, "expected a value")
		}
		switch b[i] {
		case '"':
			e, es := quickStr(b, i+1), false
			if e < 0 {
				var ok bool
				if e, es, ok = d.str(b, i+1); !ok {
					return false
				}
			}
			kind, vs, ve, vesc, i = kindString, i+1, e, es, e+1
		case '{', '[':
			e, ok := d.skipNested(b, i)
			if !ok {
				return false
			}
			kind = kindObject
			if b[i] == '[' {
				kind = kindArray
			}
			ve, i = e, e
		default:
			e, k, ok := d.scalar(b, i)
			if !ok {
				return false
			}
			kind, ve, i = k, e, e
		}
		if !known {
			if esc || d.lens&lenBit(ke-ks) != 0 { // most of a line's fields: no wanted name is that long
				slot = d.match(b[ks:ke], esc)
			}
			d.remember(field, b[ks:ke], esc, slot)
		}
		if slot >= 0 {
			d.spans[slot] = span{start: vs, end: ve, kind: kind, escaped: vesc}
		}
		i = skipSpace(b, i)
		if i >= len(b) {
			return d.fail(i, "unterminated object")
		}
		if b[i] == ',' {
			i = skipSpace(b, i+1)
			continue
		}
		if b[i] == '}' {
			return d.end(b, i+1)
		}
		return d.fail(i, "expected ',' or '}'")
	}
}

// remember keeps a plain name found at position field of the line, with
// its slot, for the lines after (prev).
func (d *NDJSONDecoder) remember(field int, name []byte, esc bool, slot int) {
	if esc || len(name) > maxPrevName || field > len(d.prev) || field >= maxPrevFields {
		return
	}
	if field == len(d.prev) {
		d.prev = append(d.prev, prevName{})
	}
	p := &d.prev[field]
	p.n = uint8(copy(p.name[:], name))
	p.slot = int32(slot)
}

// maxPrevFields bounds the names prev keeps (the first ones of a line).
const maxPrevFields = 64

func (d *NDJSONDecoder) end(b []byte, i int) bool {
	i = skipSpace(b, i)
	if i != len(b) {
		return d.fail(i, "data after the object")
	}
	return true
}

// match returns the slot of a wanted field name, or -1.
func (d *NDJSONDecoder) match(name []byte, escaped bool) int {
	if !escaped && d.lens&lenBit(len(name)) == 0 {
		return -1 // most of a line's fields: no wanted name is that long
	}
	if escaped {
		d.scratch = appendUnescaped(d.scratch[:0], name)
		name = d.scratch
	}
	for i, n := range d.names {
		if len(n) == len(name) && n == string(name) {
			return i
		}
	}
	return -1
}

// quickStr is str's answer, inlined into scan, for a string body at i
// with nothing special before its closing quote (a line's names and most
// values): the index of that quote, found 8 bytes at a time. It returns -1
// for every other string (escapes, control or non-ASCII bytes, the last 7
// bytes of the line), which str then scans byte by byte, so both paths
// give the same answer (FuzzQuickStr).
func quickStr(b []byte, i int) int {
	for ; i+8 <= len(b); i += 8 {
		if m := special8(binary.LittleEndian.Uint64(b[i:])); m != 0 {
			if i += bits.TrailingZeros64(m) >> 3; b[i] != '"' {
				break
			}
			return i
		}
	}
	return -1
}

// str scans a string body starting after its opening quote and returns the
// index of the closing quote and whether it holds escapes.
func (d *NDJSONDecoder) str(b []byte, i int) (int, bool, bool) {
	esc := false
	for {
		i = nextSpecial(b, i)
		if i >= len(b) {
			return i, esc, d.fail(i, "unterminated string")
		}
		switch c := b[i]; {
		case c == '"':
			return i, esc, true
		case c == '\\':
			esc = true
			if i+1 >= len(b) {
				return i, esc, d.fail(i, "unterminated escape")
			}
			switch b[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if i+6 > len(b) || !isHex(b[i+2]) || !isHex(b[i+3]) || !isHex(b[i+4]) || !isHex(b[i+5]) {
					return i, esc, d.fail(i, "bad \\u escape")
				}
				i += 6
			default:
				return i, esc, d.fail(i, "bad escape")
			}
		case c < 0x20:
			return i, esc, d.fail(i, "control character in string")
		default:
			r, n := utf8.DecodeRune(b[i:])
			if r == utf8.RuneError && n == 1 {
				d.utf8Bad = true
				return i, esc, d.fail(i, "invalid UTF-8")
			}
			i += n
		}
	}
}

// nextSpecial returns the index of the first byte at or after i that is
// special inside a string, or len(b).
func nextSpecial(b []byte, i int) int {
	for i+8 <= len(b) {
		if m := special8(binary.LittleEndian.Uint64(b[i:])); m != 0 {
			return i + bits.TrailingZeros64(m)>>3
		}
		i += 8
	}
	for i < len(b) && !strSpecial[b[i]] {
		i++
	}
	return i
}

const (
	ones  = 0x0101010101010101
	highs = 0x8080808080808080
)

// special8 flags (high bit of the byte) the bytes of v (little endian) that
// may be special inside a string. Borrows only run upward from a byte that
// is itself special, so the lowest flagged byte is exactly the first
// special one; flags above it may be false.
func special8(v uint64) uint64 {
	zeroQuote := (v ^ (ones * '"')) - ones
	zeroSlash := (v ^ (ones * '\\')) - ones
	below := v - ones*0x20
	return (zeroQuote | zeroSlash | below | v) & highs
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

// scalar scans a number or literal at i and returns its end.
func (d *NDJSONDecoder) scalar(b []byte, i int) (int, jsonKind, bool) {
	switch b[i] {
	case 't':
		if hasPrefix(b[i:], "true") {
			return i + 4, kindTrue, true
		}
	case 'f':
		if hasPrefix(b[i:], "false") {
			return i + 5, kindFalse, true
		}
	case 'n':
		if hasPrefix(b[i:], "null") {
			return i + 4, kindNull, true
		}
	default:
		if e := scanNumber(b, i); e > i {
			return e, kindNumber, true
		}
	}
	return i, kindNone, d.fail(i, "invalid value")
}

func hasPrefix(b []byte, s string) bool { return len(b) >= len(s) && string(b[:len(s)]) == s }

// scanNumber returns the end of the JSON number starting at i, or i if
// there is none.
func scanNumber(b []byte, i int) int {
	start := i
	if i < len(b) && b[i] == '-' {
		i++
	}
	if i >= len(b) {
		return start
	}
	switch {
	case b[i] == '0':
		i++
	case b[i] >= '1' && b[i] <= '9':
		i++
		for i < len(b) && isDigit(b[i]) {
			i++
		}
	default:
		return start
	}
	if i < len(b) && b[i] == '.' {
		i++
		if i >= len(b) || !isDigit(b[i]) {
			return start
		}
		for i < len(b) && isDigit(b[i]) {
			i++
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if i >= len(b) || !isDigit(b[i]) {
			return start
		}
		for i < len(b) && isDigit(b[i]) {
			i++
		}
	}
	return i
}

// skipNested validates the object or array at i and returns its end.
// The enclosing top-level object counts toward the depth limit.
func (d *NDJSONDecoder) skipNested(b []byte, i int) (int, bool) {
	st := d.stack[:0]
	defer func() { d.stack = st[:0] }()
	for {
		// Expect a value at i.
		if i >= len(b) {
			return i, d.fail(i, "expected a value")
		}
		switch c := b[i]; c {
		case '{', '[':
			if len(st)+2 > maxDepth {
				return i, d.fail(i, "nested too deep")
			}
			st = append(st, c)
			i = skipSpace(b, i+1)
			if i < len(b) && (c == '{' && b[i] == '}' || c == '[' && b[i] == ']') {
				st = st[:len(st)-1]
				i++
			} else if c == '{' {
				var ok bool
				if i, ok = d.member(b, i); !ok {
					return i, false
				}
				continue
			} else {
				continue
			}
		case '"':
			e, _, ok := d.str(b, i+1)
			if !ok {
				return e, false
			}
			i = e + 1
		default:
			e, _, ok := d.scalar(b, i)
			if !ok {
				return e, false
			}
			i = e
		}
		// After a value: close containers or move to the next element.
		for {
			if len(st) == 0 {
				return i, true
			}
			i = skipSpace(b, i)
			if i >= len(b) {
				return i, d.fail(i, "unterminated container")
			}
			top := st[len(st)-1]
			if b[i] == ',' {
				i = skipSpace(b, i+1)
				if top == '{' {
					var ok bool
					if i, ok = d.member(b, i); !ok {
						return i, false
					}
				}
				break
			}
			if top == '{' && b[i] == '}' || top == '[' && b[i] == ']' {
				st = st[:len(st)-1]
				i++
				continue
			}
			return i, d.fail(i, "expected ',' or a closing bracket")
		}
	}
}

// member scans `"name" :` inside a nested object and returns the index of
// the value.
func (d *NDJSONDecoder) member(b []byte, i int) (int, bool) {
	if i >= len(b) || b[i] != '"' {
		return i, d.fail(i, "expected a field name")
	}
	e, _, ok := d.str(b, i+1)
	if !ok {
		return e, false
	}
	i = skipSpace(b, e+1)
	if i >= len(b) || b[i] != ':' {
		return i, d.fail(i, "expected ':'")
	}
	return skipSpace(b, i+1), true
}

// appendUnescaped appends the decoded contents of a valid JSON string body.
// Invalid surrogates become U+FFFD, as encoding/json does.
func appendUnescaped(dst, s []byte) []byte {
	for i := 0; i < len(s); {
		c := s[i]
		if c != '\\' {
			dst = append(dst, c)
			i++
			continue
		}
		switch s[i+1] {
		case 'b':
			dst = append(dst, '\b')
		case 'f':
			dst = append(dst, '\f')
		case 'n':
			dst = append(dst, '\n')
		case 'r':
			dst = append(dst, '\r')
		case 't':
			dst = append(dst, '\t')
		case 'u':
			r := rune(hex4(s[i+2:]))
			i += 6
			if utf16.IsSurrogate(r) {
				if i+6 <= len(s) && s[i] == '\\' && s[i+1] == 'u' {
					if r2 := utf16.DecodeRune(r, rune(hex4(s[i+2:]))); r2 != utf8.RuneError {
						dst = utf8.AppendRune(dst, r2)
						i += 6
						continue
					}
				}
				r = utf8.RuneError
			}
			dst = utf8.AppendRune(dst, r)
			continue
		default: // '"', '\\', '/'
			dst = append(dst, s[i+1])
		}
		i += 2
	}
	return dst
}

func hex4(b []byte) int {
	v, _ := strconv.ParseUint(string(b[:4]), 16, 32)
	return int(v)
}

// appendCompact appends valid JSON with the whitespace outside strings removed.
func appendCompact(dst, b []byte) []byte {
	in := false
	for i := 0; i < len(b); i++ {
		c := b[i]
		if in {
			dst = append(dst, c)
			if c == '\\' {
				i++
				dst = append(dst, b[i])
			} else if c == '"' {
				in = false
			}
			continue
		}
		if isSpace(c) {
			continue
		}
		if c == '"' {
			in = true
		}
		dst = append(dst, c)
	}
	return dst
}
