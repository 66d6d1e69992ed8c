#!/usr/bin/env bash
# bench.sh: tidemark against DuckDB on the same generated input (SPEC §8).
#
#   scripts/bench.sh [-n EVENTS[,EVENTS...]] [-r ROUNDS] [-k KEYS] [-f FILES] [-x SHAPES] [-o RESULTS.md] [-t TMPDIR] [-K]
#
# Generates each input size once (scripts/gen; default 1M and 2M events),
# then R rounds, each running both sides of each phase on the same files,
# alternating which side goes first:
#   (a) stream:    tidemark stream --once --drain      vs duck ingest (read_json -> Parquet), every size
#   (b) batch:     $BATCH_CMD                          vs duck groupby (window x key over raw_events), largest size
#   (c) lateness:  tidemark lateness --format json     vs duck quantiles (quantile_disc), largest size
#   (d) reconcile: tidemark reconcile over every window of a lake streamed with
#                  $AGG_FLAGS (exact percentiles, distinct counts) vs the same over
#                  the count/sum/min/max lake of (a) vs duck aggs (the same
#                  aggregates from raw_events payloads), largest size; skipped
#                  when tidemark has no --agg
# and the extra shapes of -x (comma-separated; default wide,peruser; none):
#   wide:     1M events, 100,000 keys, 64 files: stream vs duck ingest
#   peruser:  600k events: tidemark --key user_id against --key page (same events)
# Each run is measured with /usr/bin/time -v (wall time, user+sys CPU
# seconds, peak RSS). Prints medians, throughput ratios and CPU-seconds per
# million events, and writes scripts/bench-results.md. The report gives the
# kernel's transparent huge pages mode and tidemark's (TIDEMARK_HUGE_PAGES).
#
# If tidemark does not build (or a tidemark command fails), its side is
# reported as FAIL and the DuckDB side still runs; (b) and (c) then use a
# raw_events fixture built by `duck mklake`.
set -euo pipefail

SIZES=1000000,2000000
ROUNDS=3
KEYS=1000
FILES=8
SEED=1
KEEP=0
SHAPES=wide,peruser
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
OUT_MD="$ROOT/scripts/bench-results.md"
TMP=""

# The batch side is `tidemark recompute` (exact windows from raw_events,
# read-only), printing only counts so output formatting is not measured.
BATCH_CMD=${BATCH_CMD:-'recompute --lake {LAKE} --format count'}
# Flags shared by every tidemark stream run (the lake and source are added).
STREAM_FLAGS=${STREAM_FLAGS:-'--window 1m --key page --value value --arrival-field arrival_time --lateness 10s --once --drain'}

# (d): the aggregates of the aggregates lake, as tidemark spells them, and
# the window starts reconcile checks (the generator's events start
# 2026-01-01; every window of the input is in the range).
AGG_FLAGS=${AGG_FLAGS:-'--agg avg(value) --agg p50(value) --agg p99(value) --agg count_distinct(user_id)'}
RECONCILE_RANGE=${RECONCILE_RANGE:-'--from 2025-12-31T00:00:00Z --to 2026-01-03T00:00:00Z'}

usage() { sed -n '2,28p' "$0" | sed 's/^# \{0,1\}//'; exit "${1:-0}"; }
while getopts "n:r:k:f:o:t:s:x:Kh" opt; do
  case $opt in
    n) SIZES=$OPTARG ;;
    r) ROUNDS=$OPTARG ;;
    k) KEYS=$OPTARG ;;
    f) FILES=$OPTARG ;;
    o) OUT_MD=$OPTARG ;;
    t) TMP=$OPTARG ;;
    s) SEED=$OPTARG ;;
    x) SHAPES=$OPTARG ;;
    K) KEEP=1 ;;
    h) usage 0 ;;
    *) usage 2 ;;
  esac
done

log() { printf '[bench] %s\n' "$*" >&2; }
die() { printf '[bench] error: %s\n' "$*" >&2; exit 1; }

