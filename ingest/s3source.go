package ingest

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/minio/minio-go/v7"

	"tidemark"
)

// s3Source reads the objects under an S3 prefix (s3://bucket/prefix), found
// by listing the prefix every SourceConfig.Rescan. Objects are read each
// front to back and once, event-time aligned (align.go: the object whose
// event time lags is read first, ties in key order, so a prefix whose keys
// sort by producer reads like one whose keys sort by time). An object not
// read yet is peeked (peek: the event time of its first valid record) and
// waits its turn at that time, as a local file does. An object is identified by key+ETag:
// a key overwritten with new content (a new ETag) is a new object and is
// read again from offset 0 — the old version can no longer be fetched, and
// the new content is what the producer meant, so it is all delivered; the
// records of the old version already returned stay returned.
//
// An object is read only once it has settled: LastModified at least the
// settle time ago (DefaultS3Settle), so a key overwritten in quick
// succession is read once, in its last version. Every GET is pinned to the
// listed ETag (If-Match); a 412 means the object changed under the reader:
// it is dropped and found again, as a new object, by the next listing.
// Reads stream the object (one ranged GET from the resume offset) and keep
// only a record's worth of it in memory. .gz and .zst objects are
// decompressed; resuming inside one re-reads it from the start and skips
// to the decompressed offset. A final line without "\n" is a record.
//
// The Position lists the objects in the last listing, in key order, with
// Done ones kept (so they are never read again) and vanished ones dropped
// (so it does not grow with the bucket's history).
type s3Source struct {
	name   string
	bucket string
	prefix string // "" or ending in "/"
	cfg    SourceConfig
	settle time.Duration
	client *minio.Client
	core   minio.Core

	// bodyCtx outlives single Reads: an object's GET body stays open
	// across Reads and is cancelled by Close.
	bodyCtx context.Context
	cancel  context.CancelFunc

	objects map[string]*s3Object // by key relative to the prefix
	order   []string             // relative keys, sorted
	json    []Decoder            // NDJSON: one per decoding worker
	scratch []cutLine            // lines cut from the object being read (lineRead.scratch)
	peekBuf []tidemark.Record    // records decoded by peek, dropped
	queue   alignQueue
	keys    []alignKey
	until   map[string]int64 // Limit: by key+"\x00"+ETag; nil = no bound

	avgPayload int // bytes per record in the last Read, plus a quarter

	lastPoll time.Time
	settleAt time.Time // when the first unsettled object of the last listing settles; zero = none
	needPoll bool
	closed   bool

	// Listing (docs/files-operations.md): a poll lists only the keys after
	// after, the last key up to which every listed key is tracked; a full
	// listing, every s3FullListing polls' worth of time, finds keys that
	// sort earlier, overwrites and deletions. listed counts the keys the
	// last listing returned.
	after    string
	lastFull time.Time
	listed   int

	// Open GET bodies are capped at maxOpen: the least recently read is
	// closed and reopened at its position (a ranged GET).
	opened  []*s3Object
	maxOpen int
	tick    uint64
}

// s3FullListing is how many Rescan periods pass between full listings.
const s3FullListing = 10

// maxOpenObjects caps the GET bodies an S3 source holds open at once.
const maxOpenObjects = 32

var (
	_ Source = (*s3Source)(nil)
	_ Waiter = (*s3Source)(nil)
)

// openS3 opens an s3://bucket/prefix source, listing it once: a bad bucket
// or bad credentials fail here. resume is a Position the source returned.
func openS3(ctx context.Context, spec string, cfg SourceConfig, resume Position) (Source, error) {
	return openS3With(ctx, spec, cfg, s3Options{Settle: cfg.S3Settle, S3: cfg.S3}, resume)
}

