package ingest

import (
	"cmp"
	"fmt"
	"runtime"
	"slices"
	"sync"

	"tidemark"
)

// lineInput is the reading state of one file or object, the same for the
// directory and the S3 source: its position, the line reader over its
// bytes (nil while closed), its CSV decoders, and the lines cut from the
// reader ahead of the records taken.
//
// Lines are cut a chunk at a time and the chunk's records are decoded on
// several cores at once (decodeAll); then they are taken one by one, in
// order, exactly as a line-at-a-time loop would: the position moves past
// each, and the read stops where aligned reading says. Lines cut but not
// taken stay in ahead for the next read, and are decoded again then (a
// record's arrival is that read's clock). So the records, their order and
// every position are those of reading one line at a time.
type lineInput struct {
	pos   FilePosition
	r     *lineReader
	until int64 // Limit: no record at or past this offset; -1 = no bound

	csv   []Decoder // CSV: one per decoding worker, from pos.Header; nil until it is known
	ahead []cutLine // cut from r, not taken yet; their bytes stay valid
	// stopped is why the last cut ended early with lines ahead: the
	// reader had no complete line (noLine) or failed (err). It is the
	// answer once ahead is taken, so the reader is asked no sooner than a
	// line-at-a-time loop would ask it.
	noLine bool
	err    error
	chunk  int // lines to cut next (adapts to how many a read takes)
}

// cutLine is a line cut from the reader: its bytes (truncated past the
// line limit), offset, full length and the offset just past it.
type cutLine struct {
	payload           []byte
	off, length, next int64
}

// lineRead says how to turn one input's lines into records.
type lineRead struct {
	source   string
	cfg      *DecoderConfig // format, line limit; CSV decoders are made from it
	decoders []Decoder      // NDJSON: the source's, one per worker
	arrival  int64
	idx      int      // the input's index in path order (alignment ties)
	bound    alignKey // stop once the input's key passes it
	// copy, if set, copies a payload out of the reader's buffer (a reader
	// that is not stable); nil keeps it in place.
	copy func([]byte) []byte
	// scratch is the source's buffer of cut lines, lent to the input
	// being read: an input keeps its own copy only of lines left ahead,
	// so 50 files do not each hold a chunk's worth.
	scratch *[]cutLine
}

// lineStop says why read returned.
type lineStop int

const (
	stopMore   lineStop = iota // maxRecords taken, or the bound passed: more may follow
	stopUntil                  // at the Limit bound
	stopNoLine                 // no complete line now; r.done says whether the input ended
	stopErr                    // the reader failed; the error is returned
)

// Chunk sizes, in lines (variables so a test can read line by line).
// Decoding goes parallel from parallelLines up.
var (
	firstChunk = 64
	maxChunk   = 4096
)

const parallelLines = 256

// decodeWorkers is how many decoders a source uses at once.
var decodeWorkers = func() int { return max(1, min(runtime.GOMAXPROCS(0), 4)) }

// drop forgets the reader and what was cut from it; the position is kept,
// and reading starts again from it.
func (in *lineInput) drop() {
	if in.r != nil {
		in.r.release()
	}
	in.r, in.csv, in.ahead, in.noLine, in.err = nil, nil, nil, false, nil
}

// read appends up to maxRecords records of the input to dst, stopping
// early at the Limit bound, when no complete line is there, on a read
// error (returned with stopErr), or after the record that moves the
// input's alignment key past c.bound. A non-nil error with another stop
// is fatal (a CSV header no decoder can be made from).
func (in *lineInput) read(c *lineRead, dst []tidemark.Record, maxRecords int) (_ []tidemark.Record, n int, stop lineStop, err error) {
	if len(in.ahead) == 0 && c.scratch != nil {
		buf := (*c.scratch)[:0]
		in.ahead = buf
		defer func() {
			switch {
			case len(in.ahead) > 0:
				kept := slices.Clone(in.ahead) // the scratch is the next input's
				clear(in.ahead)
				in.ahead = kept
			case cap(in.ahead) > cap(buf):
				*c.scratch, in.ahead = in.ahead[:0], nil // grown: keep the larger one
			default:
				in.ahead = nil
			}
		}()
	}
	for n < maxRecords {
		if len(in.ahead) == 0 {
			if in.err != nil {
				err := in.err
				in.err, in.noLine = nil, false
				return dst, n, stopErr, err
			}
			if in.noLine {
				in.noLine = false
				return dst, n, stopNoLine, nil
			}
			stop, err := in.cut(c, min(maxRecords-n, cmp.Or(in.chunk, firstChunk)))
			if err != nil || len(in.ahead) == 0 {
				return dst, n, stop, err
			}
		}
		k := min(len(in.ahead), maxRecords-n)
		base := len(dst)
		dst = slices.Grow(dst, k)
		for _, l := range in.ahead[:k] {
			// Decoded in place: a local passed to the interface call would
			// escape, one allocation per record.
			dst = append(dst, tidemark.Record{Source: c.source, File: in.pos.Path, FileID: in.pos.ID, Offset: l.off, Payload: l.payload, Arrival: c.arrival})
			if l.length > int64(c.cfg.MaxLineBytes) {
				rec := &dst[len(dst)-1]
				rec.Reason = tidemark.ReasonLineTooLong
				rec.Err = fmt.Sprintf("line is %d bytes, over the limit of %d", l.length, c.cfg.MaxLineBytes)
			}
		}
		decoders := c.decoders
		if in.csv != nil {
			decoders = in.csv
		}
		decodeAll(decoders, dst[base:])
		taken, passed := k, false
		for j := range k {
			n++
			in.pos.Offset = in.ahead[j].next
			in.pos.saw(&dst[base+j], c.arrival)
			if c.bound.less(keyOf(&in.pos, c.idx)) {
				taken, passed = j+1, true // another input lags now
				break
			}
		}
		clear(dst[base+taken : base+k]) // decoded, not taken: hold no buffers
		dst = dst[:base+taken]
		// Taken lines are cleared: a payload left in the (shared) scratch
		// would keep its input's read buffer alive after the batch is done
		// with it, one stale buffer per input read (BenchmarkLongRunMemory:
		// ~7 MB over 50 files).
		clear(in.ahead[:taken])
		if taken == len(in.ahead) {
			in.ahead = in.ahead[:0]
			in.chunk = min(2*cmp.Or(in.chunk, firstChunk), maxChunk)
		} else {
			in.ahead = in.ahead[taken:]
			if passed {
				in.chunk = taken // aligned reading takes runs about this long here
			}
		}
		if passed {
			return dst, n, stopMore, nil
		}
	}
	return dst, n, stopMore, nil
}

