// Package stream is tidemark's speed layer: the runner that reads sources,
// feeds an engine (package stream/engine: windows or sessions, one
// watermark rule) batch by batch, and commits its output to the lake and
// its state to the checkpoint (a write-ahead log of offsets, commits and
// state files), with the metrics, the status page and the lock inspection
// around it. The local Pebble state store (--state-store pebble) lives
// here too (state_pebble.go): it is the runner's I/O, handed to the engine
// as an engine.Store.
package stream
