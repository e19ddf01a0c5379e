#!/usr/bin/env bash
# Builds Curlew's libFuzzer targets (Fuzz/Targets) and runs each for a bounded time.
#
# Usage: Scripts/fuzz.sh [--seconds N] [--build-only] [--list] [TARGET...]
#   --seconds N    how long each target runs (default 60); CI's smoke run uses a few seconds
#   --build-only   build the targets, run nothing
#   --list         print the target names
#   TARGET...      the targets to build and run (default: all of them)
#
# Per target it prints the executions, the coverage (libFuzzer's final `cov:` edges and `ft:`
# features), the slowest input's time, the peak RSS and the crashes found; it exits non-zero
# when any target crashed, leaked, timed out, ran out of memory or broke a property (the input
# is then in .build-fuzz/artifacts/TARGET/), or a committed regression input fails. New inputs
# found are kept in .build-fuzz/corpus/TARGET (not in git); the committed seeds in
# Fuzz/Corpus/TARGET are only read. Fuzz/README.md says how the targets are built and why.
#
# Every compilation goes through the shared build lock (CURLEW_BUILD_LOCK, default
# /tmp/curlew-build.lock); a target is rebuilt only when one of its sources is newer than it.
# The fuzzers run under `nice -n 10`, one at a time.
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
if ! command -v swiftc >/dev/null && [[ -x /opt/swift/usr/bin/swiftc ]]; then
    export PATH="/opt/swift/usr/bin:$PATH"
fi

# The clang of the same toolchain: its libFuzzer and ASan runtimes are the ones swiftc links.
clang="$(dirname "$(command -v swiftc)")/clang"
out="${CURLEW_FUZZ_BUILD:-$root/.build-fuzz}"  # another directory: a build from scratch
lock="${CURLEW_BUILD_LOCK:-/tmp/curlew-build.lock}"
modules="$out/modules"
seconds=60
build_only=0
selected=()

all_targets=(
    response-head set-cookie cookie-file cache content-range resume-data
    query-string multipart json-nulls netlink png jpeg gif webp
)

while (($#)); do
    case "$1" in
        --seconds) seconds="${2:?--seconds needs a number}"; shift 2 ;;
        --seconds=*) seconds="${1#--seconds=}"; shift ;;
        --build-only) build_only=1; shift ;;
        --list) printf '%s\n' "${all_targets[@]}"; exit 0 ;;
        -h|--help) sed -n '2,19p' "$0"; exit 0 ;;
        -*) echo "unknown option $1" >&2; exit 2 ;;
        *) selected+=("$1"); shift ;;
    esac
