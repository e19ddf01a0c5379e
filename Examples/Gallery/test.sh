#!/usr/bin/env bash
# The gallery end to end, in a real X server: starts Xvfb and serve.sh's nginx, runs the
# gallery with a scripted scroll, takes a screenshot (xwd -root) whenever the script says so,
# and checks the pixels (check.py) and the server's log.
#
# Usage: Examples/Gallery/test.sh [--skip-build] [--keep DIR]
#   --skip-build  use the gallery already built in Examples/Gallery/.build
#   --keep DIR    leave the screenshots (PNG), manifests and nginx logs in DIR
# Prints "gallery: N passed, M failed" and exits non-zero on any failure; exits 77 (skipped)
# only when no X server can start on the machine at all (what Xvfb printed is shown).
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
source "$here/../../Scripts/lib/setup.sh"

skip_build=0
keep=""
while (($#)); do
    case "$1" in
        --skip-build) skip_build=1; shift ;;
        --keep) keep="${2:?--keep needs a directory}"; shift 2 ;;
        *) echo "usage: $0 [--skip-build] [--keep DIR]" >&2; exit 2 ;;
    esac
done

ensure_system_packages
ensure_swift
ensure_python_peers
python="$CURLEW_VENV/bin/python"

if ((!skip_build)); then
    log "building the gallery (Examples/Gallery, its own package and .build)"
    # The same dependency versions as the library's own build, resolved from the same cache.
    if [[ -f "$CURLEW_ROOT/Package.resolved" && ! -f "$here/Package.resolved" ]]; then
        cp "$CURLEW_ROOT/Package.resolved" "$here/Package.resolved"
    fi
    (cd "$here" && swift build)
fi
gallery="$here/.build/debug/Gallery"
[[ -x "$gallery" ]] || { log "no gallery binary at $gallery (build it first)"; exit 1; }

