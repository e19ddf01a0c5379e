#!/usr/bin/env bash
# Builds the tests with ThreadSanitizer or AddressSanitizer, runs them against httpbin on
# loopback, and summarises the sanitizer reports by kind and first frame.
#
# Usage: Scripts/sanitize.sh [thread|address] [--filter REGEX]... [--all] [--leaks]
#   thread (default)  `--sanitize=thread` with -DCURLEW_TSAN, which swaps each module's `Mutex`
#                     for a pthread-based one TSan can see (Sources/*/Support/Mutex.swift);
#   address           `--sanitize=address` (with LeakSanitizer), the real `Mutex`;
#   --filter REGEX    passed to `swift test` (repeatable); the default is
#                     SessionCoreTests and ImageLoadingTests; --all runs every test;
#   --leaks           with address: LeakSanitizer too. Off by default: it cannot follow the
#                     pointers Swift keeps with tag bits (Data's storage, weak-reference side
#                     tables), so every run reports such blocks as leaked (Docs/Reliability.md).
# Each sanitizer builds into its own scratch path (.build-tsan, .build-asan) so the debug build
# stays as it is. Every build takes /tmp/curlew-build.lock (CURLEW_BUILD_LOCK overrides it): on
# a shared machine only one build runs at a time. The full log is kept in the scratch path
# (sanitize.log); the exit status is non-zero if a test failed or a sanitizer reported anything,
# and 77 (skipped) only if the sanitizer's runtime cannot start on this machine at all.
set -euo pipefail
source "$(dirname "$0")/lib/setup.sh"
cd "$CURLEW_ROOT"

kind=thread
filters=()
all=0
leaks=0
while (($#)); do
    case "$1" in
        thread|address) kind="$1"; shift ;;
        --filter) filters+=(--filter "${2:?--filter needs a pattern}"); shift 2 ;;
        --all) all=1; shift ;;
        --leaks) leaks=1; shift ;;
        *) echo "usage: $0 [thread|address] [--filter REGEX]... [--all] [--leaks]" >&2; exit 2 ;;
    esac
done
if ((${#filters[@]} == 0 && !all)); then
    filters=(--filter SessionCoreTests --filter ImageLoadingTests)
fi

case "$kind" in
    thread)
        scratch=.build-tsan
        build_args=(--sanitize=thread -Xswiftc -DCURLEW_TSAN)
        # halt_on_error=0: see every report of a run, not only the first.
        export TSAN_OPTIONS="${TSAN_OPTIONS:-halt_on_error=0 second_deadlock_stack=1 history_size=4}"
        pattern='WARNING: ThreadSanitizer: '
        ;;
    address)
        scratch=.build-asan
        build_args=(--sanitize=address)
        export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=$leaks}"
        pattern='ERROR: (AddressSanitizer|LeakSanitizer): '
        ;;
esac
build_args+=(--scratch-path "$scratch")
log_file="$scratch/sanitize.log"
# A crash is the sanitizer's to report. Swift's own crash handler (the backtracer) reads every
# thread's stack from a helper thread, which AddressSanitizer flags as a stack-buffer-underflow
# and then never finishes: a CI run crashed that way and hung until its time ran out, naming
# neither the crash nor the test. With the backtracer off, the sanitizer prints the crash's stack
# (SIGSEGV, and the SIGILL/SIGTRAP of a Swift runtime trap) and the process ends.
export SWIFT_BACKTRACE=enable=no
crash_options="handle_segv=1:handle_sigbus=1:handle_sigill=1:handle_sigtrap=1:handle_abort=1:handle_sigfpe=1"
case "$kind" in
    thread) export TSAN_OPTIONS="$TSAN_OPTIONS $(tr : ' ' <<<"$crash_options")" ;;
    address) export ASAN_OPTIONS="$ASAN_OPTIONS:$crash_options" ;;
esac
# A run that hangs all the same is stopped here (normal runs take 6-7 minutes on 2 cores;
# CURLEW_SANITIZE_TIMEOUT overrides the limit) and the tests that started and never ended are
# named, so the CI log says where it stopped instead of running out of time.
run_limit="${CURLEW_SANITIZE_TIMEOUT:-1800}"

ensure_system_packages
ensure_swift
ensure_python_peers

log "building the tests with --sanitize=$kind into $scratch (slow: the dependencies too, the first time)"
started=$SECONDS
flock "${CURLEW_BUILD_LOCK:-/tmp/curlew-build.lock}" swift build --build-tests "${build_args[@]}"
log "built in $((SECONDS - started)) s"

trap stop_httpbin EXIT INT TERM
start_httpbin

log "running the tests (${filters[*]:-all}); log in $log_file"
started=$SECONDS
status=0
# SIGINT, which `swift test` passes on to the test process (SIGTERM would kill `swift test`
# alone and leave the test process running); --foreground keeps Ctrl-C reaching it.
watchdog=(timeout --foreground --signal=INT --kill-after=60 "$run_limit")
"${watchdog[@]}" swift test --skip-build --disable-swift-testing "${build_args[@]}" "${filters[@]}" \
    >"$log_file" 2>&1 || status=$?