# GNU time, for peak RSS. The shell builtin `time` cannot measure memory.
if [[ ! -x /usr/bin/time ]] || ! /usr/bin/time -v true >/dev/null 2>&1; then
  log "/usr/bin/time (GNU time) is missing: it measures peak RSS."
  if [[ $(id -u) == 0 ]] && command -v apt-get >/dev/null; then
    log "installing it: apt-get install -y time"
    (apt-get install -y time >/dev/null 2>&1 || { apt-get update >/dev/null 2>&1 && apt-get install -y time >/dev/null 2>&1; }) ||
      die "could not install GNU time; install the 'time' package and rerun"
  else
    die "install GNU time (Debian/Ubuntu: apt-get install time) and rerun"
  fi
fi

if [[ -z $TMP ]]; then
  TMP=$(mktemp -d -t tidemark-bench.XXXXXX)
fi
mkdir -p "$TMP"
cleanup() {
  if [[ $KEEP == 1 ]]; then log "kept $TMP"; else rm -rf "$TMP"; fi
}
trap cleanup EXIT
log "work directory $TMP"
LOAD0=$(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || echo unknown)
cd "$ROOT"

# ---- build -------------------------------------------------------------------
TM_OK=1
if go build -o "$TMP/tidemark" ./cmd/tidemark 2>"$TMP/tidemark-build.log"; then
  log "built tidemark"
else
  TM_OK=0
  log "tidemark does not build; its side will be reported as FAIL:"
  sed 's/^/    /' "$TMP/tidemark-build.log" | head -n 10 >&2
fi
t0=$(date +%s.%N)
(cd scripts/duck && CGO_ENABLED=1 go build -o "$TMP/duck" .) || die "duck does not build (needs CGO_ENABLED=1 and a C compiler)"
DUCK_BUILD_S=$(awk -v a="$(date +%s.%N)" -v b="$t0" 'BEGIN { printf "%.1f", a - b }')
DUCK_VERSION=$("$TMP/duck" version)
log "built duck (DuckDB $DUCK_VERSION) in ${DUCK_BUILD_S}s"

# ---- huge pages ----------------------------------------------------------------
# The kernel's THP mode (the bracketed word) and tidemark's: a run without
# huge pages pays a page fault per 4 KiB of fresh memory, and the ratios move.
THP_ENABLED=$(sed -n 's/.*\[\(.*\)\].*/\1/p' /sys/kernel/mm/transparent_hugepage/enabled 2>/dev/null || true)
THP_DEFRAG=$(sed -n 's/.*\[\(.*\)\].*/\1/p' /sys/kernel/mm/transparent_hugepage/defrag 2>/dev/null || true)
TM_HUGE="no --huge-pages flag"
if [[ $TM_OK == 1 ]] && "$TMP/tidemark" --help 2>/dev/null | grep -q -- '--huge-pages'; then
  TM_HUGE="--huge-pages $("$TMP/tidemark" --help | sed -n 's/.*--huge-pages value.*(default: "\([a-z]*\)").*/\1/p') (default)"
fi
[[ -n ${TIDEMARK_HUGE_PAGES:-} ]] && TM_HUGE="TIDEMARK_HUGE_PAGES=$TIDEMARK_HUGE_PAGES"
log "transparent huge pages: enabled ${THP_ENABLED:-unknown}, defrag ${THP_DEFRAG:-unknown}; tidemark: $TM_HUGE"

# ---- input -------------------------------------------------------------------
IFS=, read -r -a NS <<<"$SIZES"
declare -A INPUT_BYTES
for n in "${NS[@]}"; do
  log "generating $n events (seed $SEED, $KEYS keys, $FILES files)"
  go run ./scripts/gen -events "$n" -seed "$SEED" -keys "$KEYS" -files "$FILES" -out "$TMP/in-$n" 2>"$TMP/gen-summary-$n.json" ||
    { cat "$TMP/gen-summary-$n.json" >&2; die "generator failed"; }
  INPUT_BYTES[$n]=$(du -sb "$TMP/in-$n" | cut -f1)
