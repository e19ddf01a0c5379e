#!/usr/bin/env bash
# The image pipeline workload (issue 26): 1,000 distinct 1600 x 1200 JPEG photos served by
# nginx on loopback, loaded through ImageDownloader (4 active downloads, decoded to 400 px,
# image cache on) and by a C baseline (libcurl multi, 4 transfers in flight, libjpeg-turbo
# scaled decoding on as many threads as Curlew decodes at once); then the same images again
# from the image cache, and from the HTTP disk cache. Prints a Markdown table of medians.
#
# Usage: Scripts/bench-pipeline.sh [--runs N] [--count N] [--serve]
#   --runs N    runs of every variant, alternating (default 5)
#   --count N   images (default 1000; generated once into .build/bench-images/www)
#   --serve     only start nginx, print its URL and wait (for profiling by hand)
set -euo pipefail
source "$(dirname "$0")/lib/setup.sh"
cd "$CURLEW_ROOT"

RUNS=5
COUNT=1000
SERVE=0
while (($#)); do
    case "$1" in
        --runs) RUNS="$2"; shift ;;
        --count) COUNT="$2"; shift ;;
        --serve) SERVE=1 ;;
        -h|--help) sed -n '2,12p' "$0"; exit 0 ;;
        *) log "unknown argument: $1"; exit 2 ;;
    esac
    shift
done
[[ "$RUNS" =~ ^[1-9][0-9]*$ && "$COUNT" =~ ^[1-9][0-9]*$ ]] || { log "--runs and --count take positive numbers"; exit 2; }

DIR="$CURLEW_ROOT/.build/bench-images"
PORT=27600
BASE="http://127.0.0.1:$PORT/"
CACHE_DIR="$DIR/http-cache"

# Benchmarks/ builds ImageLoading's codecs: all four libraries' headers, not only libjpeg's.
CURLEW_APT_PACKAGES=(pkg-config libcurl4-openssl-dev libssl-dev libpng-dev libjpeg-dev libgif-dev libwebp-dev
    nginx python3 python3-venv)
ensure_system_packages
ensure_swift
ensure_python_peers   # Pillow, for the photos

# --- the photos: generated once (pipeline_images.py skips files already there)
mkdir -p "$DIR"/{www,logs,tmp}
if [[ ! -f "$DIR/www/.count-$COUNT" ]]; then
    log "generating $COUNT photos into $DIR/www (once)"
    "$CURLEW_VENV/bin/python" Scripts/lib/pipeline_images.py "$DIR/www" "$COUNT"
    touch "$DIR/www/.count-$COUNT"
fi

# --- the client
if ((!SERVE)); then
    log "building curlew-image-pipeline (release)"
    (cd Benchmarks && flock /tmp/curlew-build.lock swift build -c release --product curlew-image-pipeline 2>&1 | tail -3) >&2
    CLIENT="$(cd Benchmarks && swift build -c release --show-bin-path)/curlew-image-pipeline"
fi

# --- nginx: one worker; `expires` makes every photo fresh for a day (Cache-Control: max-age),
# which the HTTP disk cache variant needs to answer without asking the server.
cat > "$DIR/nginx.conf" <<CONF
# Written by Scripts/bench-pipeline.sh. One worker on loopback only.
worker_processes 1;
pid $DIR/nginx.pid;
error_log $DIR/logs/error.log warn;
events { worker_connections 1024; }
http {
    log_format uri '\$status \$request_uri';
    access_log $DIR/logs/access.log uri;
    sendfile on; tcp_nopush on; tcp_nodelay on;
    keepalive_requests 100000000;
    keepalive_timeout 300s;
    open_file_cache max=2000 inactive=600s;
    types { image/jpeg jpg; }
    client_body_temp_path $DIR/tmp/body; proxy_temp_path $DIR/tmp/proxy;
    fastcgi_temp_path $DIR/tmp/fastcgi; uwsgi_temp_path $DIR/tmp/uwsgi; scgi_temp_path $DIR/tmp/scgi;
    server {
        listen 127.0.0.1:$PORT backlog=1024;
        root $DIR/www;
        expires 1d;
    }
}
CONF
stop_nginx() {
    if [[ -s "$DIR/nginx.pid" ]]; then
        local pid
        pid="$(cat "$DIR/nginx.pid")"
        kill -QUIT "$pid" 2>/dev/null || true
        for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
        rm -f "$DIR/nginx.pid"
    fi
}
stop_nginx   # a leftover from an interrupted run
cleanup() { stop_nginx; rm -rf "$CACHE_DIR"; }
trap cleanup EXIT INT TERM
chmod -R a+rX "$DIR/www"
: > "$DIR/logs/access.log"
nginx -p "$DIR" -c "$DIR/nginx.conf" -e "$DIR/logs/error.log"
for _ in $(seq 1 50); do [[ -s "$DIR/nginx.pid" ]] && break; sleep 0.1; done
if ((SERVE)); then
    log "nginx serves $COUNT photos at ${BASE}photo-0000.jpg ... (Ctrl-C stops it)"
    sleep infinity &
    wait $! || true
    exit 0
