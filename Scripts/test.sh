#!/usr/bin/env bash
# Installs whatever is missing, starts the loopback peers, and runs every test.
# Usage: Scripts/test.sh [extra `swift test` arguments, e.g. --filter SessionCoreTests]
set -euo pipefail
source "$(dirname "$0")/lib/setup.sh"
cd "$CURLEW_ROOT"

ensure_system_packages
ensure_swift
ensure_python_peers
trap stop_httpbin EXIT INT TERM
start_httpbin

log "building (debug, with tests)"
swift build --build-tests

log "checking that every Swift block in Docs/ compiles"
Scripts/check-docs.sh

log "checking that every public symbol has a doc comment"
Scripts/check-doc-comments.sh

log "fuzz smoke run: every fuzz target builds and runs 1 second (Docs/Reliability.md)"
Scripts/fuzz.sh --seconds 1

log "the image bindings in a real window (Examples/Gallery/test.sh: Xvfb, nginx, screenshots)"
gallery_status=0
Examples/Gallery/test.sh || gallery_status=$?
if ((gallery_status == 77)); then
    log "SKIPPED: the gallery's window test (no X server could start here; Xvfb's output above)"
elif ((gallery_status != 0)); then
    exit "$gallery_status"
fi
log "the headless side: thumbnails from the same server (Examples/Thumbnailer/test.sh)"
Examples/Thumbnailer/test.sh

log "running the tests"
swift test --skip-build --disable-swift-testing "$@"

# Both sanitizers over SessionCore and ImageLoading (Docs/Reliability.md, "Sanitizers"): about
# 12 minutes on 2 cores from cold. Part of every full run; a filtered run (arguments given) or
# CURLEW_SKIP_SANITIZERS=1 leaves them out.
if (($# == 0)) && [[ "${CURLEW_SKIP_SANITIZERS:-0}" != 1 ]]; then
    for kind in thread address; do
        log "the $kind sanitizer over SessionCoreTests + ImageLoadingTests (Scripts/sanitize.sh $kind)"
        sanitizer_status=0
        Scripts/sanitize.sh "$kind" || sanitizer_status=$?
        if ((sanitizer_status == 77)); then
            log "SKIPPED: the $kind sanitizer (its runtime cannot start on this machine; above)"
        elif ((sanitizer_status != 0)); then
            exit "$sanitizer_status"
        fi
    done
fi
