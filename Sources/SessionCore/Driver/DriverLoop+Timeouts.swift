internal import CCurl
import Foundation
import Synchronization

/// The driver's sleep and its transfers' clocks: how long `curl_multi_poll` may wait, which
/// transfers ran out of time, and the probe of a silent one.
extension DriverLoop {
    /// Milliseconds until the next timeout check, for `curl_multi_poll`.
    func pollTimeout() -> Int32 {
        let hasTransfers = !delegates.isEmpty
        // A waiting notice bounds the sleep only while transfers run. Without any, each waiting
        // notice is carried by a completion already handed off or a command on its way, or
        // has a post queued (a start through an adapter, the cache or a reset: see
        // `SessionEngine.postStateNoticesSoon`); and a finite timeout in the sleep between
        // requests cost ~20 µs of CPU per request at one request at a time (`perf stat`,
        // 20,000 requests: 68–73 µs against 50–52 with the sleep left unbounded), the
        // timer armed and cancelled at every sleep.
        let next = min(nextTimeoutCheck, nextRetry, hasTransfers ? nextNoticeCheck : .max)
        // No clock read when nothing is due and nothing runs: an idle manager sleeps.
        guard next != .max || hasTransfers else { return Int32.max }
        return Self.pollTimeout(until: next, now: TaskDelegate.uptime, hasTransfers: hasTransfers)
    }

    /// The longest the driver sleeps while it has transfers: libcurl's own
    /// `curl_easy_perform` loop never waits longer in `curl_multi_poll`.
    ///
    /// libcurl 7.88 can hold work for a transfer with no socket readable and no timer set
    /// (seen with streams on a kept-alive HTTP/2 connection; curl fixed one such case, input
    /// already read and buffered below it, in 2025: "multi: fix polling with pending input").
    /// Without a bound the driver then slept until its next deadline, the idle timeout: under
    /// callgrind, 100 HTTPS requests 16 in flight on one HTTP/2 connection stalled for 60.1 s
    /// in one run of three, a response processed 6.05 s after its request was sent with
    /// `timeoutIntervalForRequest` = 7; bounded, 1.0 s at most. A manager with transfers wakes
    /// at least once a second for it; one without any still sleeps. Waking alone does not help
    /// a stream whose frames libcurl holds in its connection buffer: `probe` does that.
    static let longestSleepWithTransfers: UInt64 = 1_000_000_000

    /// `pollTimeout()` for the next deadline `next` (uptime ns, `.max`: none) at `now`:
    /// rounded up to whole milliseconds, so a wait never ends just before its deadline; at
    /// most `longestSleepWithTransfers` while `hasTransfers`; `Int32.max` (no timeout) for
    /// nothing due and nothing running.
    static func pollTimeout(until next: UInt64, now: UInt64, hasTransfers: Bool) -> Int32 {
        var wait = next == .max ? UInt64.max : (next > now ? next - now : 0)
        if hasTransfers { wait = min(wait, longestSleepWithTransfers) }
        guard wait != .max else { return Int32.max }
        return Int32(clamping: wait / 1_000_000 + (wait % 1_000_000 == 0 ? 0 : 1))
    }

    /// Makes sure the next check comes no later than `delegate`'s deadline or probe.
    func scheduleTimeoutCheck(for delegate: TaskDelegate) {
        guard let deadline = delegate.state.clock.nextWake else { return }
        nextTimeoutCheck = min(nextTimeoutCheck, deadline)
    }

    /// The silence after which a transfer is probed (`TransferClock.nextProbe`), where the
    /// runtime needs it (`CurlRuntime.strandsBufferedStreamInput`).
    static let firstProbeDelay: UInt64 = 1_000_000_000

    /// Fails every transfer whose idle or total clock ran out and probes every one silent long
    /// enough; schedules the next check at the earliest remaining deadline or probe (activity
    /// only moves them later, so none is missed).
    func enforceTimeouts() {
        // The pass's reading of the clock, not a fresh one per pass: a clock that ran out
        // while this pass ran is caught by the next one, a pass later.
        let now = passClock.now
        guard now >= nextTimeoutCheck else { return }
        var earliest = UInt64.max
        var expired: [(TaskDelegate, TransferClock.Expiry)] = []
        for delegate in delegates.values {
            if let expiry = delegate.state.expiry(at: now) {
                expired.append((delegate, expiry))
                continue
            }
            if delegate.state.probeIsDue(now: now) { probe(delegate) }
            if let deadline = delegate.state.clock.nextWake {
                earliest = min(earliest, deadline)
            }
        }
        nextTimeoutCheck = earliest == .max ? .max : max(earliest, now + timeoutCheckInterval)
        for (delegate, expiry) in expired {
            // Finished meanwhile by an earlier one of these (a slot passing on cannot finish
            // another, but stay safe).
            guard delegates[delegate.task] === delegate else { continue }
            switch expiry {
            case .idle(let error):
                // This attempt failed; the retrier may send another (its clock restarts), and
                // the task's metrics list this attempt as they list every other.
                if delegate.state.isAttached { delegate.collectMetrics() }
                transition(delegate) { $0.attemptTimedOut(now: now) }
                endAttempt(delegate, error: error)
            case .total(let error):
                finish(delegate, outcome: outcome(of: delegate, error: error))
            }
        }
    }

    /// Makes libcurl read the transfer's connection at its next pass, as if the socket were
    /// readable: a receive pause set and lifted at once. Lifting a pause is the one public way
    /// to reach libcurl's "the data might have been read off the socket already" path, which
    /// marks the connection readable; the read that follows processes what was stranded in
    /// the HTTP/2 connection buffer (`CurlRuntime.strandsBufferedStreamInput`), and finds
    /// nothing, at the cost of one `recv`, when the server is merely slow.
    ///
    /// No receive pause of Curlew's or the caller's is lifted by it: each of those is a hold
    /// that stops the idle clock, and a held transfer is never probed. A request body that
    /// was waiting for its source (`CURL_READFUNC_PAUSE`) is asked once more and pauses
    /// again, as after any wake. libcurl calls no callback from `curl_easy_pause` here: it
    /// replays buffered writes only, and those exist only while a write pause (a hold) is on.
    func probe(_ delegate: TaskDelegate) {
        engine.silenceProbes.add(1, ordering: .relaxed)
        if let log = engine.debugLog {
            log.debug("task #\(delegate.task.taskIdentifier) is silent: libcurl is asked to read its connection again")
        }
        _ = curl_easy_pause(delegate.easy.raw, CURLPAUSE_RECV)
        _ = curl_easy_pause(delegate.easy.raw, CURLPAUSE_CONT)
    }
}
