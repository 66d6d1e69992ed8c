package main

import "strconv"

// appendJSON appends e as one NDJSON line (with its newline). Bad kinds
// carry exactly one defect each, so each maps to one quarantine reason.
func appendJSON(b []byte, e *event) []byte {
	if e.kind == kindMalformed {
		if e.variant == 0 {
			// A log line that is not JSON at all.
			b = append(b, "GET /p/"...)
			b = strconv.AppendInt(b, int64(e.page), 10)
			return append(b, " HTTP/1.1 200 -\n"...)
		}
		// JSON cut short, as by a crashed writer.
		b = append(b, `{"event_time":"`...)
		b = append(b, e.eventTime()...)
		b = append(b, `","page":"/p/`...)
		b = strconv.AppendInt(b, int64(e.page), 10)
		return append(b, "\n"...)
	}
	b = append(b, '{')
	switch e.kind {
	case kindMissingTime:
		// no event_time at all
	case kindBadTime:
		if e.variant == 0 {
			b = append(b, `"event_time":"2026-13-45T99:61:00Z",`...)
		} else {
			b = append(b, `"event_time":"yesterday",`...)
		}
	default:
		b = append(b, `"event_time":"`...)
		b = append(b, e.eventTime()...)
		b = append(b, `",`...)
	}
	b = append(b, `"arrival_time":"`...)
	b = append(b, fmtMS(e.arrivalMS)...)
	b = append(b, `","page":"`...)
	b = e.pageName(b)
	b = append(b, `","country":"`...)
	b = append(b, countries[e.country]...)
	b = append(b, `","client":"`...)
	b = append(b, clients[e.client]...)
	b = append(b, `","user_id":"u`...)
	b = strconv.AppendInt(b, int64(e.user), 10)
	b = append(b, `","action":"`...)
	b = append(b, actions[e.action]...)
	b = append(b, '"')
	switch {
	case e.kind == kindBadValue && e.variant == 0:
		b = append(b, `,"value":"n/a"`...)
	case e.kind == kindBadValue:
		b = append(b, `,"value":"12,5"`...)
	case e.valueNull == 1:
		b = append(b, `,"value":null`...)
	case e.valueNull == 2:
		// value absent
	default:
		b = append(b, `,"value":`...)
		b = e.value(b)
	}
	return append(b, "}\n"...)
}

// csvHeader is the first line of every CSV file.
const csvHeader = "event_time,arrival_time,page,country,client,user_id,action,value\n"

// appendCSV appends e as one CSV record. No field needs quoting; a malformed
// record has the wrong number of fields.
func appendCSV(b []byte, e *event) []byte {
	if e.kind == kindMalformed {
		b = append(b, "GET /p/"...)
		b = strconv.AppendInt(b, int64(e.page), 10)
		return append(b, ",200\n"...)
	}
	switch e.kind {
	case kindMissingTime:
	case kindBadTime:
		b = append(b, "yesterday"...)
	default:
		b = append(b, e.eventTime()...)
	}
	b = append(b, ',')
	b = append(b, fmtMS(e.arrivalMS)...)
	b = append(b, ',')
	b = e.pageName(b)
	b = append(b, ',')
	b = append(b, countries[e.country]...)
	b = append(b, ',')
	b = append(b, clients[e.client]...)
	b = append(b, ",u"...)
	b = strconv.AppendInt(b, int64(e.user), 10)
	b = append(b, ',')
	b = append(b, actions[e.action]...)
	b = append(b, ',')
	switch {
	case e.kind == kindBadValue:
		b = append(b, "n/a"...)
	case e.valueNull != 0:
		// empty = null
	default:
		b = e.value(b)
	}
	return append(b, '\n')
}