work="$(mktemp -d -t curlew-gallery.XXXXXX)"
chmod a+x "$work"  # nginx's workers (nobody, under root) must reach the files inside
shots="$work/shots"
mkdir -p "$shots"
xvfb_pid=""
gallery_pid=""
cleanup() {
    [[ -n "$gallery_pid" ]] && kill "$gallery_pid" 2>/dev/null || true
    [[ -f "$work/server/nginx.pid" ]] && kill "$(cat "$work/server/nginx.pid")" 2>/dev/null || true
    [[ -n "$xvfb_pid" ]] && kill "$xvfb_pid" 2>/dev/null || true
    if [[ -n "$keep" ]]; then
        mkdir -p "$keep"
        cp "$shots"/*.png "$shots"/*.json "$work/server/access.log" "$keep/" 2>/dev/null || true
    fi
    rm -rf "$work"
}
trap cleanup EXIT INT TERM

base_url="$("$here/serve.sh" "$work/server")"
log "nginx at $base_url"

# Xvfb picks a free display itself and writes its number to the fd we give it: a plain file
# here (no pipe whose reader could miss the write), polled until it holds a whole line. The
# screen is exactly the window's size (GridLayout: 424×472), so a screenshot is the window.
# A cold machine can take a while to start its first X server (keymap compilation, fonts), so
# the wait is generous but bounded; a server that dies is started once more before giving up,
# and a failure says what Xvfb printed, how it ended, and what the socket folder holds.
start_xvfb() {  # $1: attempt number; sets xvfb_pid and display
    local displayfile="$work/xvfb-display.$1"
    : >"$displayfile"
    Xvfb -displayfd 3 -screen 0 424x472x24 -nolisten tcp 3>"$displayfile" >"$work/xvfb.$1.log" 2>&1 &
    xvfb_pid=$!
    display=""
    local line=""
    for _ in $(seq 1 600); do  # 600 × 0.1 s
        if IFS= read -r line <"$displayfile" && [[ "$line" =~ ^[0-9]+$ ]]; then
            display="$line"
            return 0
        fi
        kill -0 "$xvfb_pid" 2>/dev/null || break
        sleep 0.1
    done
    local status="still running after 60 s"
    if ! kill -0 "$xvfb_pid" 2>/dev/null; then
        status="exited"
        wait "$xvfb_pid" 2>/dev/null && status+=" with 0" || status+=" with $?"
    else
        kill "$xvfb_pid" 2>/dev/null || true
    fi
    xvfb_pid=""
    log "Xvfb (attempt $1) did not report a display: $status; it printed:"
    cat "$work/xvfb.$1.log" >&2 || true
    log "uid $(id -u); /tmp/.X11-unix: $(ls -la /tmp/.X11-unix 2>&1 | tr '\n' ' ')"
    return 1
}
# An installed Xvfb that cannot start at all, twice, is the machine's condition, not the
# gallery's: exit 77 (the automake convention for "skipped"), which Scripts/test.sh reports as
# a skip with Xvfb's own output. A missing Xvfb is a set-up failure: exit 1.
command -v Xvfb >/dev/null || { log "Xvfb is not installed (ensure_system_packages installs xvfb)"; exit 1; }
start_xvfb 1 || start_xvfb 2 || { log "SKIP: no X server could start on this machine"; exit 77; }
export DISPLAY=":$display"
log "Xvfb on $DISPLAY"

# The scripted session, and what each of its screenshots must show:
# placeholders before anything is delivered; every cell its own image once loaded; right after
# a fast scroll (every cell reused several times, late responses for scrolled-past items still
# arriving) each cell its own image or the placeholder, never another item's.
script="shot start; wait-loaded; shot loaded; press; shot pressed; release"
script+="; scroll 30; frames 20; shot fling; wait-loaded; shot fling-loaded"
script+="; scroll -7; shot back; wait-loaded; shot back-loaded"
script+="; scroll 40; scroll -2; shot fling2; frames 20; shot fling3; wait-loaded; shot end"
expectations=(
    "start placeholders" "loaded loaded" "pressed loaded"
    "fling settling" "fling-loaded loaded" "back settling" "back-loaded loaded"
    "fling2 settling" "fling3 settling" "end loaded"
)

"$gallery" --base-url "$base_url" --script "$script" --shots "$shots" --timeout 60 >"$work/gallery.log" 2>&1 &
gallery_pid=$!

passed=0
failed=0
fail() { printf 'FAIL %s\n' "$*"; failed=$((failed + 1)); }

# The screenshotter: waits (bounded) for each shot the script announces, takes it, releases
# the gallery. A gallery that died or hung fails the rest.
for expectation in "${expectations[@]}"; do
    name="${expectation%% *}"
    for _ in $(seq 1 1200); do  # 1200 × 0.05 s: the gallery's own waits are bounded at 60 s
        [[ -f "$shots/$name.ready" ]] && break
        kill -0 "$gallery_pid" 2>/dev/null || break
        sleep 0.05
    done
    if [[ ! -f "$shots/$name.ready" ]]; then
        fail "the gallery never reached shot $name"
        continue
    fi
    xwd -root -silent >"$shots/$name.xwd"
    touch "$shots/$name.done"
done

gallery_status=0
wait "$gallery_pid" || gallery_status=$?
gallery_pid=""
if ((gallery_status != 0)); then
    fail "the gallery exited with status $gallery_status:"
    cat "$work/gallery.log"
fi

for expectation in "${expectations[@]}"; do
    name="${expectation%% *}"
    mode="${expectation#* }"
    [[ -f "$shots/$name.xwd" ]] || continue
    if (cd "$here" && "$python" check.py shot "$shots" "$name" "$mode"); then
        passed=$((passed + 1))
    else
        failed=$((failed + 1))
    fi
done
if [[ -f "$shots/assigned.txt" ]] && (cd "$here" && "$python" check.py log "$shots" "$work/server/access.log"); then
    passed=$((passed + 1))
else
    fail "the server's log does not show the scrolled-past requests cancelled"
fi

echo "gallery: $passed passed, $failed failed"
((failed == 0))
