#!/usr/bin/env bash
# Runs a fuzzing campaign over every fuzz target of the module.
#
#   scripts/fuzz.sh                   every target, FUZZTIME (default 10s) each: ~3 min in all
#   scripts/fuzz.sh -t 2m             two minutes per target
#   scripts/fuzz.sh -r 'NDJSON|CSV'   only targets whose name matches the regexp
#   FUZZTIME=2m FUZZ_PARALLEL=1 nice -n 19 scripts/fuzz.sh    on a shared machine
#
# Targets are found with `go test -list '^Fuzz' ./...`, so a new one is picked up
# without editing this file. A failing input is written by Go itself under the
# package's testdata/fuzz/<Target>/: commit it with the fix, and plain `go test`
# (CI) replays it from then on. The script prints one line per target and exits
# non-zero if any target failed.
set -uo pipefail
cd "$(dirname "$0")/.."

fuzztime="${FUZZTIME:-10s}"
parallel="${FUZZ_PARALLEL:-1}"
match="${FUZZ_MATCH:-.}"
while getopts "t:p:r:h" opt; do
  case "$opt" in
    t) fuzztime="$OPTARG" ;;
    p) parallel="$OPTARG" ;;
    r) match="$OPTARG" ;;
    *) sed -n '2,13p' "$0"; exit 2 ;;
  esac
done

# "pkg target" pairs. `go test -list` prints the names of one package, then
# "ok  <pkg> <time>"; names seen before that line belong to that package.
# A package that does not build is reported and counts as a failure.
listing="$(go test -list '^Fuzz' ./... 2>&1)"
listrc=$?
targets="$(awk '
  /^Fuzz/ { names[n++] = $1; next }
  /^ok[ \t]/ { for (i = 0; i < n; i++) print $2, names[i]; n = 0; next }
' <<<"$listing")"
if [ -z "$targets" ]; then
  echo "fuzz.sh: no fuzz targets found" >&2
  echo "$listing" >&2
  exit 2
fi

logdir="$(mktemp -d "${TMPDIR:-/tmp}/tidemark-fuzz.XXXXXX")"
failed=0
total=0
printf '%-40s %-22s %-8s %s\n' package target result detail
while read -r pkg name; do
  [[ "$name" =~ $match ]] || continue
  total=$((total + 1))
  log="$logdir/$(basename "$pkg")-$name.log"
  start=$(date +%s)
  go test -run '^$' -fuzz "^${name}\$" -fuzztime "$fuzztime" -parallel "$parallel" "$pkg" >"$log" 2>&1
  rc=$?
  secs=$(( $(date +%s) - start ))
  # Go's last progress line: "fuzz: elapsed: 10s, execs: 12345 (1234/sec), new interesting: 3 (total: 40)"
  execs="$(grep -o 'execs: [0-9]*' "$log" | tail -1 | cut -d' ' -f2)"
  inter="$(grep -o 'new interesting: [0-9]*' "$log" | tail -1 | cut -d' ' -f3)"
  if [ "$rc" -eq 0 ]; then
    printf '%-40s %-22s %-8s %ss, %s execs, %s new interesting\n' "$pkg" "$name" ok "$secs" "${execs:-?}" "${inter:-0}"
  else
    failed=$((failed + 1))
    crasher="$(grep -o 'testdata/fuzz/[^ ]*' "$log" | tail -1)"
    printf '%-40s %-22s %-8s %s (log %s)\n' "$pkg" "$name" FAIL "${crasher:-see log}" "$log"
    grep -m 5 -E 'panic|--- FAIL|Error|error' "$log" | sed 's/^/    /'
  fi
done <<<"$targets"

if [ "$listrc" -ne 0 ]; then
  echo "fuzz.sh: listing the targets failed (a package does not build?):" >&2
  grep -v -E '^(Fuzz|ok)' <<<"$listing" | head -20 >&2
  failed=$((failed + 1))
fi
echo "fuzz.sh: $total targets, $failed failed, $fuzztime each; logs in $logdir"
[ "$failed" -eq 0 ]
