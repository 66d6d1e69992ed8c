package ingest

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/minio/minio-go/v7"

	"tidemark"
)

// s3Object is one tracked object version of an S3 source.
type s3Object struct {
	lineInput         // position, line reader, Limit bound
	key        string // full key
	size       int64  // raw size, from the listing
	compressed bool

	body    io.ReadCloser
	closers []io.Closer

	used      uint64    // s3Source.tick when last read (openfiles.go)
	peeked    bool      // its next event time was looked for (peek)
	gone      bool      // a GET found it changed (412) or deleted (404)
	openFails int       // consecutive failed GETs
	readFails int       // consecutive failed reads of the body without a record
	retryAt   time.Time // after a failure, not before
}

// maxS3ReadFails is how many times in a row reading an object's body may
// fail without producing a record before the rest of the object is
// skipped (logged as an error): with its ETag pinned the bytes cannot
// change, so a repeated failure is a corrupt object, not a transient one.
// Failed GETs (the server unreachable) are retried forever.
const maxS3ReadFails = 3

func (o *s3Object) close() error {
	var errs []error
	for i := len(o.closers) - 1; i >= 0; i-- {
		errs = append(errs, o.closers[i].Close())
	}
	o.closers, o.body = nil, nil
	o.drop() // the decoder is rebuilt from pos.Header
	return errors.Join(errs...)
}

// readObject appends up to max records of one object, the one at index
// idx of the key order, stopping early once its event time passes bound
// (another object lags now). more reports that it stopped for max or bound.
func (s *s3Source) readObject(o *s3Object, dst []tidemark.Record, maxRecords int, arrival int64, a *arena, idx int, bound alignKey) (_ []tidemark.Record, n int, more bool, _ error) {
	s.tick++
	o.used = s.tick
	if o.r == nil {
		s.room(o)
		if err := s.openObject(o); err != nil {
			s.getFailed(o, err)
			return dst, 0, false, nil
		}
		if o.r == nil { // nothing left to read
			return dst, 0, false, nil
		}
		s.opened = append(s.opened, o)
	}
	c := lineRead{source: s.name, cfg: &s.cfg.DecoderConfig, decoders: s.json,
		arrival: arrival, idx: idx, bound: bound, scratch: &s.scratch, copy: a.copy}
	dst, n, stop, err := o.read(&c, dst, maxRecords)
	if n > 0 {
		o.readFails = 0
	}
	switch {
	case stop == stopErr:
		s.readFailed(o, err)
	case err != nil:
		return dst, n, false, err
	case stop == stopNoLine && o.r.done:
		o.pos.Done = true
		o.close()
	}
	return dst, n, stop == stopMore, nil
}

func (s *s3Source) newCSV(header []byte) (Decoder, error) {
	return NewCSVDecoder(s.cfg.DecoderConfig, header)
}

// openObject starts reading an object at its position with one GET pinned
// to its ETag: ranged from the offset for a plain object, from the start
// for a compressed one (then decompressed up to the offset and dropped).
// It leaves o.r nil, and the object Done, when nothing is left.
func (s *s3Source) openObject(o *s3Object) error {
	start := int64(0)
	if !o.compressed {
		start = o.pos.Offset
		if start > o.size {
			s.cfg.Logger.Error("position is past the end of the object; skipping it",
				"source", s.name, "file", o.pos.Path, "offset", start, "size", o.size)
		}
		if start >= o.size {
			o.pos.Done = true
			return nil
		}
	} else if o.size == 0 {
		o.pos.Done = true
		return nil
	}
	var opts minio.GetObjectOptions
	if err := opts.SetMatchETag(o.pos.ETag); err != nil {
		return err
	}
	if start > 0 {
		if err := opts.SetRange(start, 0); err != nil {
			return err
		}
	}
	body, info, h, err := s.core.GetObject(s.bodyCtx, s.bucket, o.key, opts)
	if err != nil {
		return fmt.Errorf("get %s: %w", o.key, err)
	}
	o.body, o.closers, o.openFails = body, []io.Closer{body}, 0
	if info.ETag != "" && info.ETag != o.pos.ETag { // a server that ignores If-Match
		o.close()
		return fmt.Errorf("get %s: %w", o.key, minio.ErrorResponse{StatusCode: http.StatusPreconditionFailed, Code: "PreconditionFailed", Message: "ETag " + info.ETag + " does not match " + o.pos.ETag})
	}
	var src io.Reader = body
	if start > 0 && h.Get("Content-Range") == "" {
		// A server that ignores Range sends the whole object: skip to the
		// offset here rather than read the start twice.
		if _, err := io.CopyN(io.Discard, body, start); err != nil {
			o.close()
			return errBody{fmt.Errorf("skip to offset %d of %s: %w", start, o.pos.Path, err)}
		}
	}
	src = &exactReader{r: src, left: o.size - start}
	if o.compressed {
		dec, err := decompressor(o.pos.Path, src)
		if err != nil {
			o.close()
			return errBody{err}
		}
		o.closers = append(o.closers, dec)
		src = dec
		if _, err := io.CopyN(io.Discard, src, o.pos.Offset); err != nil {
			o.close()
			return errBody{fmt.Errorf("skip to offset %d of %s: %w", o.pos.Offset, o.pos.Path, err)}
		}
	}
	o.r = newLineReader(src, o.pos.Offset, true, s.cfg.Format, s.cfg.MaxLineBytes)
	if s.cfg.Format == FormatCSV && o.pos.Header != nil {
		return o.csvFrom(&s.cfg.DecoderConfig)
	}
	return nil
}