func openS3With(ctx context.Context, spec string, cfg SourceConfig, opt s3Options, resume Position) (*s3Source, error) {
	cfg = cfg.withDefaults()
	bucket, prefix, err := parseS3Spec(spec)
	if err != nil {
		return nil, err
	}
	client, err := opt.client()
	if err != nil {
		return nil, fmt.Errorf("open source %s: %w", spec, err)
	}
	s := &s3Source{
		name: spec, bucket: bucket, prefix: prefix, cfg: cfg, settle: opt.settle(),
		client: client, core: minio.Core{Client: client}, objects: map[string]*s3Object{}, maxOpen: maxOpenObjects,
	}
	if cfg.Format != FormatCSV {
		if s.json, err = ndjsonDecoders(cfg.DecoderConfig); err != nil {
			return nil, err
		}
	}
	s.bodyCtx, s.cancel = context.WithCancel(context.WithoutCancel(ctx))
	byKey := map[string]FilePosition{}
	for _, p := range resume.Files {
		if p.ETag != "" {
			byKey[p.Path] = p
		}
	}
	if err := s.poll(ctx, byKey); err != nil {
		s.Close()
		return nil, fmt.Errorf("open source %s: %w", spec, opt.S3.ExplainS3(err))
	}
	return s, nil
}

// poll lists the prefix and brings the tracked objects up to date: new
// settled objects are added (or resumed from the matching entry of resume,
// whatever their age), vanished ones dropped, overwritten ones replaced by
// their new version once it has settled.
//
// A poll lists only the keys after s.after (StartAfter): producers that
// name objects by time (or by a sequence) add keys that sort last, so an
// idle poll costs one short request however large the prefix. A full
// listing, at Open and then every s3FullListing Rescan periods (or when a
// GET found an object changed or gone), is the backstop for keys that sort
// earlier, overwritten keys and deletions.
func (s *s3Source) poll(ctx context.Context, resume map[string]FilePosition) error {
	now := s.cfg.Clock()
	ctx, cancel := context.WithCancel(ctx) // stops the lister if we return early
	defer cancel()
	full := resume != nil || s.after == "" || s.needPoll || now.Sub(s.lastFull) >= s3FullListing*s.cfg.Rescan
	opts := minio.ListObjectsOptions{Prefix: s.prefix, Recursive: true}
	if !full {
		opts.StartAfter = s.after
	}
	listed := map[string]minio.ObjectInfo{}
	var keys []string // in listing (key) order
	s.listed = 0
	for obj := range s.client.ListObjects(ctx, s.bucket, opts) {
		if obj.Err != nil {
			return fmt.Errorf("list s3://%s/%s: %w", s.bucket, s.prefix, obj.Err)
		}
		s.listed++
		rel := strings.TrimPrefix(obj.Key, s.prefix)
		keys = append(keys, obj.Key)
		if hiddenKey(rel) {
			continue
		}
		listed[rel] = obj
	}
	s.lastPoll, s.settleAt, s.needPoll = now, time.Time{}, false
	if full {
		s.lastFull, s.after = now, ""
	}
	defer func() {
		// The cursor moves past every key now tracked (or skipped), up to
		// the first one waiting to settle: it is listed again.
		for _, key := range keys {
			rel := strings.TrimPrefix(key, s.prefix)
			if _, ok := s.objects[rel]; !ok && !hiddenKey(rel) {
				break
			}
			s.after = key
		}
	}()
	changed := false
	for rel, o := range s.objects {
		info, ok := listed[rel]
		switch {
		case !ok && !full:
			// Not in a listing of what is new: nothing to say.
		case !ok:
			o.close()
			delete(s.objects, rel)
			changed = true
		case info.ETag != o.pos.ETag:
			o.close()
			delete(s.objects, rel)
			changed = true
			s.cfg.Logger.Info("object overwritten; its new version is a new object, read from the start",
				"source", s.name, "file", rel, "old_etag", o.pos.ETag, "etag", info.ETag)
		case o.gone:
			// A GET said it changed or vanished but the listing still shows
			// this version (listings can lag): keep its place and try again.
			o.gone = false
		}
	}
	for rel, info := range listed {
		if _, ok := s.objects[rel]; ok {
			continue
		}
		o := &s3Object{key: info.Key, size: info.Size, compressed: isCompressed(rel)}
		o.pos, o.until = FilePosition{Path: rel, ETag: info.ETag, ID: objectID(rel, info.ETag)}, -1
		if s.until != nil {
			o.until = s.until[rel+"\x00"+info.ETag] // an object the batch did not know: nothing
		}
		if p, ok := resume[rel]; ok && p.ETag == info.ETag {
			p.ID = o.pos.ID // positions from before file identity have none
			o.pos = p
		} else if ready := info.LastModified.Add(s.settle); !s.cfg.Once && s.settle > 0 && now.Before(ready) {
			if s.settleAt.IsZero() || ready.Before(s.settleAt) {
				s.settleAt = ready
			}
			continue
		} else if ok {
			s.cfg.Logger.Info("object changed since the checkpoint; reading its new version from the start",
				"source", s.name, "file", rel, "old_etag", p.ETag, "etag", info.ETag)
		}
		s.objects[rel] = o
		changed = true
	}
	if changed {
		s.order = slices.AppendSeq(s.order[:0], maps.Keys(s.objects))
		slices.Sort(s.order)
	}
	return nil
}

