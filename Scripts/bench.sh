#!/usr/bin/env bash
# Runs the benchmark suite: every workload x every client, in alternation, against a local
# nginx on loopback, and prints a Markdown table per workload (see Docs/Performance.md).
#
# Usage: Scripts/bench.sh [--quick] [--runs N] [--scale X] [--clients a,b] [--workloads x,y]
#   --quick        scale 0.1 and 3 runs (a few minutes)
#   --runs N       runs per client and workload (default 5)
#   --scale X      multiplies every request count (default 1)
#   --clients      subset of: libcurl,libcurl-handoff,curlew,curlew-monitor,curlew-async,
#                  urlsession,ahc (the default), or libcurl-dispatch, curlew-quiet
#   --workloads    subset of the names printed by `curlew-bench --list`
#   --serve        only set up and start nginx, print its ports, and keep it running until
#                  interrupted (for profiling one client by hand)
set -euo pipefail
source "$(dirname "$0")/lib/setup.sh"
cd "$CURLEW_ROOT"

RUNS=5
SCALE=1
CLIENTS="libcurl,libcurl-handoff,curlew,curlew-monitor,curlew-async,urlsession,ahc"
WORKLOADS=""
SERVE=0
while (($#)); do
    case "$1" in
        --quick) SCALE=0.1; RUNS=3 ;;
        --runs) RUNS="$2"; shift ;;
        --scale) SCALE="$2"; shift ;;
        --clients) CLIENTS="$2"; shift ;;
        --workloads) WORKLOADS="$2"; shift ;;
        --serve) SERVE=1 ;;
        -h|--help) sed -n '2,14p' "$0"; exit 0 ;;
        *) log "unknown argument: $1"; exit 2 ;;
    esac
    shift
done
# URLSession is ~20x slower per request: its request counts are scaled down by this factor
# (it is reported as a rate, so the figures stay comparable) to keep a default run short.
URLSESSION_FACTOR=0.1

BENCH="$CURLEW_ROOT/.build/bench"
HTTP_PORT=27180 SLOW_PORT=27181 H2_PORT=27543 RESUME_PORT=27544 NORESUME_PORT=27545

# --- packages: only what is missing (nginx and its echo module for the upload sink, openssl,
# libcurl headers, the image codecs' headers that Benchmarks/ builds against through
# ImageLoading, python3 for the tables)
CURLEW_APT_PACKAGES=(pkg-config libcurl4-openssl-dev libssl-dev openssl ca-certificates nginx
    libnginx-mod-http-echo libpng-dev libjpeg-dev libgif-dev libwebp-dev python3)
ensure_system_packages
ensure_swift

# --- files, certificates, nginx configuration under .build/bench
mkdir -p "$BENCH"/{www,logs,tmp}
# download-1g-file writes (and each client process deletes) its file in $BENCH/downloads:
# what is there now is a leftover of an interrupted run.
rm -rf "$BENCH/downloads"
[[ -s "$BENCH/www/small.txt" ]] || printf '%0100d' 0 | tr 0 x > "$BENCH/www/small.txt"   # exactly 100 bytes
make_file() { # name size: a file of zeros, kept between runs
    [[ "$(stat -c %s "$1" 2>/dev/null || echo 0)" == "$2" ]] || { rm -f "$1"; head -c "$2" /dev/zero > "$1"; }
}
make_file "$BENCH/www/1g.bin" $((1024 * 1024 * 1024))
make_file "$BENCH/www/slow.bin" $((4 * 1024 * 1024))          # at 1 KiB/s it stays open for an hour
make_file "$BENCH/upload-256m.bin" $((256 * 1024 * 1024))

