internal import CCurl
import Foundation
import Serialization
import Synchronization
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The driver thread's state and loop. Confined to that thread.
final class DriverLoop {
    let multi: UnsafeMutableRawPointer
    var share: UnsafeMutableRawPointer
    /// The security policy generation the share's TLS session cache was filled under; nil
    /// until the first transfer (an empty cache needs no replacing, whatever policy the
    /// caller sets between creating the manager and starting the first task).
    var shareSecurityTag: UInt?
    /// Shares replaced after a policy change, freed once no easy handle uses them.
    var retiredShares: [UnsafeMutableRawPointer] = []
    let driver: TransferDriver
    let engine: SessionEngine
    /// The manager's resolution, address, HSTS and alt-svc options, set on each handle.
    let network: NetworkOptions
    // The three tables below, like the delegate's body and metrics, are touched on every
    // request and only by this thread, and no access to one overlaps another (none is passed
    // `inout` into code that reaches it again): `@exclusivity(unchecked)` drops the dynamic
    // check (~80 instructions and a thread-local lookup per access), in every build; the
    // compiler's static exclusivity checks still apply.
    @exclusivity(unchecked) var delegates = DelegateTable()
    /// The completions of the current pass of the loop (`run`), sent at its end.
    let completions: CompletionBatch<SessionEngine.FinishedTransfer>
    /// The array the response heads, bodies and metrics this thread made are taken into, when
    /// the completion queue hands them back to be freed here (`collectReturnedAllocations`).
    @exclusivity(unchecked) private var returnedParts: [AllocationReturn.Parts] = []
    /// The time of the current pass, for the transfers' activity marks.
    let passClock = TaskDelegate.PassClock()
    /// The commands taken from the inbox in the current pass (`TransferDriver.drain(into:)`).
    @exclusivity(unchecked) private var commands: [TransferDriver.Command] = []
    /// Per-origin slots for non-multiplexed transfers, so priority orders the waiting ones.
    @exclusivity(unchecked) var admission: HostAdmission
    /// Retries waiting for their time, and the earliest of them (`.max`: none).
    var scheduledRetries: [(deadline: UInt64, delegate: TaskDelegate)] = []
    var nextRetry: UInt64 = .max
    @exclusivity(unchecked) var idleHandles: [EasyHandle] = []
    var shutdownRequests: [@Sendable () -> Void] = []
    /// When the timeouts are checked next (uptime ns; `.max`: no transfer has a deadline).
    var nextTimeoutCheck: UInt64 = .max
    /// When the oldest waiting state notice is due (`StateNotices.flushIfDue`; `.max`: none).
    var nextNoticeCheck: UInt64 = .max
    /// Deadlines are checked at most this often, so thousands of transfers cost one scan
    /// per interval, and a timeout fires within this much of its deadline.
    let timeoutCheckInterval: UInt64 = 50_000_000
    /// Easy handles kept for reuse; more are freed as transfers end.
    let idleHandleLimit = 256
    /// The size of libcurl's connection cache, grown with the most transfers held at once
    /// (`start`): libcurl's default shrank it whenever transfers were between a completion
    /// and the next request, closing connections the next requests then opened again.
    /// Driver thread only, read and changed once per start: unchecked like `delegates`.
    @exclusivity(unchecked) var connectionCacheLimit = ConnectionCacheLimit()

    init?(multi: UnsafeMutableRawPointer, driver: TransferDriver, engine: SessionEngine) {
        let sharesHSTS = NetworkOptions.sharesHSTS(engine.configuration)
        guard let share = DriverLoop.makeShare(hsts: sharesHSTS) else { return nil }
        network = NetworkOptions(engine.configuration)
        if let cookieShare = engine.cookieShare, cookieShare.sharesHSTS, !cookieShare.claimHSTS(by: ObjectIdentifier(engine)) {
            network.refuse(.invalidConfiguration(
                "the cookie jar holds another manager's HSTS cache, which libcurl cannot share between threads: "
                    + "give this manager a jar of its own"))
        }
        self.multi = multi
        self.share = share
        self.driver = driver
        self.engine = engine
        let allocationReturn = engine.allocationReturn
        completions = CompletionBatch(
            deliver: { finished in engine.deliverCompletion(of: finished) },
            delivered: { finished in allocationReturn.handBack(finished) })
        let configuration = engine.configuration
        admission = HostAdmission(limit: configuration.httpMaximumConnectionsPerHost)
        _ = curlew_multi_setopt_long(multi, CURLMOPT_MAX_HOST_CONNECTIONS, max(0, configuration.httpMaximumConnectionsPerHost))
        _ = curlew_multi_setopt_long(multi, CURLMOPT_MAX_TOTAL_CONNECTIONS, max(0, configuration.httpMaximumConnections))
        _ = curlew_multi_setopt_long(multi, CURLMOPT_PIPELINING, Int(CURLPIPE_MULTIPLEX))
        _ = curlew_multi_setopt_long(multi, CURLMOPT_MAXCONNECTS, connectionCacheLimit.limit)
    }

