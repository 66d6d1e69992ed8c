// Package colfile writes Parquet files of flat, typed columns: tidemark's
// one place where Parquet bytes are written (every data file of every
// table, appends, compaction and upserts alike). It imports nothing of
// tidemark; parquet-go's lower-level packages do the formats (format and
// encoding/thrift for page headers, footer and page indexes,
// encoding/plain, encoding/rle, the codecs).
//
// Use: NewWriter with the file's columns; per row group, a Chunk per
// column (NewChunk, pooled) given its values a run at a time (Add) and
// then Finish, all chunks to WriteRowGroup; Close writes the page indexes
// and the footer. Chunks of different columns may be encoded on different
// goroutines; a file's bytes depend only on the values and the runs they
// are given in, not on the scheduling.
//
// # Why not parquet-go's writer
//
// tidemark's tables are flat and typed, so a chunk's pages are encoded
// straight from typed slices, and each page's bounds computed once, in
// the loop that encodes its values: they give the column index, the
// chunk statistics and the caller's Stats (Delta's add-action stats).
// parquet-go's generic writer turned every value into a parquet.Value,
// inserted it into its dictionary and computed the page bounds again:
// ~0.35 CPU-s per million raw events, as much as the zstd of the
// columns (the CPU profile of the 1M-event bench stream, 2026-12-01,
// docs/performance-history.md "Parquet writer"; commit 15831b0 replaced
// it). Its per-value work, writeColumn's ~0.35 s, became the chunk's
// addRange at 0.19-0.23 s, and a per-user key's dictionary inserts
// (0.25 s on issue 16's 300k-distinct column) went with the dictionary
// probation below.
//
// # What readers read
//
// Only what every reader tidemark promises reads (Spark 3.0+, parquet-java,
// DuckDB, delta-rs): Parquet v1 data pages, definition levels
// RLE/bit-packed, values PLAIN or RLE_DICTIONARY with a PLAIN dictionary
// page. DELTA_BINARY_PACKED for the int64 columns was measured (issue 18,
// 2026-12-01: zstd's CPU on them 0.41 -> 0.14-0.17 s per million events)
// and withdrawn (commits 287a975, 4629608): Spark 3.0-3.2's vectorized
// reader refuses it ("Unsupported encoding: DELTA_BINARY_PACKED";
// scripts/performance-history.md, issue 18's second pass). A file keeps
// what readers use: the schema elements parquet-go writes for the same
// types (built from its types: logical and converted types, column
// orders), chunk statistics (exact min/max and null count; no min/max
// and no column index when a NaN is present, as parquet-java does, so a
// reader that orders NaN last cannot prune rows away; a zero bound is
// written -0 as min and +0 as max), a column index (byte-array bounds cut
// to IndexPrefix bytes, the max rounded up) and an offset index for every
// chunk, and encoding stats.
//
// # Dictionary or PLAIN
//
// Decided per column chunk, as parquet-java does but stricter: every chunk
// of a Dictionary column starts with a dictionary on probation; at
// dictProbe values of its first page (or when that page is cut, if
// sooner) the dictionary and the indexes must be at most half the PLAIN
// bytes they replace (numbers: at most one entry in dictWordRatio values),
// or the chunk is written PLAIN from its first page on; a probation that
// gathers more distinct values than that allows ends at once, so a column
// of distinct values costs a few hundred map inserts a chunk. zstd finds
// moderate repeats in PLAIN pages by itself; a dictionary pays for
// columns of few values (keys like page, status, source, file) and for
// those constant within a batch (one entry and bit width 0, where PLAIN
// had zstd read 8 bytes a row). A per-user key is PLAIN: on issue 16's
// 600k events its dictionary (parquet-go kept one to 1 MiB per chunk)
// cost ~0.2 CPU-s of map inserts and lookups for a column 12% larger than
// PLAIN and zstd (2.00 vs 1.78 MB). A dictionary that grows past
// dictMaxBytes (or dictWordMax numbers) later ends its page and the rest
// of the chunk is PLAIN; readers resolve the encoding per page.
//
// # zstd of int64 pages
//
// A REQUIRED PLAIN int64 page of a Zstd column whose values rarely repeat
// their predecessor (event and arrival times, offsets) is framed by
// appendZstdWords (zstdwords.go) instead of klauspost's encoder: each
// value one zstd sequence, its low bytes literals and its shared high
// bytes a match at offset 8, the sequences RLE-coded, the literals
// Huffman-coded; an ordinary zstd frame. Measured when it was written
// (2026-12-01 19:44 UTC, 1M-event bench, three pairs at load 7): column
// workers 1.16 -> 0.93 CPU-s per run, zstd 0.54 -> 0.28; event_time,
// disorder_us and offset 5-6% larger (3.43 / 3.42 / 2.05 MB against
// 3.28 / 3.24 / 1.94).
//
// Re-measured for issue 34 (2026-12-03 20:44-20:48 UTC, 2 shared cores,
// load average 2.6-3.1), against klauspost/compress's encoder used
// directly (EncodeAll with a reused encoder, SpeedFastest: the codec of
// every other page), it still pays, so it stays:
//
//   - BenchmarkInt64Pages (go test -run '^$' -bench BenchmarkInt64Pages
//     -benchtime 200x -count 5 ./lake/colfile/, medians; 256 KiB pages
//     shaped like the 1M-event bench input's): event_time 1545 MB/s and
//     131.6 KB against 190 MB/s and 118.2 KB (8.1x the speed, 11% larger);
//     offset 1834 against 292 MB/s, 67.6 against 66.2 KB (6.3x, 2% larger).
//     Pages it does not frame (arrival_time's repeats, disorder_us's zeros,
//     dictionary indexes, key strings) are klauspost's either way.
//   - The whole stream, 1M events of scripts/gen (-seed 1 -keys 1000
//     -files 8), tidemark stream as scripts/bench.sh runs it, 20
//     alternating pairs of the two builds: median 1.15 against 1.27 CPU-s
//     (framed faster in 16 pairs, slower in 1, 3 ties; median difference
//     0.125 CPU-s), raw_events 49.48 against 48.69 MB (+1.6%).
//   - scripts/bench.sh -n 1000000 -r 3, once per build: stream median 1.37
//     (framed) and 1.38 CPU-s per million; three rounds on a shared machine
//     do not separate them, the pairs above do.
package colfile
