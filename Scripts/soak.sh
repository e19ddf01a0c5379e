#!/usr/bin/env bash
# Soak and load runs (Docs/Reliability.md, "Soak and load"): starts the benchmark suite's
# nginx (Scripts/bench.sh --serve), builds curlew-soak (release) and runs its three modes,
# each under a time limit, then prints a summary. Exits non-zero when a mode fails.
#
# Usage: Scripts/soak.sh [--quick] [--requests N] [--storm N] [--churn N] [--modes a,b]
#   --requests N   mixed soak: requests through one manager at concurrency 64 (default 1000000)
#   --storm N      cancel storm: slow transfers open at once, then cancelled (default 10000)
#   --churn N      manager churn: managers created and released in flight (default 10000)
#   --modes        subset of mixed,storm,churn (default: all three)
#   --quick        100000 requests (reports every 10000), storm 2000, churn 1000
set -euo pipefail
source "$(dirname "$0")/lib/setup.sh"
cd "$CURLEW_ROOT"

REQUESTS=1000000 INTERVAL=100000 STORM=10000 CHURN=10000 MODES="mixed,storm,churn"
while (($#)); do
    case "$1" in
        --quick) REQUESTS=100000; INTERVAL=10000; STORM=2000; CHURN=1000 ;;
        --requests) REQUESTS="$2"; shift ;;
        --storm) STORM="$2"; shift ;;
        --churn) CHURN="$2"; shift ;;
        --modes) MODES="$2"; shift ;;
        -h|--help) sed -n '2,11p' "$0"; exit 0 ;;
        *) log "unknown argument: $1"; exit 2 ;;
    esac
    shift
done
((REQUESTS >= INTERVAL)) || INTERVAL="$REQUESTS"

BENCH="$CURLEW_ROOT/.build/bench"
OUT="$BENCH/soak-$(date +%Y%m%d-%H%M%S)"
mkdir -p "$OUT" "$BENCH/www/soak-redirect"
# The redirect: nginx answers a directory's name without its slash with a 301 to the name
# with it, whose index.html (a copy of small.txt's 100 bytes) then answers 200. bench.sh
# takes no extra nginx configuration, so this is the one redirect its server gives.
printf '%0100d' 0 | tr 0 x > "$BENCH/www/soak-redirect/index.html"
# 10,000 open transfers need that many descriptors in the client (nginx sets its own).
ulimit -n 65536 2>/dev/null || ulimit -n "$(ulimit -Hn)"

# --- nginx: the benchmark's, started by bench.sh itself (never a copy of its set-up)
if command -v ss >/dev/null && ss -ltn | grep -q '127.0.0.1:27180 '; then
    log "port 27180 is taken (another bench.sh --serve?): stop it first"
    exit 1
fi
SERVER_LOG="$OUT/server.log"
"$CURLEW_ROOT/Scripts/bench.sh" --serve > "$SERVER_LOG" 2>&1 &
SERVER=$!
WATCHER=""
stop_server() {
    [[ -z "$WATCHER" ]] || kill "$WATCHER" 2>/dev/null || true
    kill -TERM "$SERVER" 2>/dev/null || true
    for _ in $(seq 1 100); do kill -0 "$SERVER" 2>/dev/null || break; sleep 0.1; done
}
trap stop_server EXIT
trap 'stop_server; trap - EXIT; exit 130' INT TERM
# First run on a machine: bench.sh installs packages and writes its 1.3 GB of files.
HTTP_PORT="" SLOW_PORT=""
for _ in $(seq 1 1200); do
    line="$(grep -m1 'nginx serves' "$SERVER_LOG" || true)"
    if [[ -n "$line" ]]; then
        HTTP_PORT="$(sed -n 's|.*http://127.0.0.1:\([0-9]*\).*|\1|p' <<< "$line")"
        SLOW_PORT="$(sed -n 's|.*(slow: \([0-9]*\)).*|\1|p' <<< "$line")"
        break
    fi
    kill -0 "$SERVER" 2>/dev/null || { log "bench.sh --serve ended:"; cat "$SERVER_LOG" >&2; exit 1; }
    sleep 0.5