fi

requests() { wc -l < "$DIR/logs/access.log"; }
RAW="$DIR/results-$(date -u +%Y%m%dT%H%M%SZ).jsonl"
run_variant() {   # run variant
    local run="$1" variant="$2" before after line
    before="$(requests)"
    local output
    if ! output="$(timeout 900 "$CLIENT" "$variant" --base "$BASE" --count "$COUNT" --cache-dir "$CACHE_DIR")"; then
        log "run $run: $variant failed: $output"
        exit 1
    fi
    after="$(requests)"
    while IFS= read -r line; do
        [[ -n "$line" ]] || continue
        # The run number and how many requests nginx saw during this process (the memory pass
        # shares its process with the network pass).
        python3 -c 'import json,sys; d=json.loads(sys.argv[1]); d["run"]=int(sys.argv[2]); d["server_requests"]=int(sys.argv[3]); print(json.dumps(d))' \
            "$line" "$run" "$((after - before))" >> "$RAW"
        log "run $run: $line"
    done <<< "$output"
}
for run in $(seq 1 "$RUNS"); do
    # Alternate which of the two network clients goes first.
    if ((run % 2)); then order=(c curlew); else order=(curlew c); fi
    for variant in "${order[@]}" disk-fill disk; do run_variant "$run" "$variant"; done
done

{
    echo "CPU: $(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //'), $(nproc) cores"
    echo "libcurl: $(curl-config --version 2>/dev/null || echo unknown), libjpeg-turbo: $(dpkg-query -W -f='${Version}' libjpeg62-turbo 2>/dev/null || echo unknown)"
    echo "nginx: $(nginx -v 2>&1 | sed 's/.*: //')"
    echo "Swift: $(swift --version 2>&1 | head -n 1)"
} >&2
python3 - "$RAW" <<'PY'
import json, statistics, sys
rows = [json.loads(line) for line in open(sys.argv[1])]
def median(variant, key):
    values = [r[key] for r in rows if r["variant"] == variant]
    return statistics.median(values) if values else float("nan")
runs = max(r["run"] for r in rows)
size = next((f'{r["width"]} x {r["height"]}' for r in rows if r["variant"] == "curlew"), "?")
c_rate, c_cpu = median("c", "images_per_second"), median("c", "cpu_milliseconds_per_image")
print(f"Medians of {runs} runs, {rows[0]['images'] if rows else '?'} images decoded to {size}; raw: {sys.argv[1]}")
print()
print("| variant | images/s | CPU ms/image | images/s vs C | CPU vs C | requests to nginx |")
print("|---|---:|---:|---:|---:|---:|")
labels = {
    "c": "C: libcurl multi + libjpeg-turbo",
    "curlew": "Curlew ImageDownloader (network)",
    "curlew-memory": "Curlew, again from the image cache",
    "disk-fill": "Curlew, network + filling the HTTP disk cache",
    "disk": "Curlew, again from the HTTP disk cache",
}
for variant, label in labels.items():
    if not any(r["variant"] == variant for r in rows):
        continue
    rate, cpu = median(variant, "images_per_second"), median(variant, "cpu_milliseconds_per_image")
    served = int(median(variant, "server_requests"))
    served_text = "(same process)" if variant == "curlew-memory" else str(served)
    vs = "1.00" if variant == "c" else f"{rate / c_rate:.2f}x"
    cpu_vs = "1.00" if variant == "c" else f"{cpu / c_cpu:.2f}x"
    print(f"| {label} | {rate:.1f} | {cpu:.2f} | {vs} | {cpu_vs} | {served_text} |")
PY
