package stream

import (
	"fmt"
	"strings"

	"tidemark"
	"tidemark/ingest"
)

// Inputs a source could not read (ingest.Skipper, docs/files-operations.md):
// each progress line, and so the status page's /api/progress, counts and
// names them per source; a --once run that ends with some fails naming
// them, after committing what it read.

// unreadableProgress is one source's part of the progress line's
// "unreadable": the paths it skips now, and how many; Details says, per
// named path, why and when it is tried next (the status page shows them).
type unreadableProgress struct {
	Count   int              `json:"count"`
	Paths   []string         `json:"paths"`
	Details []unreadablePath `json:"details,omitempty"`
}

// unreadablePath is one skipped path of the progress line: the error of
// its last attempt, since when it fails, how many attempts failed, and
// when it is tried next (RFC 3339, UTC, by the source's clock).
type unreadablePath struct {
	Path      string `json:"path"`
	Dir       bool   `json:"dir,omitempty"`
	Error     string `json:"error"`
	Since     string `json:"since"`
	Tries     int    `json:"tries"`
	NextRetry string `json:"next_retry"`
}

// maxNamed bounds the paths a progress line or an error names.
const maxNamed = 20

// unreadableOf returns, per source that skips paths now, their count and
// the first maxNamed of them; nil if none does. Skipper is safe to call
// while the source reads.
func unreadableOf(srcs []ingest.Source) map[string]unreadableProgress {
	var out map[string]unreadableProgress
	for _, s := range srcs {
		sk, ok := s.(ingest.Skipper)
		if !ok {
			continue
		}
		list := sk.Unreadable()
		if len(list) == 0 {
			continue
		}
		if out == nil {
			out = map[string]unreadableProgress{}
		}
		up := unreadableProgress{Count: len(list)}
		for _, u := range list[:min(len(list), maxNamed)] {
			up.Paths = append(up.Paths, u.Path)
			up.Details = append(up.Details, unreadablePath{Path: u.Path, Dir: u.Dir, Error: u.Error,
				Since: tidemark.FormatTime(u.Since), Tries: u.Tries, NextRetry: tidemark.FormatTime(u.Retry)})
		}
		out[s.Name()] = up
	}
	return out
}

// incomplete is the error of a --once run whose sources gave up inputs they
// could not read: it names them. The batches read are committed; the run
// does not drain, so the windows those inputs belong to stay open for the
// run that reads them.
func (r *runner) incomplete() error {
	var parts []string
	total := 0
	for _, s := range r.sources {
		sk, ok := s.(ingest.Skipper)
		if !ok {
			continue
		}
		for _, u := range sk.Unreadable() {
			total++
			if len(parts) < maxNamed {
				parts = append(parts, fmt.Sprintf("%s (%s)", joinSource(s.Name(), u.Path), u.Error))
			}
		}
	}
	if total == 0 {
		return nil
	}
	more := ""
	if total > len(parts) {
		more = fmt.Sprintf(" and %d more", total-len(parts))
	}
	drain := ""
	if r.cfg.Drain {
		drain = "; not drained, so their windows stay open for the next run"
	}
	return fmt.Errorf("--once: could not read %d input(s): %s%s (what was read is committed%s)",
		total, strings.Join(parts, ", "), more, drain)
}

// joinSource names a path of a source for a person.
func joinSource(source, path string) string {
	if path == "." {
		return source
	}
	return strings.TrimSuffix(source, "/") + "/" + path
}
