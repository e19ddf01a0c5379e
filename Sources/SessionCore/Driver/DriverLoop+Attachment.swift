internal import CCurl
import Foundation
import Serialization
import Synchronization
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Starting transfers, and the connection slot that follows attachment (`HostAdmission`).
extension DriverLoop {
    static func reject(_ command: TransferDriver.Command, engine: SessionEngine) {
        switch command {
        case .start(let task), .cancel(let task, _), .redirectDecision(let task, _, _), .challengeDecision(let task, _):
            engine.complete(task, outcome: TransferOutcome(error: .sessionInvalidated, request: task.currentRequest))
        case .shutdown(let completion):
            completion()
        case .pause, .unpause, .resumeReading, .resumeSending, .responseDecision, .retryDecision, .connectivityDecision,
            .connectivityWaiting:
            break
        }
    }

    func start(_ task: SessionTask) {
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
        delegates.insert(delegate)
        if let limit = connectionCacheLimit.note(transfers: delegates.count) {
            _ = curlew_multi_setopt_long(multi, CURLMOPT_MAXCONNECTS, limit)
        }
        delegate.unmanagedSelf = Unmanaged.passRetained(delegate).toOpaque()
        attach(delegate)
    }

    /// Moves the transfer's state machine with `event` and carries out what the move of its
    /// phase implies, in this one place: a transfer that left `.attached` leaves curl, and one
    /// that is neither `.attached` nor `.waitingForSlot` any more gives up its connection slot
    /// or its place in line (the next transfer in line at its origin starts at once).
    @discardableResult
    func transition<Result>(_ delegate: TaskDelegate, _ event: (inout TransferStateMachine) -> Result) -> Result {
        let before = delegate.state.phase
        let result = event(&delegate.state)
        let after = delegate.state.phase
        if before == .attached && after != .attached {
            _ = curl_multi_remove_handle(multi, delegate.easy.raw)
        }
        if after != .attached && after != .waitingForSlot {
            releaseSlot(of: delegate, wasWaiting: before == .waitingForSlot)
        }
        return result
    }

    /// Puts the transfer into curl: first its origin's connection slot when it counts against
    /// `httpMaximumConnectionsPerHost` (in line, not attached, when none is free).
    ///
    /// The slot follows the phase (`transition`): a transfer holds one exactly while it is in
    /// curl, so a transfer that waits detached (a retry's back-off, the retrier, the challenge
    /// handler, a redirect or response hook) leaves it to the next in line, and a redirect to
    /// another origin counts against that origin. Until libcurl resolves, connects or hands it
    /// a connection (`CurlCallbacks.connecting`), the transfer's idle clock is held: waiting
    /// for a connection under Curlew's or libcurl's limits is not the server's silence.
    func attach(_ delegate: TaskDelegate) {
        if delegate.admissionOrigin == nil, engine.configuration.httpMaximumConnectionsPerHost > 0,
            !PreparedRequest.canMultiplex(delegate.prepared.urlOrigin, version: engine.configuration.httpVersion)
        {
            let (origin, admitted) = admission.admit(delegate, key: delegate.prepared.urlOrigin.origin)
            delegate.admissionOrigin = origin
            guard admitted else {
                transition(delegate) { $0.queuedForSlot(now: TaskDelegate.uptime) }
                if let log = engine.debugLog {
                    log.debug("task #\(delegate.task.taskIdentifier) waits for a connection slot to \(delegate.prepared.urlOrigin.origin)")
                }
                return
            }
        }
        connect(delegate)
    }

    /// Adds the transfer, which holds its slot if it needs one, to the multi handle; or,
    /// when the caller has the task suspended, keeps it out until `resume()`.
    func connect(_ delegate: TaskDelegate) {
        // A suspended task sends nothing (its start, a retry whose back-off ended, a
        // redirect's hop): libcurl would send the request before the first body byte could
        // pause it, and the paused transfer would hold its slot for as long as the caller
        // waits. It waits detached (`.awaitingResume`; `transition` passes the slot on).
        // Only then through `transition`: at this point a transfer about to attach is `.ready`,
        // which `transition` reads as "gives its slot up", and a slot just passed to it
        // (`releaseSlot`) must stay its own.
        let suspended = delegate.task.state == .suspended
        if delegate.state.wouldHoldForResume(taskIsSuspended: suspended),
            transition(delegate, { $0.holdsForResume(taskIsSuspended: suspended, now: TaskDelegate.uptime) })
        {
            scheduleTimeoutCheck(for: delegate)  // the resource timeout runs on meanwhile
            if let log = engine.debugLog {
                log.debug("task #\(delegate.task.taskIdentifier) waits for resume() before it is sent")
            }
            return
        }
        refreshShareIfPolicyChanged()
        if let error = delegate.configure(share: share, network: network, shareHoldsHSTS: shareHoldsHSTS) {
            finish(delegate, outcome: outcome(of: delegate, error: error))
            return
        }
        let code = curl_multi_add_handle(multi, delegate.easy.raw)
        guard code == CURLM_OK else {
            let message = String(cString: curl_multi_strerror(code))
            finish(delegate, outcome: outcome(of: delegate, error: .curl(code: Int(code.rawValue), message: message)))
            return
        }
        // A `suspend()` since the check above reaches the machine as the `.pause` command
        // that follows; its flag then holds the transfer (the read and write callbacks pause
        // on it, whether or not libcurl started the transfer yet).
        guard transition(delegate, { $0.attached(now: TaskDelegate.uptime) }) else {
            // Not ready to attach (a driver bug): take the handle back out of curl before the
            // task completes, so that no handle is recycled while libcurl still holds it.
            _ = curl_multi_remove_handle(multi, delegate.easy.raw)
            assertionFailure("attached from \(delegate.state.phase)")
            finish(delegate, outcome: outcome(of: delegate, error: .curl(code: 0, message: "the transfer could not be attached")))
            return
        }
        if let hub = engine.monitorHub { hub.emit(.willSend(delegate.task, delegate.request)) }
        scheduleTimeoutCheck(for: delegate)
    }

    /// Frees `delegate`'s slot for the next transfer in line at its origin, which starts now
    /// (or withdraws it from the line).
    private func releaseSlot(of delegate: TaskDelegate, wasWaiting: Bool) {
        guard let origin = delegate.admissionOrigin else { return }
        delegate.admissionOrigin = nil
        if wasWaiting {
            admission.withdraw(delegate, from: origin)
        } else if let next = admission.release(origin) {
            // The slot passed to it (`release` kept the count): out of line, not through
            // `transition`, which would give the slot up again.
            next.state.slotGranted(now: TaskDelegate.uptime)
            connect(next)
        }
    }
}