done
has_shape() { [[ ,$SHAPES, == *,$1,* ]]; }
if has_shape wide; then
  log "generating the wide shape: 1000000 events (seed $SEED, 100000 keys, 64 files)"
  go run ./scripts/gen -events 1000000 -seed "$SEED" -keys 100000 -files 64 -out "$TMP/in-wide" 2>"$TMP/gen-summary-wide.json" ||
    { cat "$TMP/gen-summary-wide.json" >&2; die "generator failed"; }
  INPUT_BYTES[wide]=$(du -sb "$TMP/in-wide" | cut -f1)
fi
if has_shape peruser; then
  log "generating the per-user shape: 600000 events (seed $SEED, $KEYS keys, $FILES files)"
  go run ./scripts/gen -events 600000 -seed "$SEED" -keys "$KEYS" -files "$FILES" -out "$TMP/in-peruser" 2>"$TMP/gen-summary-peruser.json" ||
    { cat "$TMP/gen-summary-peruser.json" >&2; die "generator failed"; }
  INPUT_BYTES[peruser]=$(du -sb "$TMP/in-peruser" | cut -f1)
fi
N=${NS[-1]} # (b) and (c) run on the largest input's lake
IN="$TMP/in-$N"

# ---- measuring ---------------------------------------------------------------
# measure NAME PHASE SIDE ROUND CMD...: runs CMD under GNU time; appends
# "phase side round wall_s rss_kb ok cpu_s"
# to $TMP/runs.tsv. Output goes to $TMP/NAME.out / .err. Never fails the script.
: >"$TMP/runs.tsv"
measure() {
  local name=$1 phase=$2 side=$3 round=$4; shift 4
  local tf="$TMP/$name.time" ok=1
  if ! /usr/bin/time -v -o "$tf" "$@" >"$TMP/$name.out" 2>"$TMP/$name.err"; then
    ok=0
    log "$name FAILED (exit $(grep -o 'Exit status: [0-9]*' "$tf" | grep -o '[0-9]*' || echo ?)):"
    tail -n 5 "$TMP/$name.err" | sed 's/^/    /' >&2
  fi
  local wall rss cpu
  wall=$(awk -F': ' '/Elapsed \(wall clock\)/ {
      n = split($2, p, ":"); s = 0; for (i = 1; i <= n; i++) s = s * 60 + p[i]; print s }' "$tf" 2>/dev/null || true)
  rss=$(awk -F': ' '/Maximum resident set size/ {print $2}' "$tf" 2>/dev/null || true)
  cpu=$(awk -F': ' '/(User|System) time \(seconds\)/ {s += $2} END {print s + 0}' "$tf" 2>/dev/null || true)
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$phase" "$side" "$round" "${wall:-0}" "${rss:-0}" "$ok" "${cpu:-0}" >>"$TMP/runs.tsv"
  [[ $ok == 1 ]] && log "$name: ${wall}s, ${cpu} CPU-s, peak RSS $((${rss:-0} / 1024)) MiB"
  return 0
}

tm() { [[ $TM_OK == 1 ]]; }

# Rounds. A round's tidemark lake is fresh; the first good one of the
# largest input feeds (b), (c).
LAKE=""
for ((r = 1; r <= ROUNDS; r++)); do
  for n in "${NS[@]}"; do
    log "round $r/$ROUNDS: (a) stream vs ingest, $n events"
    sides=(tidemark duck)
    ((r % 2 == 0)) && sides=(duck tidemark)
    for side in "${sides[@]}"; do
      if [[ $side == tidemark ]]; then
        if tm; then
          rm -rf "$TMP/lake-$n-$r"
          # shellcheck disable=SC2086 # STREAM_FLAGS is a word list
          measure "a-tidemark-$n-$r" "stream@$n" tidemark "$r" "$TMP/tidemark" stream --source "$TMP/in-$n" --lake "$TMP/lake-$n-$r" $STREAM_FLAGS
          if [[ $n == "$N" && -z $LAKE && -d "$TMP/lake-$n-$r/raw_events/_delta_log" ]] && tail -n 1 "$TMP/runs.tsv" | grep -q $'\t1\t[^\t]*$'; then
            LAKE="$TMP/lake-$n-$r"
          elif [[ $KEEP == 0 ]]; then
            rm -rf "$TMP/lake-$n-$r"
          fi
        else
          printf 'stream@%s\ttidemark\t%s\t0\t0\t0\t0\n' "$n" "$r" >>"$TMP/runs.tsv"
        fi
      else
        rm -f "$TMP/duck-$r.parquet"
        measure "a-duck-$n-$r" "stream@$n" duck "$r" "$TMP/duck" ingest -in "$TMP/in-$n" -out "$TMP/duck-$r.parquet"
        rm -f "$TMP/duck-$r.parquet"
      fi
    done
  done