// hiddenKey reports keys the source skips: "directory" markers and, as in
// a local directory, names starting with ".".
func hiddenKey(rel string) bool {
	if rel == "" || strings.HasSuffix(rel, "/") {
		return true
	}
	for part := range strings.SplitSeq(rel, "/") {
		if strings.HasPrefix(part, ".") {
			return true
		}
	}
	return false
}

// pollDue reports whether the next Read or Wait should list the prefix.
func (s *s3Source) pollDue(now time.Time) bool {
	return !s.cfg.Once && (s.needPoll || now.Sub(s.lastPoll) >= s.cfg.Rescan ||
		!s.settleAt.IsZero() && !now.Before(s.settleAt))
}

// pollLogged polls, logging a failure instead of returning it: a stream
// that runs for months outlives an S3 outage, and minio-go has already
// retried. The next poll is due a Rescan later.
func (s *s3Source) pollLogged(ctx context.Context) error {
	if err := s.poll(ctx, nil); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		s.lastPoll, s.needPoll = s.cfg.Clock(), false
		s.cfg.Logger.Warn("listing failed; will retry", "source", s.name, "error", s.cfg.S3.ExplainS3(err))
	}
	return nil
}

// Name implements Source.
func (s *s3Source) Name() string { return s.name }

// Position implements Source: the objects of the last listing, in key
// order (an object whose GET found it changed stays until a listing shows
// its new version, so a listing that lags cannot make it read twice).
// Objects are immutable: one holds the source's watermark back
// (FilePosition.Hold) while it has unread data.
func (s *s3Source) Position() Position {
	return positionOf(s.order, func(rel string) FilePosition {
		o := s.objects[rel]
		p := o.pos
		p.Hold = holds(&p, o.finished(), !o.gone, false, 0, 0)
		return p
	})
}

// finished reports whether an object can give no more records: read to its
// end, or to its Limit.
func (o *s3Object) finished() bool {
	return o.pos.Done || o.until >= 0 && o.pos.Offset >= o.until
}

// Limit bounds the source at end, the logged end of a batch being
// replayed (see DirSource.Limit).
func (s *s3Source) Limit(end Position) {
	s.until = make(map[string]int64, len(end.Files))
	for _, p := range end.Files {
		s.until[p.Path+"\x00"+p.ETag] = p.Offset
	}
	for rel, o := range s.objects {
		o.until = s.until[rel+"\x00"+o.pos.ETag]
	}
}

// Exhausted implements Source: with Once, every object listed at Open has
// been read (or has vanished). A tailing source is never exhausted.
func (s *s3Source) Exhausted() bool {
	if !s.cfg.Once {
		return false
	}
	for _, o := range s.objects {
		if !o.pos.Done && !o.gone {
			return false
		}
	}
	return true
}

