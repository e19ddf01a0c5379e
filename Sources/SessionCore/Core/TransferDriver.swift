internal import CCurl
import Foundation
import Serialization
import Synchronization
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Runs one curl multi handle on one dedicated thread: the manager's serial driver context.
///
/// Other threads talk to it only through `submit(_:)`, which appends to a locked inbox and
/// wakes `curl_multi_poll` with `curl_multi_wakeup` (documented thread-safe). Everything
/// else — the multi handle, easy handles, share handle, per-task delegates — lives in a
/// `DriverLoop` that is created on the driver thread and never leaves it.
///
/// `curl_multi_poll` + `curl_multi_wakeup` was chosen over `socket_action` by measurement:
/// faster from 64 to 2,000 connections on this class of machine (perf.md §3.1), and it
/// blocks in `poll(2)` with no timeout when idle: 0% CPU.
final class TransferDriver: Sendable {
    /// Work the driver thread performs, in submission order.
    enum Command: Sendable {
        case start(SessionTask)
        case cancel(SessionTask, SessionError)
        case pause(SessionTask)
        case unpause(SessionTask)
        /// Backpressure relief: the consumer drained a streamed body.
        case resumeReading(SessionTask)
        /// The request body's pump has data (or its end) for a read that paused.
        case resumeSending(SessionTask)
        /// The redirection hook answered about the proposed hop: follow the request it
        /// returned, or deliver the 3xx when nil.
        case redirectDecision(SessionTask, RedirectPolicy.Hop, URLRequest?)
        /// The authentication challenge handler answered (server trust or HTTP 401).
        case challengeDecision(SessionTask, AuthChallengeDisposition)
        /// The data task's response hook answered about the delivered response.
        case responseDecision(SessionTask, ResponseDisposition)
        /// The request retrier answered about a failed attempt; with a request adapter, the
        /// request to send next (or why it cannot be sent).
        case retryDecision(SessionTask, RetryDecision, Result<AdaptedRequest, SessionError>?)
        /// Tear down once no transfer is left, then call the closure (from the driver thread).
        case shutdown(@Sendable () -> Void)
    }

    /// The multi handle's address, shared with submitters only for `curl_multi_wakeup`.
    struct MultiPointer: @unchecked Sendable {
        // @unchecked: submitters use it only for curl_multi_wakeup, under the inbox lock and
        // only while `closed` is false; the driver cleans the handle up after setting `closed`.
        let raw: UnsafeMutableRawPointer
    }

    private struct Inbox {
        var commands: [Command] = []
        var closed = false
    }

    private let inbox = Mutex(Inbox())
    private let multi: MultiPointer
    let identifier: Int
    /// The driver thread's kernel id, once it runs (for CPU accounting in tests and tools).
    let threadID = Mutex<Int32?>(nil)

    /// Creates the multi handle and starts the driver thread.
    init(configuration: SessionConfiguration, engine: SessionEngine, identifier: Int) throws(SessionError) {
        if case .failure(let error) = CurlRuntime.state { throw error }
        guard let handle = curl_multi_init() else {
            throw .curl(code: Int(CURLM_OUT_OF_MEMORY.rawValue), message: "curl_multi_init failed")
        }
        multi = MultiPointer(raw: handle)
        self.identifier = identifier
        let multi = self.multi
        let thread = Thread { [self] in
            threadID.withLock { $0 = TransferDriver.currentThreadID() }
            engine.debugLog?.debug("driver curlew.drv.\(identifier) started")
            // The loop and everything it owns are born here and die here.
            guard let loop = DriverLoop(multi: multi.raw, driver: self, engine: engine) else {
                self.failAll(engine: engine)
                return
            }
            loop.run()
        }
        thread.name = "curlew.drv.\(identifier)"  // Linux thread names hold 15 bytes
        thread.start()
    }

    /// The calling thread's kernel id: "/proc/thread-self" links to "PID/task/TID"
    /// (gettid(2) is not exported by Glibc's Swift module).
    static func currentThreadID() -> Int32? {
        guard let target = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/thread-self") else { return nil }
        return target.split(separator: "/").last.flatMap { Int32($0) }
    }

    /// Queues a command for the driver thread. Returns false once the driver has shut down.
    ///
    /// Only the command that makes the inbox non-empty wakes the driver (a write to curl's
    /// wakeup pipe, and a poll(2) return): the driver drains the whole inbox at once and
    /// checks it again before it sleeps, so later commands ride on that wakeup.
    @discardableResult
    func submit(_ command: Command) -> Bool {
        inbox.withLock { inbox in
            guard !inbox.closed else { return false }
            inbox.commands.append(command)
            if inbox.commands.count == 1 { _ = curl_multi_wakeup(multi.raw) }
            return true
        }
    }