done

# Extra shapes (-x), R rounds each, sides alternating.
PAGE_FLAGS=$STREAM_FLAGS
USER_FLAGS=${STREAM_FLAGS/--key page/--key user_id}
for ((r = 1; r <= ROUNDS; r++)); do
  if has_shape wide; then
    log "round $r/$ROUNDS: wide (100,000 keys, 64 files) stream vs ingest"
    sides=(tidemark duck)
    ((r % 2 == 0)) && sides=(duck tidemark)
    for side in "${sides[@]}"; do
      if [[ $side == tidemark ]]; then
        if tm; then
          rm -rf "$TMP/lake-wide"
          # shellcheck disable=SC2086 # STREAM_FLAGS is a word list
          measure "w-tidemark-$r" wide tidemark "$r" "$TMP/tidemark" stream --source "$TMP/in-wide" --lake "$TMP/lake-wide" $STREAM_FLAGS
          rm -rf "$TMP/lake-wide"
        else
          printf 'wide\ttidemark\t%s\t0\t0\t0\t0\n' "$r" >>"$TMP/runs.tsv"
        fi
      else
        rm -f "$TMP/duck-wide.parquet"
        measure "w-duck-$r" wide duck "$r" "$TMP/duck" ingest -in "$TMP/in-wide" -out "$TMP/duck-wide.parquet"
        rm -f "$TMP/duck-wide.parquet"
      fi
    done
  fi
  if has_shape peruser && tm; then
    log "round $r/$ROUNDS: per-user against per-page keys, 600000 events"
    sides=(user page)
    ((r % 2 == 0)) && sides=(page user)
    for side in "${sides[@]}"; do
      flags=$PAGE_FLAGS
      [[ $side == user ]] && flags=$USER_FLAGS
      rm -rf "$TMP/lake-peruser"
      # shellcheck disable=SC2086 # flags is a word list
      measure "p-$side-$r" peruser "$side" "$r" "$TMP/tidemark" stream --source "$TMP/in-peruser" --lake "$TMP/lake-peruser" $flags
      rm -rf "$TMP/lake-peruser"
    done
  fi
done

LAKE_KIND="tidemark stream"
if [[ -z $LAKE ]]; then
  LAKE="$TMP/lake-duck"
  LAKE_KIND="duck mklake (tidemark produced no lake)"
  log "no tidemark lake: building a raw_events fixture with duck mklake"
  "$TMP/duck" mklake -in "$IN" -lake "$LAKE" >"$TMP/mklake.out" || die "duck mklake failed"
fi
RAW_ROWS=$("$TMP/duck" groupby -lake "$LAKE" -window 1m -key page | sed -n 's/.*"rows":\([0-9]*\).*/\1/p')
log "raw_events for (b), (c): $RAW_ROWS rows from $LAKE_KIND"