// Close implements Source.
func (s *s3Source) Close() error {
	if s.closed {
		return nil
	}
	s.closed = true
	var errs []error
	for _, o := range s.objects {
		errs = append(errs, o.close())
	}
	s.cancel()
	return errors.Join(errs...)
}

// Read implements Source.
func (s *s3Source) Read(ctx context.Context, dst []tidemark.Record, maxRecords int) ([]tidemark.Record, error) {
	if err := ctx.Err(); err != nil {
		return dst, err
	}
	if s.closed {
		return dst, errors.New("ingest: read from a closed source")
	}
	now := s.cfg.Clock()
	if s.pollDue(now) {
		if err := s.pollLogged(ctx); err != nil {
			return dst, err
		}
	}
	arrival := now.UnixMicro()
	// Payload chunks sized from the last Read's records (512 bytes each
	// before the first), so a batch of short lines does not hold a mostly
	// empty megabyte.
	a := arena{chunk: min(1<<20, max(4096, maxRecords*cmp.Or(s.avgPayload, 512)))}
	n, start := 0, len(dst)
	defer func() {
		if got := len(dst) - start; got > 0 {
			var bytes int
			for _, r := range dst[start:] {
				bytes += len(r.Payload)
			}
			s.avgPayload = bytes/got + bytes/got/4 + 1
		}
	}()
	s.keys = s.keys[:0]
	for i, rel := range s.order {
		// An object waiting for a retry is left out of this Read; it still
		// holds the watermark (Position), so those read meanwhile cannot
		// make its rows late.
		o := s.objects[rel]
		if o.finished() || o.gone || now.Before(o.retryAt) {
			continue
		}
		if !o.pos.HasMax && !o.pos.HasNext && !o.peeked {
			if !s.peek(o, i, arrival) || o.finished() {
				continue
			}
		}
		s.keys = append(s.keys, keyOf(&o.pos, i))
	}
	s.queue.reset(s.keys)
	for n < maxRecords {
		k, bound, ok := s.queue.take()
		if !ok {
			break
		}
		o := s.objects[s.order[k.i]]
		var got int
		var more bool
		var err error
		dst, got, more, err = s.readObject(o, dst, maxRecords-n, arrival, &a, k.i, bound)
		n += got
		if err != nil {
			return dst, err
		}
		if more && !o.finished() && !o.gone {
			s.queue.put(keyOf(&o.pos, k.i))
		} // else: done, or failed for now (retryAt says when to try again)
	}
	return dst, nil
}

// Wait implements Waiter: it returns at once when an object can be read,
// otherwise it lists the prefix when a poll is due (every Rescan, or when
// an object seen unsettled settles) and returns when a poll finds
// something to read, at timeout, or when ctx is done.
func (s *s3Source) Wait(ctx context.Context, timeout time.Duration) error {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		now := s.cfg.Clock()
		if s.pollDue(now) {
			if err := s.pollLogged(ctx); err != nil {
				return err
			}
			now = s.cfg.Clock()
		}
		wake, ready := s.next(now)
		if ready || s.cfg.Once && wake.IsZero() {
			return nil
		}
		t := time.NewTimer(wake.Sub(now))
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-deadline.C:
			t.Stop()
			return nil
		case <-t.C:
		}
	}
}

// next reports whether an object can be read now and, if not, when
// something may change: a failed object's retry, a settling object, or
// the next poll.
func (s *s3Source) next(now time.Time) (wake time.Time, ready bool) {
	for _, rel := range s.order {
		o := s.objects[rel]
		if o.pos.Done || o.gone {
			continue
		}
		if !now.Before(o.retryAt) {
			return time.Time{}, true
		}
		wake = o.retryAt
		break
	}
	if s.cfg.Once {
		return wake, false
	}
	poll := s.lastPoll.Add(s.cfg.Rescan)
	if !s.settleAt.IsZero() && s.settleAt.Before(poll) {
		poll = s.settleAt
	}
	if wake.IsZero() || poll.Before(wake) {
		wake = poll
	}
	return wake, false
}