# A sanitizer runtime that cannot start at all (a kernel whose address-space randomisation
# leaves no room for TSan's fixed shadow layout: "FATAL: ThreadSanitizer: unexpected memory
# mapping") has tested nothing. Run once more with randomisation off for the test process, as
# newer LLVM runtimes do by re-executing themselves; if that cannot start either, it is the
# machine's condition: exit 77 (skipped), which Scripts/test.sh reports as a skip.
startup_failure='ThreadSanitizer: unexpected memory mapping|Shadow memory range interleaves|ReserveShadowMemoryRange failed'
if ((status != 0)) && grep -qE "$startup_failure" "$log_file" && ! grep -q "Test Case '" "$log_file"; then
    log "the $kind sanitizer's runtime could not start; again with address-space randomisation off (setarch -R)"
    grep -E "$startup_failure" "$log_file" | head -3 >&2 || true
    status=0
    "${watchdog[@]}" setarch "$(uname -m)" -R swift test --skip-build --disable-swift-testing "${build_args[@]}" "${filters[@]}" >"$log_file" 2>&1 \
        || status=$?
    if ((status != 0)) && grep -qE "$startup_failure" "$log_file" && ! grep -q "Test Case '" "$log_file"; then
        grep -E "$startup_failure" "$log_file" | head -3 >&2 || true
        log "SKIP: the $kind sanitizer cannot start on this machine (above); nothing was tested"
        exit 77
    fi
fi
log "tests ran in $((SECONDS - started)) s (exit status $status)"
if (((status == 124 || status == 137) && SECONDS - started >= run_limit)); then
    log "STOPPED after $run_limit s: the run did not end"
fi
# Tests that started and never ended: the one a crash or a hang stopped in.
unfinished="$(awk '
    /^Test Case .* started/ { name = $0; sub(/^Test Case .\047?/, "", name); sub(/\047? started.*/, "", name); open[name] = 1 }
    /^Test Case .* (passed|failed|skipped)/ { name = $0; sub(/^Test Case .\047?/, "", name); sub(/\047? (passed|failed|skipped).*/, "", name); delete open[name] }
    END { for (name in open) print name }
' "$log_file")"
if [[ -n "$unfinished" ]]; then
    log "started and never ended (a crash or a hang):"
    sed 's/^/      /' <<<"$unfinished" >&2
    # What the process printed last, the crash report among it.
    log "the last lines of the run:"
    grep -v "^Test Case .* \(started\|passed\)" "$log_file" | tail -40 | swift demangle --simplified | cut -c1-240 >&2
fi

# A test that failed (an assertion, not a crash) runs once more, alone, under the same
# sanitizer: the sanitizer slows every thread 5-15 times, which moves races between a server and
# the client that tests pin down on normal runs (the normal run before this one fails on any
# failure). Passing the second time is reported as FLAKY, loudly, and does not fail the step;
# failing again does. Sanitizer reports from either run always fail it. More than 3 failures
# are not retried, nor a run that did not reach its end (a crash: no final suite line).
mapfile -t failed_tests < <(sed -nE "s/^Test Case '([^']+)' failed .*/\1/p" "$log_file" | sort -u)
run_ended=0
grep -qE "^Test Suite '(All tests|Selected tests)' failed" "$log_file" && run_ended=1
if ((status != 0 && run_ended && ${#failed_tests[@]} > 0 && ${#failed_tests[@]} <= 3)); then
    log "failed under the $kind sanitizer: ${failed_tests[*]}; once more, alone"
    retry_filters=()
    for test_name in "${failed_tests[@]}"; do retry_filters+=(--filter "${test_name/./\/}\$"); done
    retry_status=0
    "${watchdog[@]}" swift test --skip-build --disable-swift-testing "${build_args[@]}" "${retry_filters[@]}" >"$scratch/sanitize-retry.log" 2>&1 \
        || retry_status=$?
    cat "$scratch/sanitize-retry.log" >>"$log_file"
    if ((retry_status == 0)); then
        log "FLAKY under the $kind sanitizer (failed, then passed alone): ${failed_tests[*]}"
        status=0
    else
        log "failed again under the $kind sanitizer: ${failed_tests[*]}"
    fi
fi

grep -E '^Test Suite .(All tests|Selected tests). (passed|failed)' -A1 "$log_file" | tail -1 >&2 || true
grep -E "error: .* : " "$log_file" | head -20 >&2 || true

# Summary: one line per (kind, first frame of the report's first stack), most frequent first.
reports="$(grep -cE "$pattern" "$log_file" || true)"
log "$reports $kind sanitizer report(s)"
if ((reports > 0)); then
    awk -v pattern="$pattern" '
        $0 ~ pattern { sub(/.*Sanitizer: /, ""); sub(/ \(pid=.*/, ""); what = $0; want = 1; next }
        want && /^ *#0 / { sub(/^ *#0 (0x[0-9a-f]+ in )?/, ""); sub(/ \/.*$/, ""); print what " | " $0; want = 0 }
    ' "$log_file" | swift demangle --simplified --compact | sort | uniq -c | sort -rn >&2
    # The first reports in full: a CI log keeps only what was printed, not sanitize.log.
    log "the first reports in full (all of them in $log_file):"
    awk -v pattern="$pattern" '
        $0 ~ pattern { shown++; printing = shown <= 2 }
        printing { print; if (/^SUMMARY: /) printing = 0 }
    ' "$log_file" | swift demangle --simplified | cut -c1-240 | head -150 >&2
fi

if ((reports > 0 || status != 0)); then
    exit 1
fi