BATCH_ARGS=${BATCH_CMD//\{LAKE\}/$LAKE}
for ((r = 1; r <= ROUNDS; r++)); do
  log "round $r/$ROUNDS: (b) batch vs groupby, (c) lateness vs quantiles"
  sides=(tidemark duck)
  ((r % 2 == 0)) && sides=(duck tidemark)
  for side in "${sides[@]}"; do
    if [[ $side == tidemark ]]; then
      if tm; then
        # shellcheck disable=SC2086 # BATCH_ARGS is a word list
        measure "b-tidemark-$r" batch tidemark "$r" "$TMP/tidemark" $BATCH_ARGS
        measure "c-tidemark-$r" lateness tidemark "$r" "$TMP/tidemark" lateness --lake "$LAKE" --format json
      else
        printf 'batch\ttidemark\t%s\t0\t0\t0\t0\nlateness\ttidemark\t%s\t0\t0\t0\t0\n' "$r" "$r" >>"$TMP/runs.tsv"
      fi
    else
      measure "b-duck-$r" batch duck "$r" "$TMP/duck" groupby -lake "$LAKE" -window 1m -key page -value value
      measure "c-duck-$r" lateness duck "$r" "$TMP/duck" quantiles -lake "$LAKE"
    fi
  done
done

# ---- (d) reconcile with aggregates ---------------------------------------------
# Both tidemark sides reconcile a fresh copy of their lake (the copy is not
# measured) over RECONCILE_RANGE, so both recompute every closed window:
# the plain lake's count/sum/min/max from raw_events' columns, the
# aggregates lake's from its payloads too, writing every window exact.
AGG_OK=0
AGG_LAKE="$TMP/lake-aggs"
if tm && [[ $LAKE_KIND == "tidemark stream" ]] && "$TMP/tidemark" stream --help 2>/dev/null | grep -- '--agg' >/dev/null; then
  log "(d) streaming the aggregates lake: $AGG_FLAGS"
  rm -rf "$AGG_LAKE"
  # shellcheck disable=SC2086 # word lists
  measure "d-stream-aggs" "stream+aggs@$N" tidemark 1 "$TMP/tidemark" stream --source "$IN" --lake "$AGG_LAKE" $STREAM_FLAGS $AGG_FLAGS
  tail -n 1 "$TMP/runs.tsv" | grep -q $'\t1\t[^\t]*$' && AGG_OK=1
else
  log "(d) skipped: tidemark has no --agg (or no stream lake)"
fi
AGG_DUCK=$(sed -e 's/--agg //g' -e 's/ /,/g' <<<"$AGG_FLAGS")
if [[ $AGG_OK == 1 ]]; then
  for ((r = 1; r <= ROUNDS; r++)); do
    log "round $r/$ROUNDS: (d) reconcile (plain, aggregates) vs duck aggs"
    sides=(plain aggs duck)
    ((r % 2 == 0)) && sides=(duck aggs plain)
    for side in "${sides[@]}"; do
      case $side in
        plain | aggs)
          src=$LAKE
          [[ $side == aggs ]] && src=$AGG_LAKE
          rm -rf "$TMP/rc-lake" && cp -a "$src" "$TMP/rc-lake"
          # shellcheck disable=SC2086 # RECONCILE_RANGE is a word list
          measure "d-$side-$r" reconcile "$side" "$r" "$TMP/tidemark" reconcile --lake "$TMP/rc-lake" $RECONCILE_RANGE --format json
          rm -rf "$TMP/rc-lake"
          ;;
        duck)
          measure "d-duck-$r" reconcile duck "$r" "$TMP/duck" aggs -lake "$AGG_LAKE" -window 1m -key page -agg "$AGG_DUCK"
          ;;
      esac
    done
  done
fi

# ---- report ------------------------------------------------------------------
# median PHASE SIDE FIELD(4=wall,5=rss,7=cpu): median over successful runs, or "FAIL".
median() {
  awk -F'\t' -v p="$1" -v s="$2" -v f="$3" '$1 == p && $2 == s && $6 == 1 { v[n++] = $f }
    END {
      if (n == 0) { print "FAIL"; exit }
      for (i = 0; i < n; i++) for (j = i + 1; j < n; j++) if (v[j] < v[i]) { t = v[i]; v[i] = v[j]; v[j] = t }
      if (n % 2) print v[int(n / 2)]; else print (v[n / 2 - 1] + v[n / 2]) / 2
    }' "$TMP/runs.tsv"
}
rate() { [[ $2 == FAIL || $2 == 0 ]] && echo "-" || awk -v n="$1" -v s="$2" 'BEGIN { printf "%.0f", n / s }'; }
ratio() { [[ $1 == - || $2 == - ]] && echo "-" || awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a / b }'; }
mib() { [[ $1 == FAIL ]] && echo "-" || awk -v k="$1" 'BEGIN { printf "%.0f", k / 1024 }'; }
# cpm CPU_S ROWS: CPU-seconds per million rows.
cpm() { [[ $1 == FAIL ]] && echo "-" || awk -v c="$1" -v n="$2" 'BEGIN { printf "%.2f", c / n * 1e6 }'; }