done
((${#selected[@]})) || selected=("${all_targets[@]}")
for target in "${selected[@]}"; do
    [[ " ${all_targets[*]} " == *" $target "* ]] || { echo "unknown target '$target' (see --list)" >&2; exit 2; }
done

log() { printf '==> %s\n' "$*" >&2; }

# The flags every Swift compilation shares: the package's language mode and upcoming features,
# optimised with debug info, and instrumented for libFuzzer and AddressSanitizer.
swift_flags=(
    -swift-version 6 -enable-upcoming-feature MemberImportVisibility -parse-as-library
    -O -g -sanitize=fuzzer,address -package-name curlew -I "$modules" -L "$modules"
)
c_flags=(-O1 -g -fsanitize=fuzzer-no-link,address)

# Runs "$@" under the build lock unless `output` is newer than every file in `inputs`.
# Arguments: output, then inputs up to "--", then the command.
build_if_stale() {
    local output="$1"; shift
    local inputs=()
    while [[ "$1" != "--" ]]; do inputs+=("$1"); shift; done
    shift
    if [[ -e "$output" ]]; then
        local stale=0 input
        for input in "${inputs[@]}"; do [[ "$input" -nt "$output" ]] && { stale=1; break; }; done
        ((stale)) || return 0
    fi
    log "building $(basename "$output")"
    flock "$lock" "$@" 2> >(grep -v "Cannot export local symbol" >&2)
}

# A library module of the package, compiled whole with the fuzz flags (and -enable-testing,
# so that a target can reach its internal API with `@testable import`).
build_module() {
    local name="$1"; shift
    local sources=("Sources/$name"/*.swift)
    build_if_stale "$modules/lib$name.a" "${sources[@]}" "$0" -- \
        swiftc "${swift_flags[@]}" -enable-testing "$@" -module-name "$name" -emit-module \
        -emit-module-path "$modules/$name.swiftmodule" -emit-library -static \
        -o "$modules/lib$name.a" "${sources[@]}"
}

# The sources each target compiles along with Fuzz/Targets/FuzzSupport.swift and its own file,
# and the modules it needs. Package sources are compiled into the fuzzer's own module (so
# their internal API is reachable without changing the package); Serialization and Security
# are linked as modules because the sources import them.
cookies_sources=(
    Sources/SessionCore/Cookies/{SetCookieParser,NetscapeCookieFormat,Cookie,CookieJarError,PublicSuffixList}.swift
    Sources/SessionCore/Driver/CurlDate.swift  # libcurl's date parser, which cookie expiry uses
)
download_sources=(
    Sources/SessionCore/Download/{DownloadFile,DownloadAnswer,DownloadFile+PartialFile,DownloadFile+ContentRange,DownloadFileClaim,DownloadResumeData,ResumePoint}.swift
    Sources/SessionCore/Engine/SessionError.swift
    Sources/SessionCore/Retry/InterceptorFailure.swift  # SessionError.interceptorFailed carries it
    Sources/SessionCore/Driver/CurlDate.swift  # DownloadAnswer compares If-Range dates by value
)
image_sources=(Sources/ImageLoading/{Image,ImageError,ImageFrame}.swift Sources/ImageLoading/Decoding/*.swift)
netlink_sources=(Sources/Reachability/{NetlinkMessageParser,NetlinkMessage,NetlinkConstants,NetlinkParseError,LinkMessage,RouteMessage,IPAddress}.swift)

target_file() {
    case "$1" in
        response-head) echo ResponseHead ;; set-cookie) echo SetCookie ;; cookie-file) echo CookieFile ;;
        cache) echo Cache ;; content-range) echo ContentRange ;; resume-data) echo ResumeData ;;
        query-string) echo QueryString ;; multipart) echo Multipart ;; json-nulls) echo JSONNulls ;;
        netlink) echo Netlink ;; png) echo PNG ;; jpeg) echo JPEG ;; gif) echo GIF ;; webp) echo WebP ;;
    esac
}

# Fills `sources`, `flags` and `modules_needed` for target $1.
target_config() {
    sources=(); flags=(); modules_needed=()
    case "$1" in
        response-head)
            sources=(Sources/SessionCore/Transfer/{ResponseHeadParser,ByteBuffer}.swift)
            modules_needed=(Serialization); flags=(-lSerialization) ;;
        set-cookie|cookie-file)
            sources=("${cookies_sources[@]}"); flags=(-I Sources/CCurl) ;;
        cache)
            sources=(Sources/SessionCore/Cache/{CacheFreshness,HTTPDate,CachedResponse}.swift)
            modules_needed=(Serialization); flags=(-lSerialization) ;;
        content-range|resume-data)
            sources=("${download_sources[@]}")
            modules_needed=(Serialization Security); flags=(-lSerialization -lSecurity -I Sources/COpenSSL -I Sources/CCurl) ;;
        query-string|multipart|json-nulls)
            modules_needed=(Serialization); flags=(-lSerialization) ;;
        netlink)
            sources=("${netlink_sources[@]}") ;;
        png|jpeg|gif|webp)
            sources=("${image_sources[@]}")
            flags=(-I Sources/CImageCodecs/include "$modules/CImageCodecsJPEG.o"
                -lpng16 -ljpeg -lgif -lwebp -lwebpdemux) ;;
    esac
}

build_target() {
    local target="$1" file
    file="$(target_file "$target")"
    target_config "$target"
    local module
    for module in "${modules_needed[@]}"; do
        case "$module" in
            Security) build_module Security -I Sources/COpenSSL ;;
            *) build_module "$module" ;;
        esac
    done
    local extra_inputs=()
    case "$target" in
        png|jpeg|gif|webp)
            build_if_stale "$modules/CImageCodecsJPEG.o" Sources/CImageCodecs/CImageCodecsJPEG.c \
                Sources/CImageCodecs/include/CImageCodecs.h "$0" -- \
                "$clang" "${c_flags[@]}" -I Sources/CImageCodecs/include -c Sources/CImageCodecs/CImageCodecsJPEG.c \
                -o "$modules/CImageCodecsJPEG.o"
            extra_inputs=("$modules/CImageCodecsJPEG.o") ;;
    esac
    for module in "${modules_needed[@]}"; do extra_inputs+=("$modules/lib$module.a"); done
    local target_sources=(Fuzz/Targets/FuzzSupport.swift "Fuzz/Targets/$file.swift" "${sources[@]}")
    build_if_stale "$out/bin/$target" "${target_sources[@]}" "${extra_inputs[@]}" "$0" -- \
        swiftc "${swift_flags[@]}" -module-name "Fuzz${file}" "${target_sources[@]}" "${flags[@]}" \
        -o "$out/bin/$target"
}

# libFuzzer's limits per input: memory (RSS and single allocations) and time. The image
# decoders allocate pixels, so their targets also cap the pixel budget they decode with.
run_options() {
    case "$1" in
        png|jpeg|gif|webp) echo "-rss_limit_mb=2048 -malloc_limit_mb=256 -timeout=10 -max_len=65536" ;;
        *) echo "-rss_limit_mb=2048 -malloc_limit_mb=256 -timeout=5" ;;
    esac
}

mkdir -p "$modules" "$out/bin"
for target in "${selected[@]}"; do build_target "$target"; done
((build_only)) && exit 0

failed=()
summary=()
for target in "${selected[@]}"; do
    corpus="$out/corpus/$target"
    artifacts="$out/artifacts/$target"
    mkdir -p "$corpus" "$artifacts"
    seeds=()
    [[ -d "Fuzz/Corpus/$target" ]] && seeds=("Fuzz/Corpus/$target")
    dict=()
    [[ -f "Fuzz/Dictionaries/$target.dict" ]] && dict=("-dict=Fuzz/Dictionaries/$target.dict")
    logfile="$out/$target.log"
    # First the inputs earlier runs found, under the same budgets: a fixed finding must stay fixed.
    if compgen -G "Fuzz/Regressions/$target/*" >/dev/null; then
        log "replaying Fuzz/Regressions/$target"
        # shellcheck disable=SC2046  # run_options is a list of flags
        if ! SWIFT_BACKTRACE=enable=no nice -n 10 "$out/bin/$target" $(run_options "$target") \
            "Fuzz/Regressions/$target"/* >"$out/$target-regressions.log" 2>&1; then
            summary+=("$(printf '%-14s a committed regression input fails again (see %s)' "$target" "$out/$target-regressions.log")")
            echo "${summary[-1]}"
            failed+=("$target")
            continue
        fi
    fi
    log "fuzzing $target for ${seconds}s"
    status=0
    # shellcheck disable=SC2046  # run_options is a list of flags
    before="$(find "$artifacts" -type f | wc -l)"
    # Swift's own crash reporter is off so that the sanitizer reports the crash itself.
    SWIFT_BACKTRACE=enable=no ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1}" nice -n 10 "$out/bin/$target" \
        -max_total_time="$seconds" -print_final_stats=1 $(run_options "$target") "${dict[@]}" \
        -artifact_prefix="$artifacts/" "$corpus" "${seeds[@]}" >"$logfile" 2>&1 || status=$?
    execs="$(sed -n 's/^stat::number_of_executed_units: *//p' "$logfile" | tail -1)"
    last="$(grep -E '^#[0-9]+' "$logfile" | tail -1 || true)"
    cov="$(sed -n 's/.* cov: \([0-9]*\).*/\1/p' <<<"$last")"
    ft="$(sed -n 's/.* ft: \([0-9]*\).*/\1/p' <<<"$last")"
    slowest="$(sed -n 's/^stat::slowest_unit_time_sec: *//p' "$logfile" | tail -1)"
    rss="$(sed -n 's/^stat::peak_rss_mb: *//p' "$logfile" | tail -1)"
    crashes=$(($(find "$artifacts" -type f | wc -l) - before))
    line="$(printf '%-14s execs %-10s cov %-6s ft %-7s slowest %ss  rss %sMB  crashes %s' "$target" "${execs:-?}" \
        "${cov:-?}" "${ft:-?}" "${slowest:-?}" "${rss:-?}" "$crashes")"
    if ((status != 0)); then
        line+="  FAILED (exit $status; see $logfile)"
        failed+=("$target")
    fi
    summary+=("$line")
    echo "$line"
done

echo
echo "Summary (${seconds}s per target):"
printf '%s\n' "${summary[@]}"
if ((${#failed[@]})); then
    echo "crashes in: ${failed[*]} (inputs in $out/artifacts/)" >&2
    exit 1
fi
