#!/usr/bin/env bash
# bench.sh: tidemark against DuckDB on the same generated input (SPEC §8).
#
#   scripts/bench.sh [-n EVENTS] [-r ROUNDS] [-k KEYS] [-f FILES] [-o RESULTS.md] [-t TMPDIR] [-K]
#
# Generates N events once (scripts/gen), then R rounds, each running both
# sides of three phases on the same files, alternating which side goes first:
#   (a) stream:    tidemark stream --once --drain      vs duck ingest (read_json -> Parquet)
#   (b) batch:     $BATCH_CMD                          vs duck groupby (window x key over raw_events)
#   (c) lateness:  tidemark lateness --format json     vs duck quantiles
# Each run is measured with /usr/bin/time -v (wall time, peak RSS). Prints
# medians and throughput ratios and writes scripts/bench-results.md.
#
# If tidemark does not build (or a tidemark command fails), its side is
# reported as FAIL and the DuckDB side still runs; (b) and (c) then use a
# raw_events fixture built by `duck mklake`.
set -euo pipefail

N=2000000
ROUNDS=3
KEYS=1000
FILES=8
SEED=1
KEEP=0
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
OUT_MD="$ROOT/scripts/bench-results.md"
TMP=""

# The batch side is `tidemark recompute` (exact windows from raw_events,
# read-only), printing only counts so output formatting is not measured.
BATCH_CMD=${BATCH_CMD:-'recompute --lake {LAKE} --format count'}
# Flags shared by every tidemark stream run (the lake and source are added).
STREAM_FLAGS=${STREAM_FLAGS:-'--window 1m --key page --value value --arrival-field arrival_time --lateness 10s --once --drain'}

usage() { sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'; exit "${1:-0}"; }
while getopts "n:r:k:f:o:t:s:Kh" opt; do
  case $opt in
    n) N=$OPTARG ;;
    r) ROUNDS=$OPTARG ;;
    k) KEYS=$OPTARG ;;
    f) FILES=$OPTARG ;;
    o) OUT_MD=$OPTARG ;;
    t) TMP=$OPTARG ;;
    s) SEED=$OPTARG ;;
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

# ---- input -------------------------------------------------------------------
IN="$TMP/in"
log "generating $N events (seed $SEED, $KEYS keys, $FILES files)"
go run ./scripts/gen -events "$N" -seed "$SEED" -keys "$KEYS" -files "$FILES" -out "$IN" 2>"$TMP/gen-summary.json" ||
  { cat "$TMP/gen-summary.json" >&2; die "generator failed"; }
INPUT_BYTES=$(du -sb "$IN" | cut -f1)

# ---- measuring ---------------------------------------------------------------
# measure NAME CMD...: runs CMD under GNU time; appends "phase side round wall_s rss_kb ok"
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
  local wall rss
  wall=$(awk -F': ' '/Elapsed \(wall clock\)/ {
      n = split($2, p, ":"); s = 0; for (i = 1; i <= n; i++) s = s * 60 + p[i]; print s }' "$tf" 2>/dev/null || true)
  rss=$(awk -F': ' '/Maximum resident set size/ {print $2}' "$tf" 2>/dev/null || true)
  printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$phase" "$side" "$round" "${wall:-0}" "${rss:-0}" "$ok" >>"$TMP/runs.tsv"
  [[ $ok == 1 ]] && log "$name: ${wall}s, peak RSS $((${rss:-0} / 1024)) MiB"
  return 0
}

tm() { [[ $TM_OK == 1 ]]; }