LOAD1=$(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || echo unknown)
CPU=$(awk -F': ' '/model name/ {print $2; exit}' /proc/cpuinfo 2>/dev/null || echo unknown)
MEM=$(awk '/MemTotal/ {printf "%.1f GiB", $2 / 1048576}' /proc/meminfo 2>/dev/null || echo unknown)
GOV=$(go version | awk '{print $3}')
COMMIT=$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)

{
  echo "# tidemark vs DuckDB"
  echo
  echo "Written by \`scripts/bench.sh\` on $(date -u +%Y-%m-%dT%H:%M:%SZ) (commit $COMMIT)."
  echo
  echo "| machine | |"
  echo "|---|---|"
  echo "| cores (nproc) | $(nproc) |"
  echo "| CPU | $CPU |"
  echo "| memory | $MEM |"
  echo "| load average at start / end | $LOAD0 / $LOAD1 (other work on the machine skews the numbers) |"
  echo "| Go | $GOV |"
  echo "| DuckDB | $DUCK_VERSION (duck built in ${DUCK_BUILD_S}s) |"
  for n in "${NS[@]}"; do
    echo "| input | $n lines, ${INPUT_BYTES[$n]} bytes, $FILES files, $KEYS keys, seed $SEED |"
  done
  has_shape wide && echo "| input (wide) | 1000000 lines, ${INPUT_BYTES[wide]} bytes, 64 files, 100000 keys, seed $SEED |"
  has_shape peruser && echo "| input (peruser) | 600000 lines, ${INPUT_BYTES[peruser]} bytes, $FILES files, seed $SEED; --key user_id against --key page |"
  echo "| raw_events for (b), (c) | $RAW_ROWS rows, from $LAKE_KIND |"
  echo "| transparent huge pages | kernel: enabled ${THP_ENABLED:-unknown}, defrag ${THP_DEFRAG:-unknown}; tidemark: $TM_HUGE |"
  echo "| rounds | $ROUNDS (medians below; sides alternate which runs first) |"
  echo
  echo "| phase | side | command | median wall (s) | median CPU-s per 1M rows | median peak RSS (MiB) | rows/s | tidemark/DuckDB throughput |"
  echo "|---|---|---|---:|---:|---:|---:|---:|"
  phases=()
  for n in "${NS[@]}"; do phases+=("stream@$n"); done
  has_shape wide && phases+=(wide)
  for phase in "${phases[@]}" batch lateness; do
    case $phase in
      wide) rows=1000000; tcmd="tidemark stream $STREAM_FLAGS (100,000 keys, 64 files)"; dcmd="duck ingest (read_json -> COPY parquet zstd)" ;;
      stream@*) rows=${phase#stream@}; tcmd="tidemark stream $STREAM_FLAGS"; dcmd="duck ingest (read_json -> COPY parquet zstd)" ;;
      batch) rows=$RAW_ROWS; tcmd="tidemark $BATCH_CMD"; dcmd="duck groupby (time_bucket 1m, page)" ;;
      lateness) rows=$RAW_ROWS; tcmd="tidemark lateness --format json"; dcmd="duck quantiles (quantile_disc)" ;;
    esac
    tw=$(median "$phase" tidemark 4); dw=$(median "$phase" duck 4)
    trate=$(rate "$rows" "$tw"); drate=$(rate "$rows" "$dw")
    echo "| $phase | tidemark | \`$tcmd\` | $tw | $(cpm "$(median "$phase" tidemark 7)" "$rows") | $(mib "$(median "$phase" tidemark 5)") | $trate | $(ratio "$trate" "$drate") |"
    echo "| $phase | DuckDB | $dcmd | $dw | $(cpm "$(median "$phase" duck 7)" "$rows") | $(mib "$(median "$phase" duck 5)") | $drate | |"
  done
  if has_shape peruser; then
    uw=$(median peruser user 4); pw=$(median peruser page 4)
    echo
    echo "| per-user against per-page keys, 600000 events | median wall (s) | median CPU-s | median peak RSS (MiB) |"
    echo "|---|---:|---:|---:|"
    echo "| \`--key page\` | $pw | $(median peruser page 7) | $(mib "$(median peruser page 5)") |"
    echo "| \`--key user_id\` | $uw | $(median peruser user 7) | $(mib "$(median peruser user 5)") |"
    echo "| user / page time | $(ratio "$uw" "$pw") | | |"
  fi
  if [[ $AGG_OK == 1 ]]; then
    pw=$(median reconcile plain 4); aw=$(median reconcile aggs 4); dw=$(median reconcile duck 4)
    checked=$(sed -n 's/.*"windows_checked": *\([0-9]*\).*/\1/p' "$TMP/d-aggs-1.out" 2>/dev/null | head -n 1)
    corrected=$(sed -n 's/.*"windows_corrected": *\([0-9]*\).*/\1/p' "$TMP/d-aggs-1.out" 2>/dev/null | head -n 1)
    pchecked=$(sed -n 's/.*"windows_checked": *\([0-9]*\).*/\1/p' "$TMP/d-plain-1.out" 2>/dev/null | head -n 1)
    pcorrected=$(sed -n 's/.*"windows_corrected": *\([0-9]*\).*/\1/p' "$TMP/d-plain-1.out" 2>/dev/null | head -n 1)
    echo
    echo "(d) reconcile over every window ($RECONCILE_RANGE), $RAW_ROWS raw rows: the plain lake checked ${pchecked:-?} windows and corrected ${pcorrected:-?} (late rows); the aggregates lake checked ${checked:-?} and corrected ${corrected:-?} (estimates made exact)."
    echo
    echo "| side | command | median wall (s) | median CPU-s | median peak RSS (MiB) | time / plain reconcile |"
    echo "|---|---|---:|---:|---:|---:|"
    echo "| tidemark, count/sum/min/max lake | \`tidemark reconcile $RECONCILE_RANGE\` | $pw | $(median reconcile plain 7) | $(mib "$(median reconcile plain 5)") | 1.00 |"
    echo "| tidemark, aggregates lake | same, lake streamed with \`$AGG_FLAGS\` | $aw | $(median reconcile aggs 7) | $(mib "$(median reconcile aggs 5)") | $(ratio "$aw" "$pw") |"
    echo "| DuckDB | \`duck aggs -agg $AGG_DUCK\` (query only, no writes) | $dw | $(median reconcile duck 7) | $(mib "$(median reconcile duck 5)") | $(ratio "$dw" "$pw") |"
    echo
    echo "Streaming the aggregates lake took $(median "stream+aggs@$N" tidemark 4) s (peak RSS $(mib "$(median "stream+aggs@$N" tidemark 5)") MiB); stream@$N above is the same input without --agg."
  fi
  echo
  echo "SPEC §8 targets: stream >= 1.00 x DuckDB ingest; batch >= 0.50 x DuckDB group-by;"
  echo "per-user <= 2.0 x per-page time, under 400 MiB. Issue 35 (huge pages off): stream 1M >= 1.5 x,"
  echo "wide >= 1.2 x, lateness >= 1.0 x."
  echo "FAIL = the command did not build or exited non-zero (see the bench log)."
  echo
  echo "<details><summary>all runs (phase, side, round, wall s, peak RSS KiB, ok, CPU s)</summary>"
  echo
  echo '```'
  cat "$TMP/runs.tsv"
  echo '```'
  echo "</details>"
} >"$OUT_MD"

log "wrote $OUT_MD"
cat "$OUT_MD"