if [[ ! -s "$BENCH/leaf.pem" || ! -s "$BENCH/ca.pem" ]]; then
    log "generating a test CA and a certificate for 127.0.0.1 and localhost"
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 3650 \
        -keyout "$BENCH/ca-key.pem" -out "$BENCH/ca.pem" -subj "/CN=Curlew bench CA" \
        -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" 2>/dev/null
    openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
        -keyout "$BENCH/leaf-key.pem" -out "$BENCH/leaf.csr" -subj "/CN=127.0.0.1" 2>/dev/null
    printf '%s\n' "subjectAltName=IP:127.0.0.1,DNS:localhost" "basicConstraints=CA:FALSE" \
        "keyUsage=critical,digitalSignature" "extendedKeyUsage=serverAuth" > "$BENCH/leaf.ext"
    openssl x509 -req -in "$BENCH/leaf.csr" -CA "$BENCH/ca.pem" -CAkey "$BENCH/ca-key.pem" -CAcreateserial \
        -days 3650 -extfile "$BENCH/leaf.ext" -out "$BENCH/leaf.pem" 2>/dev/null
fi

# 10,000 open transfers need that many descriptors in nginx and in the client.
ulimit -n 65536 2>/dev/null || ulimit -n "$(ulimit -Hn)"
FILES="$(ulimit -n)"

# The upload sink must read the whole body before it answers: nginx's `return 204` answers at
# once and discards the body afterwards, and a client may then stop sending (AHC does), which
# would measure nothing. The echo module's echo_read_request_body reads it first.
ECHO_MODULE=/usr/lib/nginx/modules/ngx_http_echo_module.so
# Uploaded bodies pass through nginx's temporary files: keep them in memory when /dev/shm exists.
BODY_TMP="$BENCH/tmp/body"
if [[ -d /dev/shm && -w /dev/shm ]]; then BODY_TMP="/dev/shm/curlew-bench-$(id -u)"; mkdir -p "$BODY_TMP"; fi
[[ -f "$ECHO_MODULE" ]] || { log "missing $ECHO_MODULE (apt package libnginx-mod-http-echo)"; exit 1; }

cat > "$BENCH/nginx.conf" <<EOF
# Written by Scripts/bench.sh. One worker on loopback only.
load_module $ECHO_MODULE;
worker_processes 1;
worker_rlimit_nofile $FILES;
pid $BENCH/nginx.pid;
error_log $BENCH/logs/error.log warn;
events { worker_connections $((FILES - 100)); multi_accept on; }
http {
    access_log off;
    sendfile on; tcp_nopush on; tcp_nodelay on;
    keepalive_requests 100000000;   # HTTP/1.1 and HTTP/2: never close a busy connection
    keepalive_timeout 300s;
    # One descriptor per file, shared by every request: 10,000 slow transfers need 10,000
    # sockets, not 10,000 more open files (and small GETs skip an open/close each).
    open_file_cache max=64 inactive=600s;
    open_file_cache_valid 600s;
    types { text/plain txt; application/octet-stream bin; }
    default_type application/octet-stream;
    client_body_temp_path $BODY_TMP; proxy_temp_path $BENCH/tmp/proxy;
    fastcgi_temp_path $BENCH/tmp/fastcgi; uwsgi_temp_path $BENCH/tmp/uwsgi; scgi_temp_path $BENCH/tmp/scgi;
    root $BENCH/www;
    ssl_certificate $BENCH/leaf.pem;
    ssl_certificate_key $BENCH/leaf-key.pem;
    log_format resumed '\$ssl_session_reused';

    # HTTP/1.1 keep-alive: small.txt, 1g.bin, and the upload sink (reads and discards the body).
    server {
        listen 127.0.0.1:$HTTP_PORT backlog=4096;
        location = /upload {
            client_max_body_size 0;
            client_body_buffer_size 1m;   # larger bodies pass through a temporary file (BODY_TMP)
            echo_read_request_body;
            echo ok;
        }
    }
    # Slow transfers: 1 KiB/s each, so 10,000 of them stay open.
    server {
        listen 127.0.0.1:$SLOW_PORT backlog=16384;
        limit_rate 1k;
    }
    # TLS with HTTP/2 (ALPN), session cache and tickets.
    server {
        listen 127.0.0.1:$H2_PORT ssl http2 backlog=4096;
        ssl_session_cache shared:bench:10m; ssl_session_tickets on;
    }
    # TLS HTTP/1.1, resumption possible (cache + tickets); logs whether each handshake resumed.
    server {
        listen 127.0.0.1:$RESUME_PORT ssl backlog=4096;
        ssl_session_cache shared:bench:10m; ssl_session_tickets on;
        access_log $BENCH/logs/resumed.log resumed;
    }
    # TLS HTTP/1.1, no resumption (no cache, no tickets).
    server {
        listen 127.0.0.1:$NORESUME_PORT ssl backlog=4096;
        ssl_session_cache off; ssl_session_tickets off;
        access_log $BENCH/logs/noresume.log resumed;
    }
}
EOF

