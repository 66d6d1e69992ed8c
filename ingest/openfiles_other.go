//go:build !unix

package ingest

// fdLimit is unknown off Unix: the default cap applies.
func fdLimit() int { return 0 }
