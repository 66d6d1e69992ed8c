package ingest

import (
	"fmt"
	"math"
	"strconv"
	"time"
	"unsafe"
)

// timeParser turns the text of a time field into microseconds since the
// epoch, UTC. It is hand-written for RFC 3339 and decimal epochs because
// time.Parse costs more than the rest of a line's decoding together.
type timeParser struct {
	layout string // optional Go layout, used for strings instead of RFC 3339
	unit   int64  // from unitMicros: > 0 multiplies to µs, < 0 divides
	dates  dateCache
}

func newTimeParser(layout, unit string) (timeParser, error) {
	u, err := unitMicros(unit)
	if err != nil {
		return timeParser{}, err
	}
	return timeParser{layout: layout, unit: u}, nil
}

// parseString parses a string time: the layout if one is set, else RFC 3339,
// else (in both cases) a numeric epoch in the configured unit.
func (p *timeParser) parseString(b []byte) (int64, error) {
	if p.layout != "" {
		t, err := time.Parse(p.layout, string(b))
		if err == nil {
			return microsFloor(t), nil
		}
		if us, ok := p.parseEpoch(b); ok {
			return us, nil
		}
		return 0, fmt.Errorf("time %q does not match layout %q", b, p.layout)
	}
	if us, ok := p.dates.parseRFC3339(b); ok {
		return us, nil
	}
	if us, ok := p.parseEpoch(b); ok {
		return us, nil
	}
	return 0, fmt.Errorf("time %q is neither RFC 3339 nor an epoch number", b)
}

// parseNumber parses a JSON number as an epoch in the configured unit.
func (p timeParser) parseNumber(b []byte) (int64, error) {
	if us, ok := p.parseEpoch(b); ok {
		return us, nil
	}
	return 0, fmt.Errorf("epoch %s is out of range", b)
}

// microsFloor converts t to µs, rounding sub-microsecond parts toward -inf
// like time.Time.UnixMicro.
func microsFloor(t time.Time) int64 { return t.UnixMicro() }

// parseRFC3339 parses YYYY-MM-DD(T|t| )hh:mm:ss[(.|,)fraction](Z|z|±hh:mm)
// with any number of fraction digits, returning µs UTC (sub-µs truncated
// toward -inf). It accepts what time.Parse(time.RFC3339Nano) accepts in
// that shape, plus the lowercase and space variants RFC 3339 allows. With
// a space for the T the zone may be left out, as in SQL timestamps
// ("2024-01-01 10:03:00", which Spark reads too): that time is UTC.
func parseRFC3339(s []byte) (int64, bool) {
	if len(s) < 19 {
		return 0, false
	}
	days, ok := parseDate(s)
	if !ok {
		return 0, false
	}
	return parseClock(s, days)
}

// parseDate parses the YYYY-MM-DD of an RFC 3339 time of at least 19
// bytes to days since 1970-01-01.
func parseDate(s []byte) (int64, bool) {
	y1, ok1 := digits2(s[0], s[1])
	y2, ok2 := digits2(s[2], s[3])
	month, ok3 := digits2(s[5], s[6])
	day, ok4 := digits2(s[8], s[9])
	year := y1*100 + y2
	if !ok1 || !ok2 || !ok3 || !ok4 || s[4] != '-' || s[7] != '-' ||
		month < 1 || month > 12 || day < 1 || day > daysIn(month, year) {
		return 0, false
	}
	return daysFromCivil(year, month, day), true
}

// parseClock parses the rest of an RFC 3339 time of at least 19 bytes
// whose date is days: the separator, hh:mm:ss, the fraction and the zone.
func parseClock(s []byte, days int64) (int64, bool) {
	hour, ok1 := digits2(s[11], s[12])
	minute, ok2 := digits2(s[14], s[15])
	sec, ok3 := digits2(s[17], s[18])
	if !ok1 || !ok2 || !ok3 || hour > 23 || minute > 59 || sec > 59 || s[13] != ':' || s[16] != ':' {
		return 0, false
	}
	sep := s[10]
	if sep != 'T' && sep != 't' && sep != ' ' {
		return 0, false
	}
	s = s[19:]
	var micros int64
	if len(s) >= 2 && (s[0] == '.' || s[0] == ',') && isDigit(s[1]) {
		n := 1
		scale := int64(100_000)
		for ; n < len(s) && isDigit(s[n]); n++ {
			micros += int64(s[n]-'0') * scale
			scale /= 10
		}
		s = s[n:]
	}
	var offset int
	switch {
	case len(s) == 0 && sep == ' ': // SQL style, no zone: UTC
	case len(s) == 1 && (s[0] == 'Z' || s[0] == 'z'):
	case len(s) == 6 && (s[0] == '+' || s[0] == '-') && s[3] == ':':
		hh, ok1 := digits2(s[1], s[2])
		mm, ok2 := digits2(s[4], s[5])
		if !ok1 || !ok2 || hh > 23 || mm > 59 {
			return 0, false
		}
		offset = (hh*60 + mm) * 60
		if s[0] == '-' {
			offset = -offset
		}
	default:
		return 0, false
	}
	secs := days*86400 + int64(hour*3600+minute*60+sec) - int64(offset)
	return secs*1_000_000 + micros, true
}