# Stops the nginx `$1` names, or the one the pid file names.
stop_nginx() {
    local pid="${1:-}"
    if [[ -z "$pid" && -s "$BENCH/nginx.pid" ]]; then pid="$(cat "$BENCH/nginx.pid")"; fi
    [[ -n "$pid" ]] || return 0
    # Only an nginx: a stale file's number may belong to another process by now.
    if [[ "$(ps -o comm= -p "$pid" 2>/dev/null)" == nginx* ]]; then
        kill -QUIT "$pid" 2>/dev/null || true
        for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
        # A graceful stop waits for open connections; after 5 s the next run needs the ports.
        if kill -0 "$pid" 2>/dev/null; then
            kill -TERM "$pid" 2>/dev/null || true
            for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
        fi
    fi
    # nginx removes its own file when it exits; a stale one is removed only while it still
    # names this nginx, never once another run's nginx wrote it.
    if [[ "$(cat "$BENCH/nginx.pid" 2>/dev/null)" == "$pid" ]]; then rm -f "$BENCH/nginx.pid"; fi
}
stop_nginx   # a leftover from an interrupted run
# Only the nginx this run started, once: the trap may run twice (a signal, then the exit), and
# by the second time another run may have started its own nginx and written the pid file (a
# `--serve` stopped just as a run started took the run's nginx down with it).
OUR_NGINX=""
cleanup() {
    if [[ -n "$OUR_NGINX" ]]; then stop_nginx "$OUR_NGINX"; fi
    OUR_NGINX=""
    rm -rf "$BENCH/downloads"   # a client killed by timeout leaves its file
}
trap cleanup EXIT INT TERM
log "starting nginx ($BENCH/nginx.conf)"
nginx -p "$BENCH" -c "$BENCH/nginx.conf" -e "$BENCH/logs/error.log"
for _ in $(seq 1 50); do [[ -s "$BENCH/nginx.pid" ]] && break; sleep 0.1; done
OUR_NGINX="$(cat "$BENCH/nginx.pid" 2>/dev/null || true)"
if ((SERVE)); then
    log "nginx serves $BENCH/www: http://127.0.0.1:$HTTP_PORT (slow: $SLOW_PORT), https h2 :$H2_PORT," \
        "https resume :$RESUME_PORT, no resume :$NORESUME_PORT (CA: $BENCH/ca.pem). Ctrl-C stops it."
    sleep infinity &
    sleeper=$!
    # (`|| true`: under set -e a failing command would end the trap before cleanup)
    trap 'kill "$sleeper" 2>/dev/null || true; cleanup' EXIT INT TERM
    wait "$sleeper" || true
    exit 0
fi

