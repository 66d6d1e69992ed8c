package lake

import (
	"fmt"
	"log/slog"

	"tidemark/lake/colfile"
)

// PayloadCodec is the Parquet compression of the payload column of
// raw_events and quarantine (the raw lines, most of a lake's bytes); the
// other columns are always zstd. Every Parquet column chunk names its own
// codec, so files written with different payload codecs can share a table.
type PayloadCodec string

// The payload codecs. Snappy is the default: on generated NDJSON it
// compresses at about twice zstd's fastest level (~500 vs ~260 MB/s per
// core, 64 KiB to 1 MiB pages) for files ~35% larger (ratio 5.9 vs 8.0),
// and every Parquet reader reads it. LZ4_RAW is about as fast as snappy
// here but needs Spark >= 3.4 / parquet-java >= 1.13 to read.
const (
	PayloadZstd   PayloadCodec = "zstd"
	PayloadSnappy PayloadCodec = "snappy"
	PayloadLZ4Raw PayloadCodec = "lz4_raw"

	DefaultPayloadCodec = PayloadSnappy
)

// ParsePayloadCodec reads a codec name as --payload-codec takes it.
func ParsePayloadCodec(s string) (PayloadCodec, error) {
	switch c := PayloadCodec(s); c {
	case PayloadZstd, PayloadSnappy, PayloadLZ4Raw:
		return c, nil
	}
	return "", fmt.Errorf("payload codec %q: want zstd, snappy or lz4_raw", s)
}

// fileCodec is the codec's colfile.Codec.
func (c PayloadCodec) fileCodec() colfile.Codec {
	switch c {
	case PayloadSnappy:
		return colfile.Snappy
	case PayloadLZ4Raw:
		return colfile.LZ4Raw
	}
	return colfile.Zstd
}

// init starts the goroutine that makes the writers' zstd encoders
// (colfile.ZstdEncoderMaker: outside any synctest bubble). It lives as
// long as the process; the tests' goroutine-leak checks ignore it by
// makeZstdEncoders's name.
func init() { go makeZstdEncoders(colfile.ZstdEncoderMaker()) }

func makeZstdEncoders(serve func()) { serve() }

// payloadCodecFor resolves the payload codec of an opened lake. A new lake
// records the asked one (DefaultPayloadCodec when none) in its tables'
// configuration. On an existing lake "" takes the recorded one, and zstd
// on a lake from before the option (so its files stay one codec); another
// codec asked explicitly is used for the files this process writes and
// logged, the record is left as it is: a table may mix codecs, readers
// take each file's from its own metadata.
func payloadCodecFor(asked PayloadCodec, recorded map[string]string, exists bool, log *slog.Logger) (PayloadCodec, error) {
	if asked != "" {
		if _, err := ParsePayloadCodec(string(asked)); err != nil {
			return "", err
		}
	}
	if !exists {
		if asked == "" {
			return DefaultPayloadCodec, nil
		}
		return asked, nil
	}
	had := PayloadZstd
	if s := recorded[confCodec]; s != "" {
		c, err := ParsePayloadCodec(s)
		if err != nil {
			return "", fmt.Errorf("table configuration %s: %w", confCodec, err)
		}
		had = c
	}
	if asked == "" {
		return had, nil
	}
	if asked != had {
		log.Info("payload codec differs from the lake's; this run's files use it, the others stay readable as they are",
			"payload_codec", asked, "lake_payload_codec", had)
	}
	return asked, nil
}

// withPayload sets the table's payload codec.
func (t *table) withPayload(c PayloadCodec) *table {
	t.payload = c
	return t
}