// digits2 is the value of two decimal digits.
func digits2(a, b byte) (int, bool) {
	a, b = a-'0', b-'0'
	return int(a)*10 + int(b), a <= 9 && b <= 9
}

// dateCache remembers the last date an RFC 3339 time had: the times of a
// stream's lines mostly share their day, and the date is half of parsing
// one.
type dateCache struct {
	date [10]byte
	days int64
	ok   bool
}

// parseRFC3339 is the package's parseRFC3339, reusing the date of the
// previous time when the bytes are the same (FuzzParseRFC3339Cached holds
// the two equal).
func (c *dateCache) parseRFC3339(s []byte) (int64, bool) {
	if len(s) < 19 {
		return 0, false
	}
	if !c.ok || string(s[:10]) != string(c.date[:]) {
		days, ok := parseDate(s)
		if !ok {
			return 0, false
		}
		copy(c.date[:], s[:10])
		c.days, c.ok = days, true
	}
	return parseClock(s, c.days)
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

func daysIn(month, year int) int {
	switch month {
	case 2:
		if year%4 == 0 && (year%100 != 0 || year%400 == 0) {
			return 29
		}
		return 28
	case 4, 6, 9, 11:
		return 30
	}
	return 31
}

// daysFromCivil returns days since 1970-01-01 of a proleptic Gregorian date
// (Howard Hinnant's algorithm).
func daysFromCivil(y, m, d int) int64 {
	if m <= 2 {
		y--
	}
	era := y / 400
	if y < 0 && y%400 != 0 {
		era--
	}
	yoe := y - era*400
	mp := (m + 9) % 12
	doy := (153*mp+2)/5 + d - 1
	doe := yoe*365 + yoe/4 - yoe/100 + doy
	return int64(era)*146097 + int64(doe) - 719468
}

// parseEpoch parses a decimal number (JSON number grammar) in the parser's
// unit to µs, exactly for plain decimals and via float64 with an exponent.
func (p timeParser) parseEpoch(b []byte) (int64, bool) {
	if len(b) == 0 || !validNumber(b) {
		return 0, false
	}
	neg := b[0] == '-'
	i := 0
	if neg {
		i++
	}
	var intPart uint64
	for ; i < len(b) && isDigit(b[i]); i++ {
		if intPart > (math.MaxInt64-9)/10 {
			return 0, false
		}
		intPart = intPart*10 + uint64(b[i]-'0')
	}
	var frac []byte
	if i < len(b) && b[i] == '.' {
		j := i + 1
		for j < len(b) && isDigit(b[j]) {
			j++
		}
		frac = b[i+1 : j]
		i = j
	}
	if i < len(b) { // exponent: rare, accept float precision
		f, err := strconv.ParseFloat(unsafe.String(&b[0], len(b)), 64)
		if err != nil {
			return 0, false
		}
		if p.unit > 0 {
			f *= float64(p.unit)
		} else {
			f /= float64(-p.unit)
		}
		f = math.Floor(f)
		if f >= math.MaxInt64 || f < math.MinInt64 || f != f {
			return 0, false
		}
		return int64(f), true
	}
	// Exact: value = intPart.frac units; scale to µs (or to ns then floor-divide).
	mul := p.unit
	if mul < 0 {
		mul = 1 // ns: work in ns and divide at the end
	}
	if intPart > uint64(math.MaxInt64/mul) {
		return 0, false
	}
	v := int64(intPart) * mul
	exactSub, remainder := trimRemainder(frac, mul)
	if neg {
		v = -v - exactSub
		if remainder {
			v--
		}
	} else {
		v += exactSub
	}
	if p.unit < 0 {
		d := -p.unit
		q := v / d
		if v%d != 0 && v < 0 {
			q--
		}
		v = q
	}
	return v, true
}

// trimRemainder returns the fraction digits as units of 1/mul (truncated)
// and whether any digit below that resolution is nonzero.
func trimRemainder(frac []byte, mul int64) (int64, bool) {
	var sub int64
	scale := mul
	for i, c := range frac {
		scale /= 10
		if scale == 0 {
			for _, r := range frac[i:] {
				if r != '0' {
					return sub, true
				}
			}
			return sub, false
		}
		sub += int64(c-'0') * scale
	}
	return sub, false
}

// validNumber reports whether b is exactly a JSON number.
func validNumber(b []byte) bool { return len(b) > 0 && scanNumber(b, 0) == len(b) }
