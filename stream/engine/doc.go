// Package engine holds tidemark's event-time engines (SPEC §2): Engine
// aggregates records into tumbling or sliding windows, SessionEngine into
// session windows. Both embed one watermark mechanism (watermarks,
// watermark.go): the sources, their max event times and frontiers, and the
// rule that advances W, which is changed there and nowhere else. The
// runner (package stream) drives either through Windower.
//
// The package does no I/O, starts no goroutines and has no clock: Process
// takes now, and the same batches give the same output byte for byte.
// State leaves it only as bytes (State, Changes, SessionState,
// SessionChanges and their codecs, state.go, changes.go, session_state.go,
// session_changes.go), written by the runner to the checkpoint. A window
// engine may be handed a Store (OpenStore) to hold its open pairs outside
// the heap; the Store does the I/O. The Pebble implementation lives in
// package stream, beside the runner that opens, reuses and rebuilds it
// from the checkpoint, so this package imports neither Pebble nor the
// filesystem; MemStore is a heap implementation for tests.
package engine
