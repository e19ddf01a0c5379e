# Shared set-up for Scripts/demo.sh and Scripts/test.sh. Sourced, not run.
# Everything a fresh Debian 12 machine lacks is installed here; nothing else is assumed.

CURLEW_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
CURLEW_VENV="$CURLEW_ROOT/.build/venv"

# System packages Curlew builds and tests against.
CURLEW_APT_PACKAGES=(
    pkg-config
    libcurl4-openssl-dev  # the engine (libcurl multi, OpenSSL backend)
    libssl-dev openssl ca-certificates  # Security; the openssl CLI makes test certificates
    libpng-dev libjpeg-dev libgif-dev libwebp-dev  # ImageLoading codecs
    iproute2  # Reachability tests: private network namespaces
    nghttp2-server  # nghttpd: an HTTP/2-over-TLS peer for the HTTP/2 tests
    curl  # the test server's self-tests compare against the curl tool
    gzip zstd  # the decoding tests compress their bodies with these tools
    python3 python3-venv  # httpbin under gunicorn
    libsdl2-dev xvfb x11-apps nginx  # Examples/Gallery/test.sh: SDL2 window, X server, xwd, image server
)

log() { printf '==> %s\n' "$*" >&2; }

# Installs the packages above that are missing (apt-get update once, only if needed).
ensure_system_packages() {
    local missing=()
    for package in "${CURLEW_APT_PACKAGES[@]}"; do
        if ! dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed"; then
            missing+=("$package")
        fi
    done
    # A python3 from elsewhere (pyenv) with a working venv module is fine too.
    if command -v python3 >/dev/null && python3 -c 'import venv, ensurepip' 2>/dev/null; then
        local filtered=()
        for package in "${missing[@]}"; do
            [[ "$package" == python3 || "$package" == python3-venv ]] || filtered+=("$package")
        done
        missing=("${filtered[@]}")
    fi
    if ((${#missing[@]} == 0)); then
        return 0
    fi
    log "installing: ${missing[*]}"
    local sudo=""
    if [[ $(id -u) -ne 0 ]]; then
        command -v sudo >/dev/null || { log "need root (or sudo) to install ${missing[*]}"; return 1; }
        sudo="sudo"
    fi
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

ensure_swift() {
    if ! command -v swift >/dev/null; then
        if [[ -x /opt/swift/usr/bin/swift ]]; then
            export PATH="/opt/swift/usr/bin:$PATH"
        else
            log "Swift 6 is required (https://www.swift.org/install/linux/); 'swift' is not on PATH"
            return 1
        fi
    fi
}

# httpbin + gunicorn in a venv under .build/ (never the system's Python packages).
ensure_python_peers() {
    if [[ ! -x "$CURLEW_VENV/bin/gunicorn" ]] || ! "$CURLEW_VENV/bin/python" -c 'import httpbin' 2>/dev/null; then
        log "creating $CURLEW_VENV with httpbin and gunicorn"
        python3 -m venv "$CURLEW_VENV"
        "$CURLEW_VENV/bin/pip" install -q --disable-pip-version-check "httpbin==0.10.*" "gunicorn>=22" brotlicffi
    fi
    # ImageLoadingTests generate their PNG/JPEG/GIF/WebP fixtures with Pillow; an older venv
    # made before it was needed gets it here.
    if ! "$CURLEW_VENV/bin/python" -c 'import PIL' 2>/dev/null; then
        log "adding Pillow to $CURLEW_VENV"
        "$CURLEW_VENV/bin/python" -m pip install -q --disable-pip-version-check "pillow>=10"
    fi
    # FaultHTTP2Tests script a misbehaving HTTP/2 peer (RST_STREAM, GOAWAY, no WINDOW_UPDATE)
    # with hyper-h2, which nghttpd cannot be made to do.
    if ! "$CURLEW_VENV/bin/python" -c 'import h2' 2>/dev/null; then
        log "adding h2 to $CURLEW_VENV"
        "$CURLEW_VENV/bin/python" -m pip install -q --disable-pip-version-check "h2>=4"
    fi
}

free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
}

# Starts httpbin on a free loopback port; exports CURLEW_HTTPBIN_URL. Stopped by stop_httpbin.
start_httpbin() {
    local port
    port="$(free_port)"
    CURLEW_HTTPBIN_LOG="$(mktemp -t curlew-httpbin.XXXXXX)"
    "$CURLEW_VENV/bin/gunicorn" --bind "127.0.0.1:$port" --workers 2 --worker-class gthread --threads 32 \
        --keep-alive 30 --timeout 120 --log-level warning httpbin:app >"$CURLEW_HTTPBIN_LOG" 2>&1 &
    CURLEW_HTTPBIN_PID=$!
    export CURLEW_HTTPBIN_URL="http://127.0.0.1:$port"
    local attempt
    for attempt in $(seq 1 100); do
        if python3 -c "import socket; socket.create_connection(('127.0.0.1', $port), 0.2).close()" 2>/dev/null; then
            log "httpbin at $CURLEW_HTTPBIN_URL (pid $CURLEW_HTTPBIN_PID)"
            return 0
        fi
        kill -0 "$CURLEW_HTTPBIN_PID" 2>/dev/null || break
        sleep 0.1
    done
    log "httpbin did not start:"
    cat "$CURLEW_HTTPBIN_LOG" >&2
    return 1
}

stop_httpbin() {
    if [[ -n "${CURLEW_HTTPBIN_PID:-}" ]]; then
        kill "$CURLEW_HTTPBIN_PID" 2>/dev/null || true
        wait "$CURLEW_HTTPBIN_PID" 2>/dev/null || true
        CURLEW_HTTPBIN_PID=""
    fi
    [[ -n "${CURLEW_HTTPBIN_LOG:-}" ]] && rm -f "$CURLEW_HTTPBIN_LOG"
    return 0
}
