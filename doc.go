// Package tidemark holds the domain types shared by every layer of the
// toolkit: records, windows, grouping keys and aggregates. It imports only the
// standard library, so the ingest, lake, stream, batch and reconcile packages
// can all depend on it without depending on each other.
package tidemark
