package ingest

import "bytes"

// splitter finds where records end in a byte stream, so the reader needs no
// knowledge of the format. A CSV record may span physical lines (a quoted
// field can hold newlines); an NDJSON record is one line.
type splitter interface {
	// next returns the index of the '\n' that ends the record starting at
	// buf[0], or -1 when buf holds no complete record yet. Successive calls
	// pass the same record start with more bytes appended; the splitter
	// remembers how far it has scanned.
	next(buf []byte) int
	// discard tells the splitter the first n bytes of the record were
	// dropped (a line too long to keep), so offsets shift by n.
	discard(n int)
	// reset starts a new record.
	reset()
}

func newSplitter(format string) splitter {
	if format == FormatCSV {
		return &csvSplitter{}
	}
	return &lineSplitter{}
}

// lineSplitter ends a record at every newline.
type lineSplitter struct{ scanned int }

func (s *lineSplitter) next(buf []byte) int {
	if i := bytes.IndexByte(buf[s.scanned:], '\n'); i >= 0 {
		return s.scanned + i
	}
	s.scanned = len(buf)
	return -1
}

func (s *lineSplitter) discard(n int) { s.scanned -= n }
func (s *lineSplitter) reset()        { s.scanned = 0 }

// csv splitter states.
const (
	csvFieldStart = iota
	csvUnquoted
	csvQuoted
	csvQuoteSeen // a '"' inside a quoted field: an escape or the closing quote
)

// csvSplitter ends a record at a newline outside quotes (RFC 4180). A quote
// opens a quoted field only at the start of a field, so a stray quote in
// the middle of a field cannot swallow the rest of the file.
type csvSplitter struct {
	scanned int
	state   int
}

func (s *csvSplitter) next(buf []byte) int {
	st := s.state
	for i := s.scanned; i < len(buf); i++ {
		c := buf[i]
		switch st {
		case csvQuoted:
			j := bytes.IndexByte(buf[i:], '"')
			if j < 0 {
				s.scanned, s.state = len(buf), st
				return -1
			}
			i += j
			st = csvQuoteSeen
		case csvFieldStart, csvQuoteSeen:
			switch c {
			case '"':
				st = csvQuoted
			case ',':
				st = csvFieldStart
			case '\n':
				return i
			default:
				st = csvUnquoted
			}
		default: // csvUnquoted
			switch c {
			case ',':
				st = csvFieldStart
			case '\n':
				return i
			}
		}
	}
	s.scanned, s.state = len(buf), st
	return -1
}

func (s *csvSplitter) discard(n int) { s.scanned -= n }
func (s *csvSplitter) reset()        { s.scanned, s.state = 0, csvFieldStart }
