#!/usr/bin/env bash
# Decode benchmark: ImageLoading's decoders (`Image(data:scale:options:)`) against libjpeg-turbo,
# libpng, giflib and libwebp called directly from C, same files, same process, decodes
# alternating; prints a Markdown table of medians (see /work/notes/perf-decode.md).
#
# Usage: Scripts/bench-decode.sh [--runs N] [--cases "JPEG baseline,PNG RGBA"]
#   --runs N    timed decodes per case and side (default 21)
#   --cases     a comma-separated subset of the names `curlew-decode-bench --list` prints
# The test images (photo-like, fixed seed) are generated once into .build/bench-decode.
set -euo pipefail
source "$(dirname "$0")/lib/setup.sh"
cd "$CURLEW_ROOT"

RUNS=21
CASES=""
while (($#)); do
    case "$1" in
        --runs) RUNS="$2"; shift ;;
        --cases) CASES="$2"; shift ;;
        -h|--help) sed -n '2,9p' "$0"; exit 0 ;;
        *) log "unknown argument: $1"; exit 2 ;;
    esac
    shift
done

# --- packages: the codecs' headers (and libcurl's and OpenSSL's: Benchmarks/ builds all of Curlew),
# Python for the image generator (Pillow in the venv)
CURLEW_APT_PACKAGES=(pkg-config libcurl4-openssl-dev libssl-dev libpng-dev libjpeg-dev libgif-dev libwebp-dev
    python3 python3-venv)
ensure_system_packages
ensure_swift
ensure_python_peers

# --- images, made once (VERSION changes when the generator does)
IMAGES="$CURLEW_ROOT/.build/bench-decode"
if [[ "$(cat "$IMAGES/VERSION" 2>/dev/null)" != "5" ]]; then
    log "generating the test images in $IMAGES"
    rm -rf "$IMAGES"
    "$CURLEW_VENV/bin/python" "$CURLEW_ROOT/Scripts/lib/make_decode_images.py" "$IMAGES"
fi

# --- build (release, under the shared build lock when there is one)
build=(nice -n 10 swift build -c release --package-path Benchmarks --product curlew-decode-bench)
if command -v flock >/dev/null; then build=(flock "${CURLEW_BUILD_LOCK:-/tmp/curlew-build.lock}" "${build[@]}"); fi
log "building curlew-decode-bench (release)"
"${build[@]}" >/dev/null
BIN="$(swift build -c release --package-path Benchmarks --show-bin-path)/curlew-decode-bench"

log "decoding each file $RUNS times per side"
args=(--dir "$IMAGES" --runs "$RUNS")
[[ -n "$CASES" ]] && args+=(--cases "$CASES")
echo "Decode benchmark, $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) cores, $RUNS decodes per side, medians"
echo
"$BIN" "${args[@]}"
echo
echo "C / Curlew: C's median wall time over Curlew's (1.00 = as fast as the codec called from C)."
echo "MP/s: source megapixels (all frames) per second of Curlew's median. CPU: median process CPU per decode."
