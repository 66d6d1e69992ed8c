package requeue

import (
	"context"
	"fmt"

	"tidemark"
	"tidemark/ingest"
	"tidemark/lake"
)

// CSV rows. Quarantine keeps a CSV record, not the header line of its
// file, and a record cannot be decoded without it. The header of a row's
// file is looked for, in this order:
//
//  1. in quarantine itself: the row at offset 0 of the same file (by
//     file_id; by source and path for rows written before file_id). It is
//     there when the file was read as NDJSON (--format mistaken), which
//     quarantines every line, the header too;
//  2. in the file, read again (ingest.ReadCSVHeader): a local file that
//     still holds the row's bytes at its offset, compressed or not;
//  3. Config.CSVHeader, the header the user gives for the rest (files
//     gone, rewritten, S3 objects).
//
// A file's header is looked for once; rows whose header is found nowhere
// stay, as ReasonNoHeader. A row at offset 0 is a header under CSV, not a
// record: it stays, as ReasonCSVHeader.

// Reasons a CSV row stays for.
const (
	ReasonCSVHeader tidemark.Reason = "csv_header (the first line of its file, not a record)"
	ReasonNoHeader  tidemark.Reason = "csv (the header of its file was not found; give --csv-header)"
)

// csvHeaders finds and keeps the headers of the files CSV rows come from,
// with a decoder for each distinct header.
type csvHeaders struct {
	cfg         ingest.DecoderConfig
	given       []byte            // Config.CSVHeader; nil = none
	quarantined map[string][]byte // offset-0 rows of quarantine, by fileKey
	byFile      map[string]int    // header index by fileKey; -1 = not found
	index       map[string]int    // header index by the header's bytes
	headers     [][]byte
	decs        []ingest.Decoder
}

// newCSVHeaders reads the offset-0 rows of quarantine (a first pass over
// it) and makes the decoder of the given header, if any.
func newCSVHeaders(ctx context.Context, lk *lake.Lake, cfg Config) (*csvHeaders, error) {
	h := &csvHeaders{cfg: cfg.Decoder, given: cfg.CSVHeader, quarantined: map[string][]byte{}, byFile: map[string]int{}, index: map[string]int{}}
	if h.given != nil {
		if _, err := h.add(h.given); err != nil {
			return nil, fmt.Errorf("--csv-header: %w", err)
		}
	}
	err := lk.ScanQuarantine(ctx, func(row lake.QuarantineRow) error {
		if row.Offset == 0 {
			h.quarantined[fileKey(row)] = append([]byte(nil), row.Payload...)
		}
		return nil
	})
	return h, err
}

// fileKey names the file a row was read from.
func fileKey(row lake.QuarantineRow) string {
	if row.FileID != "" {
		return "id\x00" + row.FileID
	}
	return "path\x00" + row.Source + "\x00" + row.File
}

// of returns the index of the header of row's file; ok is false when it
// was found nowhere.
func (h *csvHeaders) of(row lake.QuarantineRow) (i int, ok bool, err error) {
	k := fileKey(row)
	if i, seen := h.byFile[k]; seen {
		return i, i >= 0, nil
	}
	header, found := h.quarantined[k]
	if !found {
		max := h.cfg.MaxLineBytes
		if max == 0 {
			max = ingest.DefaultMaxLineBytes
		}
		if b, err := ingest.ReadCSVHeader(row.Source, row.File, row.Offset, row.Payload, max); err == nil {
			header, found = b, true
		}
	}
	if !found && h.given != nil {
		header, found = h.given, true
	}
	if !found {
		h.byFile[k] = -1
		return -1, false, nil
	}
	i, err = h.add(header)
	if err != nil {
		return 0, false, err
	}
	h.byFile[k] = i
	return i, true, nil
}

// add returns the index of header, making its decoder the first time.
func (h *csvHeaders) add(header []byte) (int, error) {
	if i, ok := h.index[string(header)]; ok {
		return i, nil
	}
	dec, err := ingest.NewCSVDecoder(h.cfg, header)
	if err != nil {
		return 0, err
	}
	h.index[string(header)] = len(h.headers)
	h.headers = append(h.headers, header)
	h.decs = append(h.decs, dec)
	return len(h.headers) - 1, nil
}