# --- build (release, in Benchmarks/.build; one build at a time on shared machines)
log "building Benchmarks (release)"
# SwiftPM 6.3 keeps the source-file list of the path dependency (Curlew itself) in the build
# plan: a file added to Curlew since the last build is missing until the plan is made again.
rm -f Benchmarks/.build/release/description.json Benchmarks/.build/release.yaml
build=(nice -n 10 swift build -c release --package-path Benchmarks)
if command -v flock >/dev/null; then build=(flock "${CURLEW_BUILD_LOCK:-/tmp/curlew-build.lock}" "${build[@]}"); fi
"${build[@]}"
BIN="$(swift build -c release --package-path Benchmarks --show-bin-path)/curlew-bench"
[[ -n "$WORKLOADS" ]] || WORKLOADS="$("$BIN" --list | paste -sd, -)"

# --- runs, in alternation: run 1 of every client on a workload, then run 2 ...
STAMP="$(date +%Y%m%d-%H%M%S)"
RAW="$BENCH/results-$STAMP.jsonl"
: > "$RAW"
IFS=, read -r -a clients <<< "$CLIENTS"
IFS=, read -r -a workloads <<< "$WORKLOADS"
log "$RUNS runs x ${#workloads[@]} workloads x ${#clients[@]} clients, scale $SCALE"
for workload in "${workloads[@]}"; do
    for run in $(seq 1 "$RUNS"); do
        for client in "${clients[@]}"; do
            scale="$SCALE"
            deadline=30
            if [[ "$client" == urlsession ]]; then
                scale="$(python3 -c "print($SCALE * $URLSESSION_FACTOR)")"
                deadline=10   # it has never held the slow transfers open here: don't wait long
            fi
            : > "$BENCH/logs/resumed.log"; : > "$BENCH/logs/noresume.log"
            line="$(timeout 900 "$BIN" --client "$client" --workload "$workload" --scale "$scale" --dir "$BENCH" --slow-deadline "$deadline" \
                --http-port $HTTP_PORT --slow-port $SLOW_PORT --h2-port $H2_PORT \
                --resume-port $RESUME_PORT --noresume-port $NORESUME_PORT 2>"$BENCH/logs/client.err" | tail -n 1)" || true
            [[ -n "$line" ]] || line="{\"client\":\"$client\",\"workload\":\"$workload\",\"status\":\"failed\",\"reason\":\"no output (crash or timeout): $(tail -c 200 "$BENCH/logs/client.err" | tr -d '"\\\n')\"}"
            # Add the run number and, for the TLS workloads, what nginx saw: handshakes resumed.
            python3 - "$line" "$run" "$workload" "$BENCH/logs" >> "$RAW" <<'PY'
import json, sys
line, run, workload, logs = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
record = json.loads(line)
record["run"] = run
log = {"tls-new-conn-resume": "resumed.log", "tls-new-conn-noresume": "noresume.log"}.get(workload)
if log and record.get("status") not in ("n/a", "failed"):
    flags = open(f"{logs}/{log}").read().split()
    record["tls_requests_seen"] = len(flags)
    record["tls_resumed"] = flags.count("r")
print(json.dumps(record))
PY
            tail -n 1 "$RAW" >&2
        done
    done
done

# --- tables and the JSON document
{
    echo "CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'), $(nproc) cores"
    echo "Kernel: $(uname -sr)"
    echo "libcurl: $(pkg-config --modversion libcurl 2>/dev/null || echo '?')"
    echo "OpenSSL: $(openssl version)"
    echo "nginx: $(nginx -v 2>&1 | sed 's/.*: //')"
    echo "Swift: $(swift --version 2>&1 | head -n 1)"
} > "$BENCH/machine.txt"
python3 "$CURLEW_ROOT/Scripts/lib/bench_report.py" "$RAW" "$BENCH/machine.txt" "$BENCH/results-$STAMP.json" \
    "$BENCH/results-$STAMP.md" "$SCALE" "$RUNS" "$URLSESSION_FACTOR"
cp "$BENCH/results-$STAMP.json" "$BENCH/results-latest.json"
cat "$BENCH/results-$STAMP.md"
log "results: $BENCH/results-$STAMP.json (copy: $BENCH/results-latest.json), table: $BENCH/results-$STAMP.md"