# Rounds. A round's tidemark lake is fresh; the first good one feeds (b), (c).
LAKE=""
for ((r = 1; r <= ROUNDS; r++)); do
  log "round $r/$ROUNDS: (a) stream vs ingest"
  sides=(tidemark duck)
  ((r % 2 == 0)) && sides=(duck tidemark)
  for side in "${sides[@]}"; do
    if [[ $side == tidemark ]]; then
      if tm; then
        # shellcheck disable=SC2086 # STREAM_FLAGS is a word list
        measure "a-tidemark-$r" stream tidemark "$r" "$TMP/tidemark" stream --source "$IN" --lake "$TMP/lake-$r" $STREAM_FLAGS
        if [[ -z $LAKE && -d "$TMP/lake-$r/raw_events/_delta_log" ]] && tail -n 1 "$TMP/runs.tsv" | grep -q $'\t1$'; then
          LAKE="$TMP/lake-$r"
        fi
      else
        printf 'stream\ttidemark\t%s\t0\t0\t0\n' "$r" >>"$TMP/runs.tsv"
      fi
    else
      rm -f "$TMP/duck-$r.parquet"
      measure "a-duck-$r" stream duck "$r" "$TMP/duck" ingest -in "$IN" -out "$TMP/duck-$r.parquet"
      rm -f "$TMP/duck-$r.parquet"
    fi
  done
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
        printf 'batch\ttidemark\t%s\t0\t0\t0\nlateness\ttidemark\t%s\t0\t0\t0\n' "$r" "$r" >>"$TMP/runs.tsv"
      fi
    else
      measure "b-duck-$r" batch duck "$r" "$TMP/duck" groupby -lake "$LAKE" -window 1m -key page -value value
      measure "c-duck-$r" lateness duck "$r" "$TMP/duck" quantiles -lake "$LAKE"
    fi
  done
done

# ---- report ------------------------------------------------------------------
# median PHASE SIDE FIELD(4=wall,5=rss): median over successful runs, or "FAIL".
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
  echo "| load average at start | $LOAD0 (other work on the machine skews the numbers) |"
  echo "| Go | $GOV |"
  echo "| DuckDB | $DUCK_VERSION (duck built in ${DUCK_BUILD_S}s) |"
  echo "| input | $N lines, $INPUT_BYTES bytes, $FILES files, $KEYS keys, seed $SEED |"
  echo "| raw_events for (b), (c) | $RAW_ROWS rows, from $LAKE_KIND |"
  echo "| rounds | $ROUNDS (medians below; sides alternate which runs first) |"
  echo
  echo "| phase | side | command | median wall (s) | median peak RSS (MiB) | rows/s | tidemark/DuckDB throughput |"
  echo "|---|---|---|---:|---:|---:|---:|"
  for phase in stream batch lateness; do
    case $phase in
      stream) rows=$N; tcmd="tidemark stream $STREAM_FLAGS"; dcmd="duck ingest (read_json -> COPY parquet zstd)" ;;
      batch) rows=$RAW_ROWS; tcmd="tidemark $BATCH_CMD"; dcmd="duck groupby (time_bucket 1m, page)" ;;
      lateness) rows=$RAW_ROWS; tcmd="tidemark lateness --format json"; dcmd="duck quantiles" ;;
    esac
    tw=$(median "$phase" tidemark 4); dw=$(median "$phase" duck 4)
    trate=$(rate "$rows" "$tw"); drate=$(rate "$rows" "$dw")
    echo "| $phase | tidemark | \`$tcmd\` | $tw | $(mib "$(median "$phase" tidemark 5)") | $trate | $(ratio "$trate" "$drate") |"
    echo "| $phase | DuckDB | $dcmd | $dw | $(mib "$(median "$phase" duck 5)") | $drate | |"
  done
  echo
  echo "SPEC §8 targets: stream >= 1.00 x DuckDB ingest; batch >= 0.50 x DuckDB group-by."
  echo "FAIL = the command did not build or exited non-zero (see the bench log)."
  echo
  echo "<details><summary>all runs (phase, side, round, wall s, peak RSS KiB, ok)</summary>"
  echo
  echo '```'
  cat "$TMP/runs.tsv"
  echo '```'
  echo "</details>"
} >"$OUT_MD"

log "wrote $OUT_MD"
cat "$OUT_MD"
