#!/usr/bin/env bash
# Serves the gallery's generated images with nginx on loopback, on a free port.
#
# Usage: Examples/Gallery/serve.sh [DIR [COUNT]]
#   DIR defaults to a new temporary directory. Generates COUNT (default 360) solid-colour PNG/JPEG/GIF/WebP files into DIR/www (images.py
#   says which colour and size each has), writes DIR/nginx.conf, starts nginx in the background
#   and prints its base URL (also in DIR/base-url). Everything stays in DIR: the access log is
#   DIR/access.log (status, URI, bytes sent), the pid DIR/nginx.pid. Stop it with
#   `kill "$(cat DIR/nginx.pid)"`.
#
# Image requests are held to 40 a second (queued, not refused; SERVE_RATE=N for N a second): on
# loopback every image would otherwise arrive before the gallery could scroll past it, and a
# scroll would cancel nothing. nginx logs a request whose client closed the connection while it
# waited with status 499.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
dir="${1:-$(mktemp -d -t curlew-gallery-server.XXXXXX)}"
count="${2:-360}"
rate="${SERVE_RATE:-40}"
[[ "$rate" =~ ^[1-9][0-9]*$ ]] || { echo "SERVE_RATE must be a positive number" >&2; exit 2; }
mkdir -p "$dir"
dir="$(cd "$dir" && pwd)"

python="$root/.build/venv/bin/python"
[[ -x "$python" ]] || python=python3
if [[ ! -f "$dir/www/.count-$count" ]]; then
    rm -rf "$dir/www"
    "$python" "$here/images.py" generate "$dir/www" "$count"
    touch "$dir/www/.count-$count"
fi
# nginx's workers run as nobody when started by root: they must be able to read the files
# (and to enter every directory above DIR: a mktemp -d needs chmod a+x).
chmod -R a+rX "$dir/www"
chmod a+x "$dir"

nginx_bin="$(command -v nginx || echo /usr/sbin/nginx)"
for _ in 1 2 3 4 5; do
    port="$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()')"
    cat >"$dir/nginx.conf" <<CONF
worker_processes 1;
pid $dir/nginx.pid;
error_log $dir/error.log error;  # "delaying request" lines are warnings
events { worker_connections 512; }
http {
    types { image/png png; image/jpeg jpg; image/gif gif; image/webp webp; }
    log_format gallery '\$status \$request_uri \$bytes_sent';
    access_log $dir/access.log gallery;
    client_body_temp_path $dir/tmp-body;
    proxy_temp_path $dir/tmp-proxy;
    fastcgi_temp_path $dir/tmp-fastcgi;
    uwsgi_temp_path $dir/tmp-uwsgi;
    scgi_temp_path $dir/tmp-scgi;
    keepalive_timeout 30;
    limit_req_zone \$server_name zone=gallery:1m rate=${rate}r/s;
    server {
        listen 127.0.0.1:$port;
        server_name gallery;
        root $dir/www;
        location /img/ { limit_req zone=gallery burst=10000; }
    }
}
CONF
    if "$nginx_bin" -p "$dir" -c "$dir/nginx.conf" 2>>"$dir/error.log"; then
        echo "nginx: files, logs and pid in $dir" >&2
        echo "http://127.0.0.1:$port/" | tee "$dir/base-url"
        exit 0
    fi
    sleep 0.2  # the port was taken between choosing and binding: choose again
done
echo "nginx did not start; see $dir/error.log" >&2
exit 1
