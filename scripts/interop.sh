#!/usr/bin/env bash
# Interop check: tidemark writes a lake from generated events (stream, then
# reconcile, then compact), and DuckDB — through scripts/duck, its own module
# with its own Delta log replay — reads every table and verifies row counts,
# timestamp types, partition values and byte-exact payloads; and checks
# every Parquet file of the lake, checkpoints included, with
# parquet_metadata/parquet_file_metadata: codec, encodings, page version and
# a created_by parquet-mr parses. Batches of 90 lines give raw_events over
# 200 commits, so it holds checkpoints at versions 100 and 200 (the replay
# above reads the table through the newer one).
set -euo pipefail
cd "$(dirname "$0")/.."
export CGO_ENABLED=1

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# The created_by names the commit when built from a checkout (Go's own VCS
# stamp is off where GOFLAGS has -buildvcs=false, as on CI).
build_id=$(git rev-parse HEAD 2>/dev/null || true)
go build -ldflags "-X tidemark.BuildID=$build_id" -o "$work/tidemark" ./cmd/tidemark
version=$("$work/tidemark" --version | awk '{print $3}')
(cd scripts/duck && go build -o "$work/duck" .)
go run ./scripts/gen -events "${INTEROP_EVENTS:-20000}" -seed 7 -files 4 -rate 20 -out "$work/in" 2>"$work/gen.json"

# INTEROP_PAYLOAD_CODEC picks the lake's payload codec (default: the lake's default).
"$work/tidemark" stream --source "$work/in" --key page --key country --value value ${INTEROP_PAYLOAD_CODEC:+--payload-codec "$INTEROP_PAYLOAD_CODEC"} \
  --arrival-field arrival_time --window 1m --lateness 1s --max-batch-rows 90 \
  --once --drain --lake "$work/lake" --progress "$work/progress.ndjson"
# A 1 s budget drops many late rows: reconcile corrects their windows, so
# window_results gets rewritten (copy-on-write) and reconcile_log gets rows.
"$work/tidemark" reconcile --lake "$work/lake"
"$work/tidemark" compact --lake "$work/lake" --table raw_events
"$work/tidemark" tables --lake "$work/lake"
"$work/duck" interop -lake "$work/lake" -input "$work/in" -check-files -version "$version" -min-checkpoints 2

# A session lake: reconcile merges the stream sessions late rows bridged,
# removing rows of window_results and writing reconcile_log's
# replaced_start/replaced_end; DuckDB reads every table of it.
"$work/tidemark" stream --source "$work/in" --key page --value value --arrival-field arrival_time \
  --session-gap 30s --lateness 1s --max-batch-rows 900 --once --drain --lake "$work/sessions"
"$work/tidemark" reconcile --lake "$work/sessions"
"$work/duck" interop -lake "$work/sessions" -input "$work/in" -check-files -version "$version"

# An aggregates lake (--agg): window_results has a column per aggregate
# (DOUBLE, BIGINT for the distinct count), exact and agg_state; raw_events
# a column per input. Reconcile makes every closed window exact (rewriting
# all of window_results); DuckDB reads every table of it.
"$work/tidemark" stream --source "$work/in" --key page --value value --arrival-field arrival_time \
  --agg 'avg(value)' --agg 'p50(value)' --agg 'p99.9(value)' --agg 'count_distinct(user_id)' \
  --window 1m --lateness 1s --max-batch-rows 900 --once --drain --lake "$work/aggs"
"$work/tidemark" reconcile --lake "$work/aggs"
"$work/duck" interop -lake "$work/aggs" -input "$work/in" -check-files -version "$version"
