// Package tidemark holds the domain types shared by every layer of the
// toolkit: records, windows, grouping keys and aggregates. It imports nothing
// of the project, so the ingest, lake, stream, batch and reconcile packages
// can all depend on it without depending on each other; besides the standard
// library it imports only the two sketch libraries behind --agg's live
// estimates (DDSketch for percentiles, HyperLogLog for distinct counts),
// which the stream and batch layers both read (aggstate.go).
package tidemark
