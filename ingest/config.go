package ingest

import (
	"errors"
	"fmt"
	"time"

	"tidemark"
)

// Defaults for DecoderConfig's zero values.
const (
	DefaultTimeField    = "event_time"
	DefaultMaxFuture    = time.Hour
	DefaultMaxLineBytes = 1 << 20
)

// Input formats.
const (
	FormatNDJSON = "ndjson"
	FormatCSV    = "csv"
)

// DecoderConfig says how a line becomes a record. The zero value decodes
// NDJSON with the event time in "event_time" as RFC 3339 or epoch seconds.
type DecoderConfig struct {
	Format       string   // "ndjson" (default) or "csv"
	TimeField    string   // default "event_time"
	TimeUnit     string   // unit of numeric epochs: "s" (default), "ms", "us", "ns"
	TimeLayout   string   // optional Go layout for string times, instead of RFC 3339
	Keys         []string // grouping fields, in order
	ValueField   string   // optional numeric field to aggregate
	ArrivalField string   // optional field holding the arrival time
	// Aggs are the --agg inputs (tidemark.AggList.Inputs), which the
	// decoder extracts into Record.Fields, in order. A number input
	// whose value is neither a number nor a numeric string (nor null) is
	// bad_value, as for ValueField; a text input takes any value.
	Aggs         []tidemark.AggInput
	MaxFuture    time.Duration // event time allowed ahead of arrival; 0 = 1h, < 0 disables
	MaxLineBytes int           // longest line accepted; 0 = 1 MiB
	// MinEventTime is the time sanity floor (--min-event-time): events
	// before it are quarantined as too_old. The zero Time = no floor.
	MinEventTime time.Time
}

// withDefaults returns c with zero values replaced by the defaults.
func (c DecoderConfig) withDefaults() DecoderConfig {
	if c.Format == "" {
		c.Format = FormatNDJSON
	}
	if c.TimeField == "" {
		c.TimeField = DefaultTimeField
	}
	if c.TimeUnit == "" {
		c.TimeUnit = "s"
	}
	if c.MaxFuture == 0 {
		c.MaxFuture = DefaultMaxFuture
	}
	if c.MaxLineBytes == 0 {
		c.MaxLineBytes = DefaultMaxLineBytes
	}
	return c
}

// Validate reports the first problem with the configuration.
func (c DecoderConfig) Validate() error {
	c = c.withDefaults()
	switch c.Format {
	case FormatNDJSON, FormatCSV:
	default:
		return fmt.Errorf("ingest: unknown format %q (want ndjson or csv)", c.Format)
	}
	if _, err := unitMicros(c.TimeUnit); err != nil {
		return err
	}
	if c.MaxLineBytes < 0 {
		return fmt.Errorf("ingest: max line bytes must be positive, got %d", c.MaxLineBytes)
	}
	if _, err := c.paths(); err != nil {
		return err
	}
	seen := map[string]string{}
	check := func(spec, role string) error {
		if spec == "" {
			return fmt.Errorf("ingest: empty %s name", role)
		}
		path, err := pathOf(spec, role)
		if err != nil {
			return err
		}
		name := tidemark.FormatPath(path)
		if prev, ok := seen[name]; ok {
			return fmt.Errorf("ingest: field %q is both the %s and the %s", spec, prev, role)
		}
		seen[name] = role
		return nil
	}
	if err := check(c.TimeField, "time field"); err != nil {
		return err
	}
	for _, k := range c.Keys {
		if err := check(k, "key"); err != nil {
			return err
		}
	}
	if c.ValueField != "" {
		if err := check(c.ValueField, "value field"); err != nil {
			return err
		}
	}
	if c.ArrivalField != "" {
		if err := check(c.ArrivalField, "arrival field"); err != nil {
			return err
		}
	}
	if c.TimeLayout != "" {
		ref := time.Date(2006, 1, 2, 15, 4, 5, 0, time.UTC)
		if _, err := time.Parse(c.TimeLayout, ref.Format(c.TimeLayout)); err != nil {
			return fmt.Errorf("ingest: time layout %q does not round-trip: %w", c.TimeLayout, err)
		}
	}
	return nil
}

// WithDefaults returns c with its zero values replaced by the defaults:
// what the configuration means, as a lake remembers it.
func (c DecoderConfig) WithDefaults() DecoderConfig { return c.withDefaults() }

// fieldPaths are the parsed paths of a configuration's fields (see
// tidemark.ParseField): NDJSON follows them into nested objects; CSV,
// which has no nesting, reads the header named by the dotted path.
type fieldPaths struct {
	time, value, arrival []string // nil: no such field
	keys                 [][]string
	aggs                 [][]string // Aggs' paths
}

// pathOf parses a field spec: a key's [name=]path, another field's path.
func pathOf(spec, role string) ([]string, error) {
	if role == "key" {
		f, err := tidemark.ParseField(spec)
		if err != nil {
			return nil, fmt.Errorf("ingest: --key %w", err)
		}
		return f.Path, nil
	}
	p, err := tidemark.ParsePath(spec)
	if err != nil {
		return nil, fmt.Errorf("ingest: %s %q: %w", role, spec, err)
	}
	return p, nil
}

// paths parses the configuration's field specs (c with defaults).
func (c DecoderConfig) paths() (fieldPaths, error) {
	var fp fieldPaths
	var err error
	if fp.time, err = pathOf(c.TimeField, "time field"); err != nil {
		return fp, err
	}
	if c.ValueField != "" {
		if fp.value, err = pathOf(c.ValueField, "value field"); err != nil {
			return fp, err
		}
	}
	if c.ArrivalField != "" {
		if fp.arrival, err = pathOf(c.ArrivalField, "arrival field"); err != nil {
			return fp, err
		}
	}
	for _, k := range c.Keys {
		p, err := pathOf(k, "key")
		if err != nil {
			return fp, err
		}
		fp.keys = append(fp.keys, p)
	}
	for _, in := range c.Aggs {
		if len(in.Field.Path) == 0 {
			return fp, fmt.Errorf("ingest: --agg input %q has no field path", in.Field.Name)
		}
		fp.aggs = append(fp.aggs, in.Field.Path)
	}
	return fp, nil
}

// unitMicros returns how many of unit make a microsecond, as a (mul, div) pair
// folded into one signed number: > 0 multiplies, < 0 divides.
func unitMicros(unit string) (int64, error) {
	switch unit {
	case "s", "":
		return 1_000_000, nil
	case "ms":
		return 1_000, nil
	case "us", "µs":
		return 1, nil
	case "ns":
		return -1_000, nil
	}
	return 0, errors.New("ingest: unknown time unit " + fmt.Sprintf("%q", unit) + " (want s, ms, us or ns)")
}