// cut cuts up to want lines ahead. Only the first line may make the
// reader read its input; the rest come from what it holds, so the input is
// read no further than a line-at-a-time loop would have. The stop it
// returns explains an empty ahead.
func (in *lineInput) cut(c *lineRead, want int) (lineStop, error) {
	next := in.pos.Offset
	for len(in.ahead) < want {
		if in.until >= 0 && next >= in.until {
			return stopUntil, nil
		}
		in.r.noFill = len(in.ahead) > 0
		payload, off, length, ok, err := in.r.next()
		in.r.noFill = false
		switch {
		case err != nil:
			if len(in.ahead) == 0 {
				return stopErr, err
			}
			in.err = err
			return stopErr, nil
		case !ok && len(in.ahead) == 0:
			return stopNoLine, nil
		case !ok:
			if in.r.stalled {
				in.r.stalled = false
				return stopMore, nil // the rest needs a read: the next cut
			}
			in.noLine = true
			return stopNoLine, nil
		}
		next = in.r.off
		if c.cfg.Format == FormatCSV && in.csv == nil {
			// The header: the first line, taken at once.
			in.pos.Header = slices.Clone(payload)
			in.pos.Offset = next
			if err := in.csvFrom(c.cfg); err != nil {
				return stopMore, err // fatal: not a read error
			}
			continue
		}
		if c.copy != nil {
			payload = c.copy(payload)
		}
		in.ahead = append(in.ahead, cutLine{payload: payload, off: off, length: length, next: next})
	}
	return stopMore, nil
}

// csvFrom makes the input's CSV decoders from its header.
func (in *lineInput) csvFrom(cfg *DecoderConfig) error {
	decs := make([]Decoder, decodeWorkers())
	for i := range decs {
		dec, err := NewCSVDecoder(*cfg, in.pos.Header)
		if err != nil {
			return err
		}
		decs[i] = dec
	}
	in.csv = decs
	return nil
}

// decodeAll decodes the records (those not already quarantined for their
// length) with the decoders, splitting a large chunk among them: each
// decodes a contiguous part on a goroutine of its own. A record's result
// depends only on its bytes and arrival, so which decoder takes it does
// not matter.
func decodeAll(decs []Decoder, recs []tidemark.Record) {
	parts := min(len(decs), len(recs)/(parallelLines/2))
	if parts <= 1 {
		decodePart(decs[0], recs)
		return
	}
	var wg sync.WaitGroup
	size := (len(recs) + parts - 1) / parts
	for p := 1; p < parts; p++ {
		part := recs[p*size : min(len(recs), (p+1)*size)]
		wg.Go(func() { decodePart(decs[p], part) })
	}
	decodePart(decs[0], recs[:size])
	wg.Wait()
}

func decodePart(dec Decoder, recs []tidemark.Record) {
	for i := range recs {
		if recs[i].Reason == tidemark.ReasonNone {
			dec.Decode(&recs[i])
		}
	}
}

// ndjsonDecoders makes a source's NDJSON decoders, one per worker.
func ndjsonDecoders(cfg DecoderConfig) ([]Decoder, error) {
	decs := make([]Decoder, decodeWorkers())
	for i := range decs {
		dec, err := NewNDJSONDecoder(cfg)
		if err != nil {
			return nil, err
		}
		decs[i] = dec
	}
	return decs, nil
}
