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
	// ReasonBadKey: a key's value does not fit the lake's key column type
	// (a string or fraction where the lake holds BIGINT, ...).
	ReasonBadKey Reason = "bad_key"
)

// Reasons lists every quarantine reason in a fixed order, for reports.
var Reasons = []Reason{
	ReasonMalformed, ReasonMissingTime, ReasonBadTime, ReasonBadValue,
	ReasonFutureTime, ReasonLineTooLong, ReasonBadUTF8, ReasonTooOld, ReasonBlank, ReasonBadKey,
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
	// KeyKinds holds each key part's KeyKind, 2 bits per part (KeyKindOf).
	KeyKinds uint64
	Value    float64
	HasValue bool // false when the value field is absent or null
	// Fields holds the aggregates' inputs (AggList.Inputs), one value
	// each, in order; nil when the lake has no --agg.
	Fields []AggValue

	Reason Reason
	Err    string

	// Set by the stream engine for valid records.
	Status   Status
	Disorder int64 // max event time already seen in this source minus EventTime; 0 if in order
}

// Valid reports whether the record is an event rather than a quarantine row.
func (r *Record) Valid() bool { return r.Reason == ReasonNone }

// KeyKind is the JSON kind of one key part's value: what a lake's typed key
// column (BIGINT, DOUBLE, BOOLEAN) may hold. CSV keys are always KeyText.
type KeyKind uint8

// Key part kinds. A number's text in Record.Key is canonical: an integral
// number that fits int64 in decimal (500.0 is "500"), any other number as
// strconv.FormatFloat(v, 'g', -1, 64).
const (
	KeyText  KeyKind = iota // a string, object, array, or null
	KeyInt                  // an integral JSON number that fits int64
	KeyFloat                // any other JSON number
	KeyBool                 // true or false
)

// maxKindParts is how many key parts Record.KeyKinds holds (2 bits each);
// parts past it read as KeyText.
const maxKindParts = 32

// KeyKindOf returns key part i's kind.
func (r *Record) KeyKindOf(i int) KeyKind {
	if i >= maxKindParts {
		return KeyText
	}
	return KeyKind(r.KeyKinds >> (2 * i) & 3)
}

// SetKeyKind records key part i's kind.
func (r *Record) SetKeyKind(i int, k KeyKind) {
	if i >= maxKindParts {
		return
	}
	r.KeyKinds = r.KeyKinds&^(3<<(2*i)) | uint64(k)<<(2*i)
}
