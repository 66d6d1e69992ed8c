#!/usr/bin/env bash
# Interop check: tidemark writes a lake from generated events (stream, then
# reconcile, then compact), and DuckDB — through scripts/duck, its own module
# with its own Delta log replay — reads every table and verifies row counts,
# timestamp types, partition values and byte-exact payloads.
set -euo pipefail
cd "$(dirname "$0")/.."
export CGO_ENABLED=1

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

go build -o "$work/tidemark" ./cmd/tidemark
(cd scripts/duck && go build -o "$work/duck" .)
go run ./scripts/gen -events "${INTEROP_EVENTS:-20000}" -seed 7 -files 4 -rate 20 -out "$work/in" 2>"$work/gen.json"

"$work/tidemark" stream --source "$work/in" --key page --key country --value value \
  --arrival-field arrival_time --window 1m --lateness 1s --max-batch-rows 2000 \
  --once --drain --lake "$work/lake" --progress "$work/progress.ndjson"
# A 1 s budget drops many late rows: reconcile corrects their windows, so
# window_results gets rewritten (copy-on-write) and reconcile_log gets rows.
"$work/tidemark" reconcile --lake "$work/lake"
"$work/tidemark" compact --lake "$work/lake" --table raw_events
"$work/tidemark" tables --lake "$work/lake"
"$work/duck" interop -lake "$work/lake" -input "$work/in"
