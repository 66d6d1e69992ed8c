package tidemark

// Reason says why a line was quarantined instead of becoming an event.
type Reason string

// Quarantine reasons (SPEC §1). ReasonNone marks a valid event.
const (
	ReasonNone        Reason = ""
	ReasonMalformed   Reason = "malformed"
	ReasonMissingTime Reason = "missing_time"
	ReasonBadTime     Reason = "bad_time"
	ReasonBadValue    Reason = "bad_value"
	ReasonFutureTime  Reason = "future_time"
	ReasonLineTooLong Reason = "line_too_long"
	ReasonBadUTF8     Reason = "bad_utf8"
	ReasonTooOld      Reason = "too_old" // event time before the --min-event-time floor
	ReasonBlank       Reason = "blank"   // an empty or whitespace-only line
)

// Reasons lists every quarantine reason in a fixed order, for reports.
var Reasons = []Reason{
	ReasonMalformed, ReasonMissingTime, ReasonBadTime, ReasonBadValue,
	ReasonFutureTime, ReasonLineTooLong, ReasonBadUTF8, ReasonTooOld, ReasonBlank,
}

// Status is the fate of a valid event in the stream.
type Status uint8

// Event statuses as stored in raw_events.status.
const (
	StatusOK   Status = iota // counted by the stream
	StatusLate               // left out of at least one of its windows by the watermark
)

func (s Status) String() string {
	if s == StatusLate {
		return "late"
	}
	return "ok"
}

// Record is one input line after decoding. Exactly one of two things is true:
// Reason is ReasonNone and the event fields are valid, or Reason names why the
// line goes to quarantine (with Err holding the detail).
//
// All times are microseconds since the Unix epoch, UTC.
type Record struct {
	Source string // the --source value the line came from
	File   string // file path or object key within the source
	// FileID is the file's identity, the same under any name, rotation,
	// compression or copy of it (docs/file-identity.md): with Offset it
	// names the line for good. Empty where the source has none.
	FileID  string
	Offset  int64  // byte offset of the line's first byte in the (decompressed) file
	Payload []byte // the raw line, byte-exact, without its trailing newline

	Arrival int64 // when the event was received (--arrival-field, or the read time)

	EventTime int64
	Key       Key
	Value     float64
	HasValue  bool // false when the value field is absent or null

	Reason Reason
	Err    string

	// Set by the stream engine for valid records.
	Status   Status
	Disorder int64 // max event time already seen in this source minus EventTime; 0 if in order
}

// Valid reports whether the record is an event rather than a quarantine row.
func (r *Record) Valid() bool { return r.Reason == ReasonNone }
