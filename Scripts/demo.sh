#!/usr/bin/env bash
# Installs whatever is missing, builds the `curlew` tool, starts a local httpbin, and
# makes a few requests with it.
set -euo pipefail
source "$(dirname "$0")/lib/setup.sh"
cd "$CURLEW_ROOT"

ensure_system_packages
ensure_swift
ensure_python_peers
trap stop_httpbin EXIT INT TERM
start_httpbin

log "building curlew"
swift build --product curlew
curlew="$(swift build --show-bin-path)/curlew"

run() {
    printf '\n$ curlew %s\n' "$*"
    "$curlew" "$@"
}

run get "$CURLEW_HTTPBIN_URL/get?hello=curlew" -H 'X-Demo: 1' --metrics
run get "$CURLEW_HTTPBIN_URL/gzip"
run get "$CURLEW_HTTPBIN_URL/redirect/2"
run get "$CURLEW_HTTPBIN_URL/status/418" || true
printf '\n$ curlew get http://127.0.0.1:9/   # nothing listens there\n'
"$curlew" get http://127.0.0.1:9/ || true
