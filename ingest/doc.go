// Package ingest is tidemark's input layer: it turns lines of NDJSON or CSV
// into tidemark.Records (decoders) and reads them from sources — local
// directories of finished or growing files today, and S3 prefixes (s3://bucket/prefix) — in a
// deterministic order with a resumable Position.
//
// Bad input is never an error here: every line becomes exactly one Record,
// either an event or a quarantine row with a Reason.
package ingest
