// Package delta reads and writes Delta Lake transaction logs (PROTOCOL.md,
// reader version 1, writer version 2) on top of a lake store: JSON commits in
// _delta_log/%020d.json created only if absent, classic Parquet checkpoints
// with _last_checkpoint, snapshots with time travel, and optimistic
// concurrency with conflict detection. It knows nothing of tidemark's tables;
// package lake builds those on this API.
package delta
