#!/usr/bin/env bash
# Installs whatever is missing, builds the `curlew` tool, starts a local httpbin, and
# tours the tool with it (Docs/CLI.md is the reference).
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
H="$CURLEW_HTTPBIN_URL"

# Downloads and sessions land in a scratch directory, not in the checkout or ~/.config.
scratch="$(mktemp -d)"
trap 'stop_httpbin; rm -rf "$scratch"' EXIT INT TERM
export XDG_CONFIG_HOME="$scratch/config"
printf '{"name": "Curlew", "stars": 5}' > "$scratch/body.json"
printf 'A short note.\n' > "$scratch/notes.txt"

# Runs curlew and shows its exit code when it is not 0.
run() {
    printf '\n$ curlew %s\n' "$*"
    local status=0
    (cd "$scratch" && "$curlew" "$@") || status=$?
    if [ "$status" -ne 0 ]; then printf '[exit %d]\n' "$status"; fi
}

section() { printf '\n\n### %s\n' "$*"; }

section "Requests: [METHOD] URL [ITEM ...]"
run "$H/get" search==curlew X-Demo:1
run POST "$H/post" name=Curlew stars:=5 'tags:=["swift","http"]'
run --form POST "$H/post" name=Curlew bio=@notes.txt
run -f POST "$H/post" title=Upload doc@notes.txt
run PUT "$H/put" @body.json
printf '\n$ echo '"'"'{"from": "a pipe"}'"'"' | curlew POST %s @-\n' "$H/post"
echo '{"from": "a pipe"}' | "$curlew" POST "$H/post" @-
run -a ann:s3cret "$H/basic-auth/ann/s3cret"
run -A digest -a ann:s3cret "$H/digest-auth/auth/ann/s3cret"
printf '\n$ curlew :%s/get   # :PORT/path means localhost\n' "${H##*:}"
"$curlew" ":${H##*:}/get" --headers

section "Output: the status line as sent, --print, -v, binary bodies"
run --headers "$H/status/418"
run -p Hh "$H/get"
run -v "$H/post" hello=world
run --pretty=format "$H/json"
printf '\n$ curlew %s | wc -c   # not a terminal: the body alone, byte for byte\n' "$H/image/png"
"$curlew" "$H/image/png" | wc -c

section "Exit codes"
run --check-status "$H/status/404"
run --follow --max-redirects 2 "$H/redirect/4"
run --timeout 1 "$H/delay/3"
run http://127.0.0.1:9/

section "Downloads (progress bar on a terminal's stderr)"
run -d "$H/range/20000?duration=1&chunk_size=2000"
run -d "$H/range/20000"
run -d "$H/status/404"
ls -l "$scratch"

section "Sessions, --curl, redirects"
run --session demo "$H/cookies/set?flavour=oat" X-Team:blue
run --session demo "$H/anything"
run --curl POST "$H/post" name=Curlew 'Authorization:Bearer secret'
run -v --follow "$H/redirect/2"

section "More verbs: reach, image, get"
run reach --once
run image "$H/image/png"
run image --preview --width 24 "$H/image/jpeg"
run get "$H/get?hello=curlew" -H 'X-Demo: 1' --metrics
