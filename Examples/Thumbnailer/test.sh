#!/usr/bin/env bash
# The thumbnailer end to end: serves the gallery's generated images (Examples/Gallery/serve.sh,
# unthrottled) plus a few bad ones, runs the thumbnailer over all of them, and checks every
# thumbnail's size and colours (check.py), the summary's counts and failures by kind, and the
# exit status.
#
# Usage: Examples/Thumbnailer/test.sh [--skip-build]
# Prints "thumbnailer: N passed, M failed" and exits non-zero on any failure.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
source "$here/../../Scripts/lib/setup.sh"

skip_build=0
case "${1:-}" in
    --skip-build) skip_build=1 ;;
    "") ;;
    *) echo "usage: $0 [--skip-build]" >&2; exit 2 ;;
esac

ensure_system_packages
ensure_swift
ensure_python_peers
python="$CURLEW_VENV/bin/python"

if ((!skip_build)); then
    log "building the thumbnailer (Examples/Thumbnailer, its own package and .build)"
    if [[ -f "$CURLEW_ROOT/Package.resolved" && ! -f "$here/Package.resolved" ]]; then
        cp "$CURLEW_ROOT/Package.resolved" "$here/Package.resolved"
    fi
    (cd "$here" && swift build)
fi
thumbnailer="$here/.build/debug/Thumbnailer"
[[ -x "$thumbnailer" ]] || { log "no thumbnailer binary at $thumbnailer (build it first)"; exit 1; }

work="$(mktemp -d -t curlew-thumbnailer.XXXXXX)"
chmod a+x "$work"  # nginx's workers (nobody, under root) must reach the files inside
trap '[[ -f "$work/server/nginx.pid" ]] && kill "$(cat "$work/server/nginx.pid")" 2>/dev/null; rm -rf "$work"' EXIT INT TERM

count=360
max_size=40
base_url="$(SERVE_RATE=100000 "$here/../Gallery/serve.sh" "$work/server" "$count")"
log "nginx at $base_url"

# The bad ones: garbage named .png, a JPEG cut short, a text file, a missing file.
www="$work/server/www"
head -c 300 /dev/urandom >"$www/img/garbage.png"
head -c 200 "$www/img/0001.jpg" >"$www/img/cut.jpg"
echo "not an image" >"$www/img/notes.txt"
chmod a+r "$www/img/garbage.png" "$www/img/cut.jpg" "$www/img/notes.txt"
{
    for ((item = 0; item < count; item++)); do
        extensions=(png jpg gif webp)
        printf '%simg/%04d.%s\n' "$base_url" "$item" "${extensions[item % 4]}"
    done
    for bad in garbage.png cut.jpg notes.txt missing.png; do echo "${base_url}img/$bad"; done
} >"$work/urls.txt"

passed=0
failed=0
expect() {  # expect DESCRIPTION COMMAND...
    local description="$1"
    shift
    if "$@"; then passed=$((passed + 1)); else printf 'FAIL %s\n' "$description"; failed=$((failed + 1)); fi
}

status=0
"$thumbnailer" --list "$work/urls.txt" --output "$work/thumbs" --max-size "$max_size" --concurrency 8 \
    >"$work/summary.txt" 2>"$work/progress.txt" || status=$?
cat "$work/summary.txt"

expect "exit status 1 (some URLs failed), got $status" test "$status" -eq 1
expect "every good image is a thumbnail of the right size and colour" \
    "$python" "$here/check.py" "$work/thumbs" "$count" "$max_size"
expect "the summary counts $count written and 4 failed" \
    grep -q "^thumbnails: $count written, 4 failed, of $((count + 4)) URLs$" "$work/summary.txt"
expect "the missing file is counted as HTTP 404" grep -q "^failed: 1 HTTP 404," "$work/summary.txt"
expect "the text file is counted as not an image type" grep -q "^failed: 1 not an image type (text/plain)," "$work/summary.txt"
expect "the garbage is counted as not PNG, JPEG, GIF or WebP" grep -q "^failed: 1 not PNG, JPEG, GIF or WebP," "$work/summary.txt"
expect "the cut JPEG is counted as truncated or corrupt" grep -Eq "^failed: 1 (truncated|corrupt) image," "$work/summary.txt"
expect "the progress reached the end" grep -q "^progress: $((count + 4))/$((count + 4)) done" "$work/progress.txt"
expect "no extra files were written" test "$(find "$work/thumbs" -type f | wc -l)" -eq "$count"

echo "thumbnailer: $passed passed, $failed failed"
((failed == 0))
