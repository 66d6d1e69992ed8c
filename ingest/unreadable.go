package ingest

import (
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Paths a source cannot read (docs/files-operations.md). A file it cannot
// open (chmod 000, another user's file), a directory it cannot list, or
// the source's root gone are skipped, never an error that stops the
// stream: each is logged once when it first fails (and once when it can be
// read again), retried with exponential backoff from RetryMin up to
// RetryMax, and listed by Unreadable (the progress line, the status page,
// `tidemark checkpoint`). A --once run that ends with inputs it could not
// read fails, naming them (stream.Run).

// Unreadable is one path a source skips because it cannot read it.
type Unreadable struct {
	// Path is relative to the source's root ("/" separators); "." is the
	// root itself (gone, or not a readable directory).
	Path  string `json:"path"`
	Dir   bool   `json:"dir,omitempty"` // a directory: the files under it are not listed
	Error string `json:"error"`
	// Since is when it first failed, Retry when it is tried next (µs, by
	// the source's clock); Tries counts the failed attempts.
	Since int64 `json:"since_us"`
	Retry int64 `json:"retry_us"`
	Tries int   `json:"tries"`
}

// Skipper is implemented by sources that skip inputs they cannot read.
// Unreadable is safe to call from any goroutine (a status page reads it
// while the source reads).
type Skipper interface {
	Unreadable() []Unreadable
}

var _ Skipper = (*DirSource)(nil)

// Backoff bounds of an unreadable path's retries (variables so a test can
// shorten them).
var (
	RetryMin = time.Second
	RetryMax = time.Minute
)

// skipped tracks a source's unreadable paths. The map is the reading
// goroutine's; list is a copy under mu for other goroutines.
type skipped struct {
	source string
	log    *slog.Logger
	paths  map[string]*Unreadable
	mu     sync.Mutex
	list   []Unreadable
}

func newSkipped(source string, log *slog.Logger) *skipped {
	return &skipped{source: source, log: log, paths: map[string]*Unreadable{}}
}

// failed notes that path could not be read at now: logged the first time
// only, then retried after a backoff that doubles per failure.
func (s *skipped) failed(path string, dir bool, err error, now time.Time) {
	u, ok := s.paths[path]
	if !ok {
		u = &Unreadable{Path: path, Dir: dir, Since: now.UnixMicro()}
		s.paths[path] = u
		what := "file"
		if dir {
			what = "directory"
		}
		s.log.Warn("cannot read "+what+"; skipping it and retrying with backoff (listed as unreadable until it can be read)",
			"source", s.source, "path", path, "error", err)
	}
	u.Error = err.Error()
	u.Tries++
	u.Retry = now.Add(backoff(u.Tries)).UnixMicro()
	s.publish()
}

// backoff is the wait after the n-th failure: RetryMin doubling, at most
// RetryMax.
func backoff(n int) time.Duration {
	d := RetryMin
	for i := 1; i < n && d < RetryMax; i++ {
		d *= 2
	}
	return min(d, RetryMax)
}

// due reports whether path may be tried now: it is not unreadable, or its
// retry time has come.
func (s *skipped) due(path string, now time.Time) bool {
	u, ok := s.paths[path]
	return !ok || now.UnixMicro() >= u.Retry
}

// has reports whether path is listed as unreadable.
func (s *skipped) has(path string) bool {
	_, ok := s.paths[path]
	return ok
}

// under reports whether rel lies in a directory listed as unreadable (or
// the root is): its file may be there still, unseen.
func (s *skipped) under(rel string) bool {
	for p, u := range s.paths {
		if u.Dir && (p == "." || strings.HasPrefix(rel, p+"/")) {
			return true
		}
	}
	return false
}

// ok notes that path could be read: it leaves the list, logged if it was on it.
func (s *skipped) ok(path string) {
	u, found := s.paths[path]
	if !found {
		return
	}
	delete(s.paths, path)
	s.log.Info("readable again; reading it", "source", s.source, "path", path, "tries", u.Tries)
	s.publish()
}

// forget drops path (and, for a directory, what lies under it) without a
// log line: it is gone.
func (s *skipped) forget(path string) {
	n := len(s.paths)
	for p := range s.paths {
		if p == path || strings.HasPrefix(p, path+"/") {
			delete(s.paths, p)
		}
	}
	if len(s.paths) != n {
		s.publish()
	}
}

// keep drops every listed file that is not in live (a file no longer
// there needs no retry); directories stay until they are listed again.
func (s *skipped) keep(live func(rel string) bool) {
	n := len(s.paths)
	for p, u := range s.paths {
		if !u.Dir && !live(p) {
			delete(s.paths, p)
		}
	}
	if len(s.paths) != n {
		s.publish()
	}
}

// nextRetry returns the earliest retry time after now, if any. A retry
// already due was Read's to make (or waits on its directory), so it does
// not wake a Wait at once.
func (s *skipped) nextRetry(now time.Time) (time.Time, bool) {
	var t int64
	found := false
	for _, u := range s.paths {
		if u.Retry > now.UnixMicro() && (!found || u.Retry < t) {
			t, found = u.Retry, true
		}
	}
	return time.UnixMicro(t), found
}

func (s *skipped) publish() {
	list := make([]Unreadable, 0, len(s.paths))
	for _, u := range s.paths {
		list = append(list, *u)
	}
	slices.SortFunc(list, func(a, b Unreadable) int { return strings.Compare(a.Path, b.Path) })
	s.mu.Lock()
	s.list = list
	s.mu.Unlock()
}

// snapshot returns the listed paths in path order.
func (s *skipped) snapshot() []Unreadable {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.list)
}

// tooManyOpen reports an error from running out of file descriptors (the
// process's or the system's): not the file's fault.
func tooManyOpen(err error) bool {
	return errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE)
}