// errBody marks a failure reading an object's bytes after a successful
// GET (as opposed to the GET failing).
type errBody struct{ error }

func (e errBody) Unwrap() error { return e.error }

// getFailed handles a failed openObject. A changed (412) or deleted (404)
// object is dropped until the next listing, which finds its new version
// as a new object. Other failures are retried with backoff, blocking the
// objects after it so they stay in key order.
func (s *s3Source) getFailed(o *s3Object, err error) {
	var be errBody
	if errors.As(err, &be) {
		s.readFailed(o, be.error)
		return
	}
	o.close()
	var resp minio.ErrorResponse
	errors.As(err, &resp)
	switch {
	case resp.StatusCode == http.StatusPreconditionFailed || resp.Code == "PreconditionFailed":
		s.cfg.Logger.Warn("object changed while being read; its new version will be read from the start as a new object",
			"source", s.name, "file", o.pos.Path, "etag", o.pos.ETag, "offset", o.pos.Offset)
		o.gone, s.needPoll = true, true
		return
	case resp.StatusCode == http.StatusNotFound || resp.Code == "NoSuchKey":
		s.cfg.Logger.Warn("object deleted while being read", "source", s.name, "file", o.pos.Path, "offset", o.pos.Offset)
		o.gone, s.needPoll = true, true
		return
	}
	o.openFails++
	o.retryAt = s.cfg.Clock().Add(s.backoff(o.openFails))
	s.cfg.Logger.Warn("cannot read object; will retry", "source", s.name, "file", o.pos.Path,
		"attempt", o.openFails, "retry_in", s.backoff(o.openFails), "error", err)
}

// readFailed handles a failed read of an open object's body: the first
// failure reopens it at once from the position (a dropped connection),
// later ones after a backoff, and after maxS3ReadFails without a record
// in between the rest of the object is skipped.
func (s *s3Source) readFailed(o *s3Object, err error) {
	o.close()
	o.readFails++
	if o.readFails >= maxS3ReadFails {
		s.cfg.Logger.Error("read failed repeatedly; skipping the rest of the object",
			"source", s.name, "file", o.pos.Path, "offset", o.pos.Offset, "error", err)
		o.pos.Done = true
		return
	}
	if o.readFails > 1 {
		o.retryAt = s.cfg.Clock().Add(s.backoff(o.readFails))
	}
	s.cfg.Logger.Warn("read failed; reopening the object at the position", "source", s.name,
		"file", o.pos.Path, "offset", o.pos.Offset, "error", err)
}

// backoff is the wait before attempt n+1: 100ms doubling, at most Rescan.
func (s *s3Source) backoff(n int) time.Duration {
	d := 100 * time.Millisecond << min(n-1, 16)
	return min(d, s.cfg.Rescan)
}

// exactReader reads exactly left bytes from r: an early EOF (a body cut
// short) is io.ErrUnexpectedEOF, never the end of the object, so a cut
// line is never taken for a final line without "\n".
type exactReader struct {
	r    io.Reader
	left int64
}

func (e *exactReader) Read(p []byte) (int, error) {
	if e.left <= 0 {
		return 0, io.EOF
	}
	if int64(len(p)) > e.left {
		p = p[:e.left]
	}
	n, err := e.r.Read(p)
	e.left -= int64(n)
	if errors.Is(err, io.EOF) {
		if e.left > 0 {
			return n, io.ErrUnexpectedEOF
		}
		err = nil
	}
	return n, err
}