    /// A DNS + TLS session cache, and the HSTS cache when the manager keeps one. Used from
    /// this thread only, so it needs no lock callbacks (and libcurl 7.88 could not share HSTS
    /// between threads anyway: it takes no lock for it).
    static func makeShare(hsts: Bool) -> UnsafeMutableRawPointer? {
        guard let share = curl_share_init() else { return nil }
        _ = curlew_share_setopt_long(share, CURLSHOPT_SHARE, Int(CURL_LOCK_DATA_DNS.rawValue))
        _ = curlew_share_setopt_long(share, CURLSHOPT_SHARE, Int(CURL_LOCK_DATA_SSL_SESSION.rawValue))
        if hsts, curlew_share_setopt_long(share, CURLSHOPT_SHARE, Int(CURL_LOCK_DATA_HSTS.rawValue)) != CURLSHE_OK {
            curl_share_cleanup(share)
            return nil
        }
        return share
    }

    /// Whether the share this manager's handles join holds an HSTS cache: the driver's own
    /// when the configuration keeps one; a cookie jar's only when the manager made the jar.
    var shareHoldsHSTS: Bool {
        if let cookieShare = engine.cookieShare { return cookieShare.sharesHSTS }
        return NetworkOptions.sharesHSTS(engine.configuration)
    }

    /// After a security policy change, new transfers get a new, empty TLS session cache:
    /// sessions verified under the old policy are never offered again. (The per-request
    /// admission check refuses them anyway; this keeps them from costing a retry.)
    func refreshShareIfPolicyChanged() {
        let tag = engine.security.tag
        guard let filledUnder = shareSecurityTag else {
            shareSecurityTag = tag
            return
        }
        guard tag != filledUnder, engine.security.replacesSessionCacheOnPolicyChange.load(ordering: .relaxed)
        else { return }
        if let cookieShare = engine.cookieShare {
            // The jar's share also holds the cookies (and may serve other managers): it is
            // replaced, cookies carried over, once no transfer uses it; until then this is
            // retried at each start, and the admission check refuses stale sessions.
            guard cookieShare.replaceSessionCachesIfIdle() else { return }
            // This driver's pooled handles still point at the replaced share; they leave it
            // now, so it is freed at once instead of when the last of them is used again.
            // (Another manager's pooled handles let go of it at their next transfer.)
            for easy in idleHandles { cookieShare.leave(easy) }
            network.shareReplaced()
            shareSecurityTag = tag
            engine.security.count { $0.sessionCacheReplacements += 1 }
            return
        }
        guard let fresh = DriverLoop.makeShare(hsts: NetworkOptions.sharesHSTS(engine.configuration)) else { return }
        network.shareReplaced()
        shareSecurityTag = tag
        retiredShares.append(share)
        share = fresh
        engine.security.count { $0.sessionCacheReplacements += 1 }
        for easy in idleHandles {
            easy.set(CURLOPT_SHARE, pointer: nil)
            easy.joinedShare = nil
        }
        cleanUpRetiredShares()
    }

    /// Frees retired shares no easy handle uses any more (curl refuses while one does).
    func cleanUpRetiredShares() {
        retiredShares.removeAll { curl_share_cleanup($0) == CURLSHE_OK }
    }

    func run() {
        var running: Int32 = 0
        while true {
            passClock.now = TaskDelegate.uptime
            collectReturnedAllocations(accepting: true)
            driver.drain(into: &commands)
            if !commands.isEmpty {
                for command in commands { handle(command) }
                commands.removeAll(keepingCapacity: true)  // its own storage again: no allocation
            }
            if !shutdownRequests.isEmpty && delegates.isEmpty {
                completions.flush()  // before the shutdown is answered
                _ = engine.stateNotices.flushIfDue(now: .max, on: engine.completionQueue)
                collectReturnedAllocations(accepting: false)
                teardown()
                return
            }
            _ = curl_multi_perform(multi, &running)
            if passClock.startedDeadline != .max {
                // Idle clocks that began to run in this pass (a transfer got its connection).
                nextTimeoutCheck = min(nextTimeoutCheck, passClock.startedDeadline)
                passClock.startedDeadline = .max
            }
            readCompletions()
            enforceTimeouts()
            startDueRetries()
            completions.flush()
            // After the completions: a notice they carry is posted by their delivery.
            nextNoticeCheck = engine.stateNotices.flushIfDue(now: passClock.now, on: engine.completionQueue).nextCheck
            if driver.hasPendingCommands { continue }
            // Without transfers the sleep may be long: nothing handed back may wait through it.
            if delegates.isEmpty { collectReturnedAllocations(accepting: false) }
            // Blocks until a socket is ready, curl's next timeout, our next deadline, or a
            // wakeup. With no transfers there is no deadline: this sleeps until the next command.
            _ = curl_multi_poll(multi, nil, 0, pollTimeout(), nil)
        }
    }