    /// Takes every queued command (driver thread).
    func drain() -> [Command] {
        inbox.withLock { inbox in
            guard !inbox.commands.isEmpty else { return [] }
            defer { inbox.commands.removeAll(keepingCapacity: true) }
            return inbox.commands
        }
    }

    var hasPendingCommands: Bool { inbox.withLock { !$0.commands.isEmpty } }

    /// Refuses further commands and returns the ones that arrived meanwhile (driver thread,
    /// just before `curl_multi_cleanup`).
    func close() -> [Command] {
        inbox.withLock { inbox in
            inbox.closed = true
            defer { inbox.commands.removeAll() }
            return inbox.commands
        }
    }

    /// The driver could not even set up: every command fails.
    private func failAll(engine: SessionEngine) {
        for command in close() {
            DriverLoop.reject(command, engine: engine)
        }
        curl_multi_cleanup(multi.raw)
    }
}

/// The driver thread's state and loop. Confined to that thread.
final class DriverLoop {
    private let multi: UnsafeMutableRawPointer
    private var share: UnsafeMutableRawPointer
    /// The security policy generation the share's TLS session cache was filled under; nil
    /// until the first transfer (an empty cache needs no replacing, whatever policy the
    /// caller sets between creating the manager and starting the first task).
    private var shareSecurityTag: UInt?
    /// Shares replaced after a policy change, freed once no easy handle uses them.
    private var retiredShares: [UnsafeMutableRawPointer] = []
    private let driver: TransferDriver
    private let engine: SessionEngine
    // The three tables below, like the delegate's body and metrics, are touched on every
    // request and only by this thread, and no access to one overlaps another (none is passed
    // `inout` into code that reaches it again): `@exclusivity(unchecked)` drops the dynamic
    // check (~80 instructions and a thread-local lookup per access), in every build; the
    // compiler's static exclusivity checks still apply.
    @exclusivity(unchecked) private var delegates: [ObjectIdentifier: TaskDelegate] = [:]
    /// The completions of the current pass of the loop (`run`), sent at its end.
    private let completions = CompletionBatch()
    /// The time of the current pass, for the transfers' activity marks.
    private let passClock = TaskDelegate.PassClock()
    /// Per-origin slots for non-multiplexed transfers, so priority orders the waiting ones.
    @exclusivity(unchecked) private var admission: HostAdmission
    /// Retries waiting for their time, and the earliest of them (`.max`: none).
    private var scheduledRetries: [(deadline: UInt64, delegate: TaskDelegate)] = []
    private var nextRetry: UInt64 = .max
    @exclusivity(unchecked) private var idleHandles: [EasyHandle] = []
    private var shutdownRequests: [@Sendable () -> Void] = []
    /// When the timeouts are checked next (uptime ns; `.max`: no transfer has a deadline).
    private var nextTimeoutCheck: UInt64 = .max
    /// Deadlines are checked at most this often, so thousands of transfers cost one scan
    /// per interval, and a timeout fires within this much of its deadline.
    private let timeoutCheckInterval: UInt64 = 50_000_000
    /// Easy handles kept for reuse; more are freed as transfers end.
    private let idleHandleLimit = 256

    init?(multi: UnsafeMutableRawPointer, driver: TransferDriver, engine: SessionEngine) {
        guard let share = DriverLoop.makeShare() else { return nil }
        self.multi = multi
        self.share = share
        self.driver = driver
        self.engine = engine
        let configuration = engine.configuration
        admission = HostAdmission(limit: configuration.httpMaximumConnectionsPerHost)
        _ = curlew_multi_setopt_long(multi, CURLMOPT_MAX_HOST_CONNECTIONS, max(0, configuration.httpMaximumConnectionsPerHost))
        _ = curlew_multi_setopt_long(multi, CURLMOPT_MAX_TOTAL_CONNECTIONS, max(0, configuration.httpMaximumConnections))
        _ = curlew_multi_setopt_long(multi, CURLMOPT_PIPELINING, Int(CURLPIPE_MULTIPLEX))
    }

    /// A DNS + TLS session cache. Used from this thread only, so it needs no lock callbacks.
    private static func makeShare() -> UnsafeMutableRawPointer? {
        guard let share = curl_share_init() else { return nil }
        _ = curlew_share_setopt_long(share, CURLSHOPT_SHARE, Int(CURL_LOCK_DATA_DNS.rawValue))
        _ = curlew_share_setopt_long(share, CURLSHOPT_SHARE, Int(CURL_LOCK_DATA_SSL_SESSION.rawValue))
        return share
    }

