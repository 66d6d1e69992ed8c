#!/usr/bin/env bash
# Runs every test of tidemark on a fresh machine with only Go and gcc:
# installs the S3-compatible server the storage tests need (versitygw) and,
# with apt-get, Chromium and rsvg-convert for the status page and plot tests and
# zstd for the reference decoder test and logrotate for the log rotation
# tests, then
# go vet, the race-enabled test suite, and the DuckDB interop check.
set -euo pipefail
cd "$(dirname "$0")/.."

export PATH="$(go env GOPATH)/bin:$PATH:/usr/sbin" # logrotate lives in /usr/sbin
export CGO_ENABLED=1
if ! command -v versitygw >/dev/null 2>&1; then
  echo "== installing versitygw v1.8.0 (the real S3 server for the storage tests)"
  go install github.com/versity/versitygw/cmd/versitygw@v1.8.0
fi
# Tests that need the S3 server fail instead of skipping when it is missing.
export TIDEMARK_REQUIRE_S3=1

# The status page is tested in headless Chromium and the lateness plot is
# rendered with rsvg-convert: install Debian's packages when missing, then
# make those tests fail instead of skipping.
# The lake's own zstd frames are checked against the reference decoder (the
# zstd CLI, the C library parquet-java, arrow-rs and DuckDB use).
# Files rotated by Debian's logrotate (compress, copytruncate, dateext) are
# followed by the real binary in cmd/tidemark's rotation tests.
if ! command -v chromium >/dev/null 2>&1 || ! command -v rsvg-convert >/dev/null 2>&1 || ! command -v zstd >/dev/null 2>&1 || ! command -v logrotate >/dev/null 2>&1; then
  if command -v apt-get >/dev/null 2>&1; then
    echo "== installing chromium, librsvg2-bin, zstd and logrotate (browser test of the status page, SVG rendering, the reference zstd decoder, log rotation)"
    SUDO=""
    if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends chromium librsvg2-bin fonts-dejavu-core zstd logrotate >/dev/null
  else
    echo "== no apt-get: install chromium, rsvg-convert, zstd and logrotate yourself; the tests that need them skip without them"
  fi
fi
if command -v chromium >/dev/null 2>&1 && command -v rsvg-convert >/dev/null 2>&1; then
  export TIDEMARK_REQUIRE_BROWSER=1
fi
if command -v zstd >/dev/null 2>&1; then
  export TIDEMARK_REQUIRE_ZSTD=1
fi
if command -v logrotate >/dev/null 2>&1; then
  export TIDEMARK_REQUIRE_LOGROTATE=1
fi

echo "== go vet"
go vet ./...

echo "== go test -race"
go test -race -count=1 -timeout 45m ./...

if [ "${TIDEMARK_SKIP_DUCKDB:-0}" != 1 ]; then
  echo "== DuckDB yardstick module tests (its own module: ./... skips it)"
  (cd scripts/duck && go test -count=1 .)
  echo "== interop: DuckDB reads the lake tidemark writes"
  scripts/interop.sh
fi
