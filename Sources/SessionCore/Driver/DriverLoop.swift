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

    func run() {
        var running: Int32 = 0
        while true {
            passClock.now = TaskDelegate.uptime
            passClock.beginPass()
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
            if !passClock.answeredWhileSendPaused.isEmpty { liftSendPauses() }
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
            switch delegate.state.resume(now: TaskDelegate.uptime) {
            case .none:
                scheduleTimeoutCheck(for: delegate)
            case .continueTransfer:
                scheduleTimeoutCheck(for: delegate)
                unpause(delegate, CURLPAUSE_CONT)
            case .attach:
                attach(delegate)  // its next exchange waited for this resume
            }
        case .resumeReading(let task):
            guard let delegate = delegates[task],
                delegate.state.consumerCaughtUp(now: TaskDelegate.uptime)  // else `unpause` continues it
            else { return }
            scheduleTimeoutCheck(for: delegate)
            unpause(delegate, CURLPAUSE_CONT)
        case .resumeSending(let task):
            guard let delegate = delegates[task],
                delegate.state.bodyProducerCaughtUp(now: TaskDelegate.uptime)  // else `unpause` continues it
            else { return }
            scheduleTimeoutCheck(for: delegate)
            // Clears the receive pause too; the write callback re-pauses if still behind.
            unpause(delegate, CURLPAUSE_CONT)
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
            if case .cancel = disposition { task.noteCancelledByCaller() }
            switch delegate.resolveChallenge(disposition) {
            case .retry: resend(answering: delegate)
            // Whatever the handler left standing (the 401, a refused server) ends the attempt
            // as it would have without a handler: the retrier is asked about it.
            case .fail(let error): endAttempt(delegate, error: error)
            case .deliver: endAttempt(delegate, error: nil)
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
                task.noteCancelledByCaller()
                finish(delegate, outcome: outcome(of: delegate, error: .cancelled))
            case .endExchange(let action, let facts):
                // The exchange ended while the hook was deciding: carry out its end now.
                act(on: action, delegate: delegate, facts: facts, challenge: nil, hooks: engine.hooks)
            case .continueTransfer:
                scheduleTimeoutCheck(for: delegate)
                unpause(delegate, CURLPAUSE_CONT)
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
        case .connectivityWaiting(let task):
            // Ended meanwhile (cancelled, timed out): its completion was heard already.
            guard let delegate = delegates[task], case .awaitingDecision(.connectivity) = delegate.state.phase else { return }
            engine.monitorHub?.emit(.waitingForConnectivity(task))
        case .shutdown(let completion):
            shutdownRequests.append(completion)
        }
    }
}