    /// After a security policy change, new transfers get a new, empty TLS session cache:
    /// sessions verified under the old policy are never offered again. (The per-request
    /// admission check refuses them anyway; this keeps them from costing a retry.)
    private func refreshShareIfPolicyChanged() {
        let tag = engine.security.snapshot.tag
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
            shareSecurityTag = tag
            engine.security.count { $0.sessionCacheReplacements += 1 }
            return
        }
        guard let fresh = DriverLoop.makeShare() else { return }
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
    private func cleanUpRetiredShares() {
        retiredShares.removeAll { curl_share_cleanup($0) == CURLSHE_OK }
    }

    func run() {
        var running: Int32 = 0
        while true {
            passClock.now = TaskDelegate.uptime
            for command in driver.drain() { handle(command) }
            if !shutdownRequests.isEmpty && delegates.isEmpty {
                completions.flush()  // before the shutdown is answered
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
            if driver.hasPendingCommands { continue }
            // Blocks until a socket is ready, curl's next timeout, our next deadline, or a
            // wakeup. With no transfers there is no deadline: this sleeps until the next command.
            _ = curl_multi_poll(multi, nil, 0, pollTimeout(), nil)
        }
    }

    // MARK: - Timeouts

    /// Milliseconds until the next timeout check, for `curl_multi_poll`.
    private func pollTimeout() -> Int32 {
        let next = min(nextTimeoutCheck, nextRetry)
        guard next != .max else { return Int32.max }
        let now = TaskDelegate.uptime
        guard next > now else { return 0 }
        let milliseconds = (next - now + 999_999) / 1_000_000
        return Int32(clamping: milliseconds)
    }

    /// Makes sure the next check comes no later than `delegate`'s deadline.
    private func scheduleTimeoutCheck(for delegate: TaskDelegate) {
        guard let deadline = delegate.clock.nextDeadline else { return }
        nextTimeoutCheck = min(nextTimeoutCheck, deadline)
    }

    /// Fails every transfer whose idle or total clock ran out; schedules the next check at
    /// the earliest remaining deadline (activity only moves deadlines later, so none is missed).
    private func enforceTimeouts() {
        let now = TaskDelegate.uptime
        guard now >= nextTimeoutCheck else { return }
        var earliest = UInt64.max
        var expired: [(TaskDelegate, TransferClock.Expiry)] = []
        for delegate in delegates.values {
            if let expiry = delegate.clock.expiry(at: now) {
                expired.append((delegate, expiry))
            } else if let deadline = delegate.clock.nextDeadline {
                earliest = min(earliest, deadline)
            }
        }
        nextTimeoutCheck = earliest == .max ? .max : max(earliest, now + timeoutCheckInterval)
        for (delegate, expiry) in expired {
            // Finished meanwhile by an earlier one of these (a slot passing on cannot finish
            // another, but stay safe).
            guard delegates[ObjectIdentifier(delegate.task)] === delegate else { continue }
            switch expiry {
            case .idle(let error):
                // This attempt failed; the retrier may send another (its clock restarts), and
                // the task's metrics list this attempt as they list every other.
                if delegate.isAttached { delegate.collectMetrics() }
                endAttempt(delegate, error: error)
            case .total(let error):
                finish(delegate, outcome: outcome(of: delegate, error: error))
            }
        }
    }

    // MARK: - Commands

    private func handle(_ command: TransferDriver.Command) {
        switch command {
        case .start(let task):
            start(task)
        case .cancel(let task, let error):
            guard let delegate = delegates[ObjectIdentifier(task)] else {
                // Not (or no longer) running here: complete it if nobody else will.
                engine.complete(task, outcome: TransferOutcome(error: error, request: task.currentRequest), batch: completions)
                return
            }
            finish(delegate, outcome: outcome(of: delegate, error: error))
        case .pause(let task):
            guard let delegate = delegates[ObjectIdentifier(task)] else { return }
            delegate.isSuspendedByCaller = true
            // A suspended task is not subject to the idle timeout (as URLSession's).
            delegate.clock.hold(.suspended)
            if delegate.isAttached { _ = curl_easy_pause(delegate.easy.raw, CURLPAUSE_ALL) }
        case .unpause(let task):
            guard let delegate = delegates[ObjectIdentifier(task)] else { return }
            delegate.isSuspendedByCaller = false
            // A backpressure pause that ended while suspended was not lifted (`resumeReading`
            // leaves a suspended transfer paused): the write callback holds again if the
            // consumer is still behind.
            delegate.clock.release(.backpressure, at: TaskDelegate.uptime)
            delegate.clock.release(.suspended, at: TaskDelegate.uptime)
            scheduleTimeoutCheck(for: delegate)
            if delegate.isAttached { _ = curl_easy_pause(delegate.easy.raw, CURLPAUSE_CONT) }
        case .resumeReading(let task):
            guard let delegate = delegates[ObjectIdentifier(task)], delegate.isAttached else { return }
            delegate.clock.release(.backpressure, at: TaskDelegate.uptime)
            guard !delegate.isSuspendedByCaller else { return }  // `unpause` continues it
            scheduleTimeoutCheck(for: delegate)
            _ = curl_easy_pause(delegate.easy.raw, CURLPAUSE_CONT)
        case .resumeSending(let task):
            guard let delegate = delegates[ObjectIdentifier(task)], delegate.isAttached,
                !delegate.isSuspendedByCaller
            else { return }
            // Clears the receive pause too; the write callback re-pauses if still behind.
            _ = curl_easy_pause(delegate.easy.raw, CURLPAUSE_CONT)
        case .redirectDecision(let task, let proposed, let decision):
            guard let delegate = delegates[ObjectIdentifier(task)] else { return }
            if let decision {
                follow(delegate, to: decision, proposed: proposed)
            } else {
                finish(delegate, outcome: outcome(of: delegate, error: nil))
            }
        case .challengeDecision(let task, let disposition):
            guard let delegate = delegates[ObjectIdentifier(task)] else { return }  // cancelled meanwhile
            switch delegate.resolveChallenge(disposition) {
            case .retry: retry(delegate, otherwise: nil)
            case .fail(let error): finish(delegate, outcome: outcome(of: delegate, error: error))
            case .deliver: finish(delegate, outcome: outcome(of: delegate, error: nil))
            }
        case .responseDecision(let task, let disposition):
            guard let delegate = delegates[ObjectIdentifier(task)], delegate.awaitsResponseDecision else { return }
            delegate.awaitsResponseDecision = false
            if disposition == .becomeDownload, let error = delegate.becomeDownload() {
                finish(delegate, outcome: outcome(of: delegate, error: error))
                return
            }
            switch disposition {
            case .cancel:
                finish(delegate, outcome: outcome(of: delegate, error: .cancelled))
            case .allow, .becomeDownload:
                if var facts = delegate.pendingEndFacts {
                    // The exchange ended while the hook was deciding: carry out its end now.
                    delegate.pendingEndFacts = nil
                    facts.awaitsResponseDecision = false
                    act(on: TransferEnd.decide(facts), delegate: delegate, facts: facts, challenge: nil, hooks: engine.hooks)
                } else {
                    // The hook's time is over whether or not the caller suspended meanwhile;
                    // only the transfer's continuing waits for `resume()`.
                    delegate.clock.release(.decision, at: TaskDelegate.uptime)
                    scheduleTimeoutCheck(for: delegate)
                    if delegate.isAttached, !delegate.isSuspendedByCaller {
                        _ = curl_easy_pause(delegate.easy.raw, CURLPAUSE_CONT)
                    }
                }
            }
        case .retryDecision(let task, let decision, let adapted):
            guard let delegate = delegates[ObjectIdentifier(task)], delegate.awaitsRetryDecision else { return }
            delegate.awaitsRetryDecision = false
            if decision != .doNotRetry, let adapted {
                switch adapted {
                case .success(let next): delegate.adopt(next.request, prepared: next.prepared)
                case .failure(let error):
                    finish(delegate, outcome: outcome(of: delegate, error: error))
                    return
                }
            }
            switch decision {
            case .doNotRetry:
                finish(delegate, outcome: outcome(of: delegate, error: delegate.pendingFinishError))
            case .retry:
                noteRetry(of: delegate, after: 0)
                retryAfterFailure(delegate)
            case .retryAfter(let seconds):
                if seconds == 0 {
                    noteRetry(of: delegate, after: 0)
                    retryAfterFailure(delegate)
                } else if seconds > 0, let wait = TransferTimeouts.nanoseconds(seconds) {
                    noteRetry(of: delegate, after: seconds)
                    let deadline = TaskDelegate.uptime + wait
                    scheduledRetries.append((deadline, delegate))
                    nextRetry = min(nextRetry, deadline)
                } else {
                    finish(delegate, outcome: outcome(of: delegate, error: delegate.pendingFinishError))
                }
            }
        case .shutdown(let completion):
            shutdownRequests.append(completion)
        }
    }

    // MARK: - Retries

    /// An attempt ended (with `error`, or nil: with its response): the retrier decides
    /// whether another follows, else the task completes. Every failed attempt goes through
    /// here, an idle timeout included, so one rule decides them all.
    private func endAttempt(_ delegate: TaskDelegate, error: SessionError?) {
        if let retrier = engine.requestRetrier, asksRetrier(delegate, error: error) {
            askRetrier(retrier, delegate: delegate, error: error)
            return
        }
        finish(delegate, outcome: outcome(of: delegate, error: error))
    }

    /// Whether the retrier is asked about an attempt that ended this way: an error other than
    /// a cancellation, or a status of 400 or more; never once body bytes went to user code or
    /// when the request body cannot be sent again.
    private func asksRetrier(_ delegate: TaskDelegate, error: SessionError?) -> Bool {
        if let error, error == .cancelled || error == .sessionInvalidated { return false }
        guard error != nil || (delegate.responseHead?.statusCode ?? 0) >= 400 else { return false }
        return !delegate.hasStreamedBody && delegate.canReplayBody
    }

    /// Detaches the transfer and asks the retrier on the operation queue (user code never runs
    /// here); the answer comes back as `.retryDecision`.
    private func askRetrier(_ retrier: any RequestRetrier, delegate: TaskDelegate, error: SessionError?) {
        detach(delegate)
        delegate.awaitsRetryDecision = true
        delegate.pendingFinishError = error
        delegate.clock.hold(.decision)  // not the server's silence
        let task = delegate.task
        let head = delegate.responseHead
        let attempt = delegate.retryCount
        let current = delegate.request
        // After a redirect to another origin, the configuration's credentials stay behind on
        // retries too (the adapted request is prepared as the redirect's was).
        let omitsCredentials = delegate.hasCrossedOrigin
        let driver = self.driver
        let engine = self.engine
        engine.operationQueue.async {
            let decision = retrier.retry(task, attempt: attempt, error: error, response: head?.httpURLResponse)
            var adapted: Result<AdaptedRequest, SessionError>?
            if decision != .doNotRetry, let adapter = engine.requestAdapter {
                let request = adapter.adapt(current, attempt: attempt + 1)
                adapted = Result { () throws(SessionError) -> AdaptedRequest in
                    AdaptedRequest(
                        request: request,
                        prepared: try PreparedRequest.prepare(
                            request, configuration: engine.configuration, omittingCredentials: omitsCredentials,
                            urls: engine.parsedURLs))
                }
            }
            driver.submit(.retryDecision(task, decision, adapted))
        }
    }

    /// Tells the monitors and the engine's log that a retry follows (before its `willSend`).
    private func noteRetry(of delegate: TaskDelegate, after delay: TimeInterval) {
        if let hub = engine.monitorHub {
            hub.emit(.willRetry(delegate.task, delay, delegate.pendingFinishError, delegate.responseHead))
        }
        if let log = engine.debugLog {
            let reason = delegate.pendingFinishError.map { "\($0)" } ?? "status \(delegate.responseHead?.statusCode ?? 0)"
            log.debug("task #\(delegate.task.taskIdentifier) retries in \(delay) s (attempt \(delegate.retryCount + 1)) after \(reason)")
        }
    }

    /// Sends the request again on the same delegate: the task keeps its identity and handlers.
    private func retryAfterFailure(_ delegate: TaskDelegate) {
        delegate.retryCount += 1
        let error = delegate.pendingFinishError
        delegate.pendingFinishError = nil
        // The wait is over: `attach` lifts the decision hold, so the new attempt's silence
        // counts again once it has a connection (unless the caller suspended the task).
        retry(delegate, otherwise: error)
    }

    /// Starts the retries whose wait is over (driver loop).
    private func startDueRetries() {
        let now = TaskDelegate.uptime
        guard now >= nextRetry else { return }
        var due: [TaskDelegate] = []
        var earliest = UInt64.max
        scheduledRetries.removeAll { entry in
            // A task cancelled or timed out meanwhile is no longer in `delegates`.
            guard delegates[ObjectIdentifier(entry.delegate.task)] === entry.delegate else { return true }
            if entry.deadline <= now {
                due.append(entry.delegate)
                return true
            }
            earliest = min(earliest, entry.deadline)
            return false
        }
        nextRetry = earliest
        for delegate in due { retryAfterFailure(delegate) }
    }

    static func reject(_ command: TransferDriver.Command, engine: SessionEngine) {
        switch command {
        case .start(let task), .cancel(let task, _), .redirectDecision(let task, _, _), .challengeDecision(let task, _):
            engine.complete(task, outcome: TransferOutcome(error: .sessionInvalidated, request: task.currentRequest))
        case .shutdown(let completion):
            completion()
        case .pause, .unpause, .resumeReading, .resumeSending, .responseDecision, .retryDecision:
            break
        }
    }

    private func start(_ task: SessionTask) {
        guard let prepared = task.takePrepared() else { return }  // cancelled meanwhile
        // A pooled handle was recycled (reset, or kept as it was when its last transfer set
        // only the options every transfer sets again); a new one has nothing to reset.
        guard let easy = idleHandles.popLast() ?? EasyHandle() else {
            engine.complete(
                task, outcome: TransferOutcome(error: .curl(code: 27, message: "curl_easy_init failed"), request: task.currentRequest),
                batch: completions)
            return
        }
        let delegate: TaskDelegate
        do {
            delegate = try TaskDelegate(task: task, easy: easy, engine: engine, prepared: prepared, passClock: passClock)
        } catch {
            recycle(easy)
            engine.complete(task, outcome: TransferOutcome(error: error, request: task.currentRequest), batch: completions)
            return
        }
        delegates[ObjectIdentifier(task)] = delegate
        delegate.unmanagedSelf = Unmanaged.passRetained(delegate).toOpaque()
        attach(delegate)
    }

    /// Puts the transfer into curl: first its origin's connection slot when it counts against
    /// `httpMaximumConnectionsPerHost` (in line, not attached, when none is free).
    ///
    /// The slot follows attachment: a transfer holds one exactly while it is in curl, so a
    /// transfer that waits detached (a retry's back-off, the retrier, the challenge handler,
    /// a redirect or response hook) leaves it to the next in line, and a redirect to another
    /// origin counts against that origin. Until libcurl resolves, connects or hands it a
    /// connection (`CurlCallbacks.connecting`), the transfer's idle clock is held: waiting
    /// for a connection under Curlew's or libcurl's limits is not the server's silence.
    private func attach(_ delegate: TaskDelegate) {
        let now = TaskDelegate.uptime
        delegate.clock.hold(.noConnection)
        delegate.clock.release(.decision, at: now)
        if delegate.admissionOrigin == nil, engine.configuration.httpMaximumConnectionsPerHost > 0,
            !PreparedRequest.canMultiplex(delegate.prepared.urlOrigin, version: engine.configuration.httpVersion)
        {
            let (origin, admitted) = admission.admit(delegate, key: delegate.prepared.urlOrigin.origin)
            delegate.admissionOrigin = origin
            guard admitted else {
                delegate.isWaitingForSlot = true
                if let log = engine.debugLog {
                    log.debug("task #\(delegate.task.taskIdentifier) waits for a connection slot to \(delegate.prepared.urlOrigin.origin)")
                }
                return
            }
        }
        connect(delegate)
    }

    /// Adds the transfer, which holds its slot if it needs one, to the multi handle.
    private func connect(_ delegate: TaskDelegate) {
        refreshShareIfPolicyChanged()
        if let error = delegate.configure(share: share) {
            finish(delegate, outcome: outcome(of: delegate, error: error))
            return
        }
        let code = curl_multi_add_handle(multi, delegate.easy.raw)
        guard code == CURLM_OK else {
            let message = String(cString: curl_multi_strerror(code))
            finish(delegate, outcome: outcome(of: delegate, error: .curl(code: Int(code.rawValue), message: message)))
            return
        }
        delegate.isAttached = true
        if let hub = engine.monitorHub { hub.emit(.willSend(delegate.task, delegate.request)) }
        // Time spent detached (waiting for a hook) is not the server's silence.
        delegate.clock.noteActivity(at: TaskDelegate.uptime)
        scheduleTimeoutCheck(for: delegate)
        // Suspended before it started, or while it waited detached for a redirect or
        // challenge decision. libcurl forgets a pause set before the transfer starts, so the
        // flag is what holds it: the read and write callbacks pause on it.
        if delegate.task.state == .suspended {
            delegate.isSuspendedByCaller = true
            delegate.clock.hold(.suspended)
        }
    }

    /// Takes the transfer out of curl and gives up its connection slot (or its place in line).
    private func detach(_ delegate: TaskDelegate) {
        if delegate.isAttached {
            _ = curl_multi_remove_handle(multi, delegate.easy.raw)
            delegate.isAttached = false
        }
        releaseSlot(of: delegate)
    }

    /// Frees `delegate`'s slot for the next transfer in line at its origin, which starts now.
    private func releaseSlot(of delegate: TaskDelegate) {
        guard let origin = delegate.admissionOrigin else { return }
        delegate.admissionOrigin = nil
        if delegate.isWaitingForSlot {
            delegate.isWaitingForSlot = false
            admission.withdraw(delegate, from: origin)
        } else if let next = admission.release(origin) {
            next.isWaitingForSlot = false
            connect(next)  // the slot passed to it (`release` kept the count)
        }
    }

    // MARK: - Completion

    private func readCompletions() {
        var remaining: Int32 = 0
        while let message = curl_multi_info_read(multi, &remaining) {
            guard message.pointee.msg == CURLMSG_DONE, let handle = message.pointee.easy_handle else { continue }
            let code = message.pointee.data.result
            var pointer: UnsafeMutableRawPointer?
            guard curlew_easy_getinfo_pointer(handle, CURLINFO_PRIVATE, &pointer) == CURLE_OK,
                let delegate = CurlCallbacks.delegate(pointer)
            else { continue }
            transferDidEnd(delegate, code: code)
        }
    }

    /// One exchange ended: gather the facts, let `TransferEnd.decide` choose, carry it out.
    private func transferDidEnd(_ delegate: TaskDelegate, code: CURLcode) {
        delegate.collectMetrics()
        let hooks = engine.hooks
        var facts = TransferEnd.Facts()
        facts.error = delegate.error(for: code)
        facts.refusedStaleConnection = delegate.shouldRetryOnFreshConnection(code: code)
        // Asked only when it can matter: taking a challenge counts an attempt.
        let answerable = hooks.authenticationChallenge != nil || !engine.credentialStore.isEmpty
        let challenge = facts.refusedStaleConnection || !answerable ? nil : delegate.takePendingChallenge(code: code)
        facts.hasChallengeForHandler = challenge != nil
        facts.head = delegate.headDisposition
        facts.redirectCount = delegate.redirectCount
        facts.maximumRedirects = engine.configuration.maximumRedirects
        facts.canReplayBody = delegate.canReplayBody
        facts.hasRedirectHook = hooks.redirect != nil
        facts.awaitsResponseDecision = delegate.awaitsResponseDecision
        facts.needsFullDownload = delegate.download?.needsFullRestart ?? false
        act(on: TransferEnd.decide(facts), delegate: delegate, facts: facts, challenge: challenge, hooks: hooks)
    }

    /// Carries out what `TransferEnd.decide` chose for an exchange that ended.
    private func act(
        on action: TransferEnd.Action, delegate: TaskDelegate, facts: TransferEnd.Facts,
        challenge: PendingChallenge?, hooks: SessionEngine.Hooks
    ) {
        switch action {
        case .finish(let error):
            endAttempt(delegate, error: error)
        case .retryOnFreshConnection:
            // Refused before sending because the connection or TLS session was verified under
            // another security policy: once more on a new connection, judged by the current one.
            retry(delegate, otherwise: facts.error)
        case .askChallengeHandler:
            if let challenge, let stored = delegate.storedCredential(for: challenge) {
                // The session remembers an answer for this protection space.
                switch delegate.resolveChallenge(.useCredential(stored)) {
                case .retry: retry(delegate, otherwise: nil)
                case .fail(let error): finish(delegate, outcome: outcome(of: delegate, error: error))
                case .deliver: finish(delegate, outcome: outcome(of: delegate, error: nil))
                }
                return
            }
            guard let challenge, let hook = hooks.authenticationChallenge else {
                finish(delegate, outcome: outcome(of: delegate, error: facts.error))
                return
            }
            // User code never runs on the driver: the handler answers on the operation
            // queue, and the transfer waits detached (nothing of it is on the wire).
            detach(delegate)
            delegate.clock.hold(.decision)
            let task = delegate.task
            let driver = self.driver
            engine.operationQueue.async {
                let disposition = hook(task, challenge.makeChallenge())
                driver.submit(.challengeDecision(task, disposition))
            }
        case .follow(let hop):
            follow(delegate, to: hop.request, proposed: hop)
        case .restartDownloadFromZero:
            delegate.download?.restartWithoutRange()  // nothing is cut before the new answer's body
            retry(delegate, otherwise: nil)
        case .waitForResponseDecision:
            detach(delegate)  // the connection goes back to the pool meanwhile
            delegate.pendingEndFacts = facts
            delegate.clock.hold(.decision)  // the hook's time
        case .askRedirectHook(let hop):
            guard let hook = hooks.redirect, let head = delegate.responseHead else {
                follow(delegate, to: hop.request, proposed: hop)
                return
            }
            detach(delegate)
            delegate.clock.hold(.decision)
            let task = delegate.task
            let driver = self.driver
            engine.operationQueue.async {
                // Foundation's response is built here, off the driver thread.
                let decision = head.httpURLResponse.map { hook(task, $0, hop.request) } ?? hop.request
                driver.submit(.redirectDecision(task, hop, decision))
            }
        }
    }

    /// Sends the next hop of a redirect chain on the same delegate and easy handle.
    ///
    /// `request` is what will be sent (the proposed hop, or what the redirection hook
    /// returned). The body goes along when the hop keeps it, unless the hook gave the request
    /// a body of its own.
    private func follow(_ delegate: TaskDelegate, to request: URLRequest, proposed: RedirectPolicy.Hop) {
        let redirectHead = delegate.responseHead  // `restart` forgets it
        if let from = delegate.request.url, let to = request.url, !RedirectPolicy.isSameOrigin(from, to) {
            delegate.hasCrossedOrigin = true
        }
        let hookSetBody = request.httpBody != proposed.request.httpBody
            || request.httpBodyStream !== proposed.request.httpBodyStream
        let body: TaskDelegate.NextBody = proposed.keepsBody && !hookSetBody ? .same : .fromRequest
        do {
            let prepared = try PreparedRequest.prepare(
                request, configuration: engine.configuration, omittingCredentials: delegate.hasCrossedOrigin,
                urls: engine.parsedURLs)
            try delegate.restart(with: request, prepared: prepared, body: body)
        } catch {
            finish(delegate, outcome: outcome(of: delegate, error: error))
            return
        }
        if let hub = engine.monitorHub, let redirectHead { hub.emit(.redirect(delegate.task, redirectHead, request)) }
        detach(delegate)
        delegate.easy.reset()
        attach(delegate)
    }

    /// Sends the same request again on the same delegate (challenge answered, or a stale
    /// connection refused). When the body cannot be replayed, completes with `otherwise`
    /// (nil: the response as received).
    private func retry(_ delegate: TaskDelegate, otherwise error: SessionError?) {
        detach(delegate)
        guard delegate.prepareToRetry() else {
            finish(delegate, outcome: outcome(of: delegate, error: error))
            return
        }
        delegate.easy.reset()
        attach(delegate)
    }

    private func outcome(of delegate: TaskDelegate, error: SessionError?) -> TransferOutcome {
        TransferOutcome(
            error: error, request: delegate.request, head: delegate.responseHead,
            body: error == nil ? delegate.takeBody() : nil, metrics: delegate.metrics)
    }

    /// Removes the transfer from curl, recycles its handle, releases the delegate's retained
    /// reference and hands the outcome to the completion queue.
    private func finish(_ delegate: TaskDelegate, outcome: TransferOutcome) {
        var outcome = outcome
        if delegate.download != nil {
            let (fileURL, resumePoint, error) = delegate.finishDownload(error: outcome.error)
            outcome = outcome.with(fileURL: fileURL, resumePoint: resumePoint, error: error)
        }
        if let hub = engine.monitorHub, outcome.error == nil, let head = outcome.head, delegate.task.responseHead !== head {
            // A response the task completes with but was not told of at its head: a 3xx the
            // redirection hook declined, a 401 nobody answered.
            hub.emit(.received(delegate.task, head))
        }
        detach(delegate)  // and the next transfer in line at its origin starts
        delegates[ObjectIdentifier(delegate.task)] = nil
        recycle(delegate.easy)
        delegate.releaseSecurityContext()
        if let pointer = delegate.unmanagedSelf {
            delegate.unmanagedSelf = nil
            if delegate.easy.transferSlot.pointee == pointer { delegate.easy.transferSlot.pointee = nil }
            Unmanaged<TaskDelegate>.fromOpaque(pointer).release()
        }
        engine.complete(delegate.task, outcome: outcome, batch: completions)
        // The delegate (freed on this thread: it owns the easy handle) holds the only
        // reference to the prepared request; its URL, strings and parsed libcurl URL are
        // freed with the completions instead.
        completions.retire(delegate.prepared)
    }

    private func recycle(_ easy: EasyHandle) {
        guard idleHandles.count < idleHandleLimit else { return }  // freed by deinit
        easy.recycle()
        idleHandles.append(easy)
    }

    /// Frees every curl resource on this thread, then answers the shutdown requests.
    private func teardown() {
        idleHandles.removeAll()  // curl_easy_cleanup in EasyHandle.deinit
        // Commands that raced with shutdown are answered, not dropped.
        for command in driver.close() { DriverLoop.reject(command, engine: engine) }
        curl_multi_cleanup(multi)
        curl_share_cleanup(share)
        cleanUpRetiredShares()
        for request in shutdownRequests { request() }
        shutdownRequests.removeAll()
    }
}

/// A retry's request as the adapter returned it, validated for curl.
struct AdaptedRequest: Sendable {
    let request: URLRequest
    let prepared: PreparedRequest
}