done
[[ -n "$HTTP_PORT" && -n "$SLOW_PORT" ]] || { log "nginx did not come up in 10 minutes ($SERVER_LOG)"; exit 1; }
for _ in $(seq 1 50); do curl -s -o /dev/null "http://127.0.0.1:$HTTP_PORT/small.txt" && break; sleep 0.1; done
redirect="$(curl -s -o /dev/null -w '%{http_code} %{redirect_url}' "http://127.0.0.1:$HTTP_PORT/soak-redirect")"
[[ "$redirect" == "301 "*"/soak-redirect/" ]] || { log "expected a 301 to /soak-redirect/, got: $redirect"; exit 1; }
log "nginx on http :$HTTP_PORT, slow :$SLOW_PORT; logs in $OUT"
# On a shared machine something else may stop this nginx (it has happened): note when, so
# that a run against a dead server is not taken for a client failure.
NGINX_PID="$(cat "$BENCH/nginx.pid")"
nginx_alive() { kill -0 "$NGINX_PID" 2>/dev/null; }
( while nginx_alive; do sleep 1; done; echo "nginx ($NGINX_PID) gone at $(date -u +%T)" >> "$OUT/server-gone.log" ) &
WATCHER=$!

# --- build (release; one build at a time on shared machines)
log "building curlew-soak (release)"
# As bench.sh: SwiftPM 6.3 keeps Curlew's source-file list in the build plan; make it again.
rm -f Benchmarks/.build/release/description.json Benchmarks/.build/release.yaml
build=(nice -n 10 swift build -c release --package-path Benchmarks --product curlew-soak)
if command -v flock >/dev/null; then build=(flock "${CURLEW_BUILD_LOCK:-/tmp/curlew-build.lock}" "${build[@]}"); fi
"${build[@]}" > "$OUT/build.log" 2>&1 || { tail -30 "$OUT/build.log" >&2; exit 1; }
BIN="$(swift build -c release --package-path Benchmarks --show-bin-path)/curlew-soak"

# --- the runs, each bounded
# (A client killed by its time limit leaves its download files there: removed here.)
rm -rf "$BENCH/tmp/soak"
COMMON=(--http-port "$HTTP_PORT" --slow-port "$SLOW_PORT" --dir "$BENCH/tmp/soak")
declare -A RESULT SECONDS_TAKEN
run_mode() { # name time-limit-seconds arguments...
    local name="$1" limit="$2" status
    shift 2
    log "$name: curlew-soak $* (at most ${limit}s)"
    local start=$SECONDS
    set +e
    timeout --kill-after=10 "$limit" nice -n 5 "$BIN" "$@" "${COMMON[@]}" 2>&1 | tee "$OUT/$name.log"
    status=${PIPESTATUS[0]}
    set -e
    SECONDS_TAKEN[$name]=$((SECONDS - start))
    if ! nginx_alive; then
        RESULT[$name]="INVALID: nginx gone ($(cat "$OUT/server-gone.log" 2>/dev/null))"
        return
    fi
    case "$status" in
        0) RESULT[$name]=PASS ;;
        124|137) RESULT[$name]="TIMEOUT after ${limit}s" ;;
        *) RESULT[$name]="FAIL (exit $status)" ;;
    esac
}
IFS=, read -r -a modes <<< "$MODES"
for mode in "${modes[@]}"; do
    nginx_alive || { RESULT[$mode]="NOT RUN: nginx gone"; SECONDS_TAKEN[$mode]=0; continue; }
    case "$mode" in
        mixed) run_mode mixed 2400 --requests "$REQUESTS" --interval "$INTERVAL" --concurrency 64 ;;
        storm) run_mode storm 900 --cancel-storm "$STORM" --rounds 3 ;;
        churn) run_mode churn 1200 --manager-churn "$CHURN" ;;
        *) log "unknown mode: $mode"; exit 2 ;;
    esac
done

# --- summary
failed=0
echo
echo "Soak summary ($(date -u +%FT%TZ), logs in $OUT)"
for mode in "${modes[@]}"; do
    printf '  %-6s %-22s %5ss\n' "$mode" "${RESULT[$mode]}" "${SECONDS_TAKEN[$mode]}"
    grep -E '^(wall time|[0-9]+ (requests|managers) in|RSS |  - )' "$OUT/$mode.log" 2>/dev/null | sed 's/^/         /' || true
    [[ "${RESULT[$mode]}" == PASS ]] || failed=1
done
exit "$failed"