    /// Frees here what the completion queue handed back (`AllocationReturn`), and says whether
    /// it may hand back more until the next call.
    ///
    /// While accepting, what is taken is freed at the next call, a pass later: a completion
    /// block hands its parts back before its own references to them go (with the block), so
    /// parts taken at once would often be let go here first and freed there after all.
    private func collectReturnedAllocations(accepting: Bool) {
        if !returnedParts.isEmpty { returnedParts.removeAll(keepingCapacity: true) }
        engine.allocationReturn.collect(into: &returnedParts, accepting: accepting)
        if !accepting && !returnedParts.isEmpty { returnedParts.removeAll(keepingCapacity: true) }
    }

    // MARK: - Timeouts

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

    // MARK: - Commands

    func handle(_ command: TransferDriver.Command) {
        switch command {
        case .start(let task):
            start(task)
        case .cancel(let task, let error):
            guard let delegate = delegates[task] else {
                // Not (or no longer) running here: complete it if nobody else will.
                engine.complete(task, outcome: TransferOutcome(error: error, request: task.currentRequest), batch: completions)
                return
            }
            finish(delegate, outcome: outcome(of: delegate, error: error))
        case .pause(let task):
            guard let delegate = delegates[task] else { return }
            // A suspended task is not subject to the idle timeout (as URLSession's).
            if delegate.state.suspend(now: TaskDelegate.uptime) { _ = curl_easy_pause(delegate.easy.raw, CURLPAUSE_ALL) }
        case .unpause(let task):
            guard let delegate = delegates[task] else { return }
            let continues = delegate.state.resume(now: TaskDelegate.uptime)
            scheduleTimeoutCheck(for: delegate)
            if continues { _ = curl_easy_pause(delegate.easy.raw, CURLPAUSE_CONT) }
        case .resumeReading(let task):
            guard let delegate = delegates[task],
                delegate.state.consumerCaughtUp(now: TaskDelegate.uptime)  // else `unpause` continues it
            else { return }
            scheduleTimeoutCheck(for: delegate)
            _ = curl_easy_pause(delegate.easy.raw, CURLPAUSE_CONT)
        case .resumeSending(let task):
            guard let delegate = delegates[task], delegate.state.maySend else { return }
            // Clears the receive pause too; the write callback re-pauses if still behind.
            _ = curl_easy_pause(delegate.easy.raw, CURLPAUSE_CONT)
        case .redirectDecision(let task, let proposed, let decision):
            guard let delegate = delegates[task],
                transition(delegate, { $0.redirectAnswered(now: TaskDelegate.uptime) })
            else { return }
            if let decision {
                follow(delegate, to: decision, proposed: proposed)
            } else {
                finish(delegate, outcome: outcome(of: delegate, error: nil))
            }
        case .challengeDecision(let task, let disposition):
            guard let delegate = delegates[task],  // cancelled meanwhile
                transition(delegate, { $0.challengeAnswered(now: TaskDelegate.uptime) })
            else { return }
            switch delegate.resolveChallenge(disposition) {
            case .retry: retry(delegate, otherwise: nil)
            case .fail(let error): finish(delegate, outcome: outcome(of: delegate, error: error))
            case .deliver: finish(delegate, outcome: outcome(of: delegate, error: nil))
            }
        case .responseDecision(let task, let disposition):
            guard let delegate = delegates[task], delegate.state.awaitsResponseDecision else { return }
            if disposition == .becomeDownload, let error = delegate.becomeDownload() {
                finish(delegate, outcome: outcome(of: delegate, error: error))
                return
            }
            let step = transition(delegate) { $0.responseAnswered(cancel: disposition == .cancel, now: TaskDelegate.uptime) }
            switch step {
            case .ignore, .wait:
                // The hook's time is over whether or not the caller suspended meanwhile; only
                // the transfer's continuing waits for `resume()`.
                scheduleTimeoutCheck(for: delegate)
            case .cancel:
                finish(delegate, outcome: outcome(of: delegate, error: .cancelled))
            case .endExchange(let action, let facts):
                // The exchange ended while the hook was deciding: carry out its end now.
                act(on: action, delegate: delegate, facts: facts, challenge: nil, hooks: engine.hooks)
            case .continueTransfer:
                scheduleTimeoutCheck(for: delegate)
                _ = curl_easy_pause(delegate.easy.raw, CURLPAUSE_CONT)
            }
        case .retryDecision(let task, let decision, let adapted):
            guard let delegate = delegates[task],
                case .awaitingDecision(.retrier) = delegate.state.phase
            else { return }
            if decision.asksForAnotherAttempt, let adapted {
                switch adapted {
                case .success(let next): delegate.adopt(next.request, prepared: next.prepared)
                case .failure(let error):
                    finish(delegate, outcome: outcome(of: delegate, error: error))
                    return
                }
            }
            retryDecided(delegate, decision)
        case .connectivityDecision(let task, let returned):
            guard let delegate = delegates[task] else { return }
            connectivityDecided(delegate, returned: returned)
        case .shutdown(let completion):
            shutdownRequests.append(completion)
        }
    }
}
