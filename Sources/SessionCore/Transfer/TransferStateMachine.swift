import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// One transfer's phase and the rules that move it, as a value (the driver thread owns it,
/// through `TaskDelegate.state`).
///
/// The driver reports events (a slot granted, libcurl connecting, a head, a body chunk, an
/// exchange that ended, a hook's answer, a retry decided, a suspend) and carries out what
/// each returns. Nothing here touches libcurl, a queue or a clock of its own, so every
/// event in every phase is tested alone (`TransferStateMachineTests`).
///
/// Two things follow from the phase instead of being switched at call sites:
/// - the idle clock (`TransferClock`): it runs only while the transfer is `.attached`, has a
///   connection, is not suspended, not held by backpressure and not waiting for the response
///   hook. Every event recomputes the holds; the clock restarts when the last one ends.
/// - the connection slot and curl membership: a transfer is in libcurl exactly while
///   `.attached`; it holds its per-origin slot while `.attached` and its place in line while
///   `.waitingForSlot`. The driver compares the phase before and after each event
///   (`DriverLoop.transition`) and removes the handle and gives up the slot in that one place.
///
/// ```text
///                 ┌──────────── slot busy ────────────┐
///   ready ──attach┤                                   ▼
///     ▲           └──── slot free / none needed ── waitingForSlot
///     │                      │                        │ slot passed on
///     │                      ▼                        ▼
///     │                   attached ◀──────────────────┘
///     │     (connecting → connected; pauses: suspended, backpressure, response hook)
///     │                      │ exchange ended (curl done, or an idle timeout)
///     │        ┌─────────────┼──────────────────┬───────────────────────┐
///     │        ▼             ▼                  ▼                       ▼
///     │  awaitingDecision  follow / retry   attempt ended ──▶ awaitingDecision(.retrier)
///     │  (.challenge,      on a fresh                │                 │ retry after s
///     │   .redirect,       connection                ▼                 ▼
///     │   .response)          │                   finished ◀──── awaitingRetry
///     └───────────────────────┴──────── answered / due ──────────────────┘
/// ```
/// `cancel` and the resource timeout move any phase to `.finished`. A transfer about to be
/// attached while the caller has the task suspended goes to `.awaitingResume` instead
/// (detached, no slot) and back to `ready` at `resume`.
struct TransferStateMachine {
    private(set) var phase: Phase = .ready
    /// The caller suspended the task; holds in every phase (a transfer suspended while it
    /// waits stays paused when it is attached).
    private(set) var isSuspended = false
    /// libcurl resolves, connects or handed the transfer a connection (this exchange).
    private(set) var hasConnection = false
    /// The wait for a route in progress was the retrier's answer (`.retryWhenConnected`), not
    /// `waitsForConnectivity`'s: it ends in another attempt whether or not a route was missing.
    private(set) var routeWaitIsARetry = false
    /// The consumer of a streamed body fell behind; curl is paused until it catches up.
    private(set) var isBackpressured = false
    /// The request body's producer (a caller's `InputStream` or async sequence, read ahead by
    /// Curlew) has nothing ready; curl's sending is paused until it has.
    private(set) var awaitsBodyProducer = false
    /// The response hook has not answered about the delivered response yet.
    private(set) var awaitsResponseDecision = false
    /// How the current response is treated, decided when its head arrived (nil before).
    private(set) var headDisposition: HeadDisposition?
    /// Redirects followed so far.
    private(set) var redirectCount = 0
    /// Retries made so far.
    private(set) var retryCount = 0
    let maximumRedirects: Int
    /// The facts of an exchange that ended while the response hook decided
    /// (`.awaitingDecision(.response)`).
    private(set) var pendingEndFacts: EndFacts?
    /// The failed attempt's error while the retrier decides or the back-off runs.
    private(set) var pendingError: SessionError?
    /// When a scheduled retry is due (`.awaitingRetry`).
    private(set) var retryDeadline: UInt64 = .max
    /// The idle and total clocks; their holds follow from the state above.
    private(set) var clock: TransferClock

    /// `firstProbeDelay`: see `TransferClock.nextProbe` (nil: libcurl needs no probes).
    /// `totalStart`: when the task began, if before `now` (its first request was adapted):
    /// the resource timeout counts from there.
    init(timeouts: TransferTimeouts, maximumRedirects: Int, now: UInt64, totalStart: UInt64? = nil, firstProbeDelay: UInt64? = nil) {
        self.maximumRedirects = maximumRedirects
        clock = TransferClock(timeouts: timeouts, now: now, totalStart: totalStart, firstProbeDelay: firstProbeDelay)
        clock.setHolds(holds, at: now)
    }

    /// Whether the transfer is in libcurl's multi handle.
    var isAttached: Bool { phase == .attached }

    /// Whether the transfer may send more of its body now (a body stream woke up).
    var maySend: Bool { phase == .attached && !isSuspended }

    /// Whether body bytes go to the task (as opposed to a redirect's or challenge's body,
    /// kept aside).
    var deliversResponse: Bool { headDisposition == .deliver }

    /// Whether the current exchange's answer head arrived.
    var hasAnswerHead: Bool { headDisposition != nil }

    /// Why the idle clock is stopped, from the state alone.
    var holds: TransferClock.Hold {
        var holds: TransferClock.Hold = isSuspended ? .suspended : []
        switch phase {
        case .ready, .waitingForSlot, .awaitingResume:
            holds.insert(.noConnection)
        case .attached:
            if !hasConnection { holds.insert(.noConnection) }
            if isBackpressured { holds.insert(.backpressure) }
            // Until the server answers, it waits for the rest of the request: a producer
            // slower than the timeout is the caller's pace, not the server's silence. Once a
            // head arrived (a server answering early, or the other direction of a two-way
            // stream), the server's silence counts again.
            if awaitsBodyProducer && headDisposition == nil { holds.insert(.bodyProducer) }
            // The hook's time is not the server's silence: held from the moment it is asked
            // (a server that stalls meanwhile is timed again once the hook answered).
            if awaitsResponseDecision && headDisposition == .deliver { holds.insert(.decision) }
        case .awaitingDecision, .awaitingRetry, .finished:
            holds.insert(.decision)
        }
        return holds
    }

    /// Recomputes the idle clock's holds after an event (the clock restarts from `now` when
    /// the last hold ends).
    private mutating func settleClock(_ now: UInt64) {
        clock.setHolds(holds, at: now)
    }

    /// Forgets the last exchange's response before another is sent.
    private mutating func beginExchange() {
        hasConnection = false
        isBackpressured = false
        awaitsBodyProducer = false
        awaitsResponseDecision = false
        headDisposition = nil
    }

    // MARK: - Attaching

    /// No slot is free at the transfer's origin: it waits in line, detached. False (and no
    /// change) unless the transfer was `.ready`.
    @discardableResult
    mutating func queuedForSlot(now: UInt64) -> Bool {
        guard phase == .ready else { return false }
        phase = .waitingForSlot
        settleClock(now)
        return true
    }

    /// The slot the transfer waited for was passed to it; it is attached next.
    @discardableResult
    mutating func slotGranted(now: UInt64) -> Bool {
        guard phase == .waitingForSlot else { return false }
        phase = .ready
        settleClock(now)
        return true
    }

    /// The transfer is in libcurl now (its slot granted, or none needed); false (and no
    /// change) unless it was `.ready`. A task the caller has suspended is not attached but
    /// held (`holdsForResume`); a `suspend()` after this sets `isSuspended`, which the
    /// callbacks pause on (libcurl forgets a pause set before it starts a transfer).
    @discardableResult
    mutating func attached(now: UInt64) -> Bool {
        guard phase == .ready else { return false }
        phase = .attached
        hasConnection = false
        // Time spent detached (waiting for a hook) is not the server's silence.
        clock.noteActivity(at: now)
        settleClock(now)
        return true
    }

    /// libcurl resolves, connects or hands the transfer a connection: the idle clock may run.
    /// Returns the idle deadline that started, if any, for the loop's next check.
    mutating func connecting(now: UInt64) -> UInt64? {
        guard phase == .attached, !hasConnection else { return nil }
        hasConnection = true
        settleClock(now)
        return clock.nextWake
    }

    /// A byte moved in either direction.
    mutating func noteActivity(now: UInt64) {
        clock.noteActivity(at: now)
    }

    /// The rate caps of the exchange about to start (`TransferClock.setRateCaps`).
    mutating func capRates(receive: Int64?, send: Int64?, now: UInt64) {
        clock.setRateCaps(receive: receive, send: send, at: now)
    }

    /// libcurl's byte counts from its progress callback: a capped exchange's waits follow them.
    mutating func observeCounts(uploaded: Int64, downloaded: Int64, now: UInt64) {
        guard clock.isRateCapped else { return }
        clock.observeCounts(uploaded: uploaded, downloaded: downloaded, at: now)
    }

    /// Whether libcurl should be made to look at this transfer at `now` although nothing
    /// seems to have arrived (`TransferClock.nextProbe`: only while the idle clock runs, so
    /// only `.attached` with a connection and nothing holding it); true counts the probe.
    mutating func probeIsDue(now: UInt64) -> Bool {
        guard let due = clock.nextProbe, now >= due else { return false }
        clock.probed(at: now)
        return true
    }

    // MARK: - The exchange

    /// The response head is complete; `disposition` says whose it is.
    mutating func headReceived(_ disposition: HeadDisposition, now: UInt64) {
        headDisposition = disposition
        if awaitsBodyProducer { settleClock(now) }  // its hold ends with the head
    }

    /// The delivered response was put to the response hook.
    mutating func responseHookAsked(now: UInt64) {
        guard headDisposition == .deliver else { return }
        awaitsResponseDecision = true
        settleClock(now)
    }

    /// libcurl answered the last head itself (an authentication pass) and another response
    /// follows. False when the response hook was deciding about the first: that is an error.
    mutating func nextResponseBegins() -> Bool {
        if headDisposition == .deliver && awaitsResponseDecision { return false }
        headDisposition = nil
        return true
    }

    /// A body chunk arrived.
    mutating func bodyArrived(now: UInt64) -> ChunkVerdict {
        // libcurl resets pause bits when a transfer starts, so a suspend() that came before
        // (or while detached) takes effect here, from the callback.
        if isSuspended { return .pause }
        if awaitsResponseDecision && headDisposition == .deliver { return .pause }
        clock.noteActivity(at: now)
        return .take
    }

    /// The streamed body's consumer fell behind: curl pauses, the idle clock holds.
    mutating func consumerFellBehind(now: UInt64) {
        guard phase == .attached, !isBackpressured else { return }
        isBackpressured = true
        settleClock(now)
    }

    /// The request body's producer has nothing ready: curl pauses sending, and the idle
    /// clock holds until the response head (see `holds`).
    mutating func bodyProducerFellBehind(now: UInt64) {
        guard phase == .attached, !awaitsBodyProducer else { return }
        awaitsBodyProducer = true
        settleClock(now)
    }

    /// The producer has bytes (or its end, or a failure) ready. True: let curl continue now
    /// (attached and not suspended).
    mutating func bodyProducerCaughtUp(now: UInt64) -> Bool {
        guard phase == .attached else { return false }
        if awaitsBodyProducer {
            awaitsBodyProducer = false
            settleClock(now)
        }
        return !isSuspended
    }

    /// Whether libcurl's receiving is (or may be) paused by a hold of Curlew's: a suspended
    /// task, a consumer behind, a response hook deciding. Lifting a send pause keeps it.
    var holdsReceiving: Bool {
        isSuspended || isBackpressured || (awaitsResponseDecision && headDisposition == .deliver)
    }

    /// The consumer caught up. True: let curl continue now (attached and not suspended).
    mutating func consumerCaughtUp(now: UInt64) -> Bool {
        guard phase == .attached else { return false }
        isBackpressured = false
        settleClock(now)
        return !isSuspended
    }

    // MARK: - The caller

    /// `suspend()`. True: pause the transfer in curl now.
    mutating func suspend(now: UInt64) -> Bool {
        isSuspended = true
        settleClock(now)
        return phase == .attached
    }

    /// `resume()`: curl continues an attached transfer, and one whose next exchange waited
    /// for this (`.awaitingResume`) is ready to attach. A backpressure pause that ended while
    /// the task was suspended was not lifted: it is dropped here, and the write callback
    /// holds again if the consumer is still behind.
    mutating func resume(now: UInt64) -> ResumeStep {
        isSuspended = false
        isBackpressured = false
        let step: ResumeStep
        switch phase {
        case .attached: step = .continueTransfer
        case .awaitingResume:
            phase = .ready
            step = .attach
        case .ready, .waitingForSlot, .awaitingDecision, .awaitingRetry, .finished: step = .none
        }
        settleClock(now)
        return step
    }

    /// The transfer is about to be put into curl (its slot granted, or none needed). True
    /// when the caller has the task suspended (`taskIsSuspended`: the task's own state, which
    /// a `suspend()` the driver has not heard of yet already shows): it is not attached but
    /// waits, detached, for `resume()` (`.awaitingResume`), so that a suspended task sends
    /// nothing, whether its start, a retry whose back-off ended, a redirect's hop or a
    /// challenge's answer comes due. False (and no change) unless it was `.ready`.
    mutating func holdsForResume(taskIsSuspended: Bool, now: UInt64) -> Bool {
        guard wouldHoldForResume(taskIsSuspended: taskIsSuspended) else { return false }
        isSuspended = true
        phase = .awaitingResume
        settleClock(now)
        return true
    }

    /// Whether `holdsForResume` would hold the transfer now (the driver asks first: see
    /// `DriverLoop.connect`).
    func wouldHoldForResume(taskIsSuspended: Bool) -> Bool {
        phase == .ready && (isSuspended || taskIsSuspended)
    }

    // MARK: - Ends and decisions

    /// One exchange ended (libcurl finished it). Decides what follows and moves the phase:
    /// every answer takes the transfer out of curl. Nil (and no change) unless it was
    /// `.attached`.
    mutating func exchangeEnded(_ facts: EndFacts, now: UInt64) -> EndAction? {
        guard phase == .attached else { return nil }
        return end(facts, now: now)
    }

    /// Decides what follows an ended exchange and moves the phase accordingly.
    private mutating func end(_ facts: EndFacts, now: UInt64) -> EndAction {
        let action = decide(facts)
        switch action {
        case .waitForResponseDecision:
            phase = .awaitingDecision(.response)
            pendingEndFacts = facts
        case .askChallengeHandler: phase = .awaitingDecision(.challenge)
        case .askRedirectHook: phase = .awaitingDecision(.redirect)
        case .finish, .retryOnFreshConnection, .follow, .restartDownloadFromZero, .retryWithoutExpectation: phase = .ready
        }
        settleClock(now)
        return action
    }

    /// The response hook answered. `cancel`: it cancelled the task.
    mutating func responseAnswered(cancel: Bool, now: UInt64) -> ResponseStep {
        guard awaitsResponseDecision else { return .ignore }
        awaitsResponseDecision = false
        if cancel {
            settleClock(now)
            return .cancel
        }
        if phase == .awaitingDecision(.response), let facts = pendingEndFacts {
            pendingEndFacts = nil
            let action = end(facts, now: now)
            return .endExchange(action, facts)
        }
        settleClock(now)
        return phase == .attached && !isSuspended ? .continueTransfer : .wait
    }

    /// The challenge handler answered (or a stored credential did). False when none was awaited.
    mutating func challengeAnswered(now: UInt64) -> Bool {
        guard phase == .awaitingDecision(.challenge) else { return false }
        phase = .ready
        settleClock(now)
        return true
    }

    /// The redirection hook answered. False when none was awaited.
    mutating func redirectAnswered(now: UInt64) -> Bool {
        guard phase == .awaitingDecision(.redirect) else { return false }
        phase = .ready
        settleClock(now)
        return true
    }

    /// The next hop of a redirect chain is about to be sent.
    mutating func redirectFollowed(now: UInt64) {
        guard isBetweenExchanges else { return }
        redirectCount += 1
        restart(now: now)
    }

    /// Out of curl, out of line and not finished: where a next exchange may be prepared.
    private var isBetweenExchanges: Bool {
        switch phase {
        case .ready, .awaitingDecision, .awaitingRetry: return true
        case .waitingForSlot, .attached, .awaitingResume, .finished: return false
        }
    }

    /// The request is about to be sent again (a redirect's next hop, a retry, a challenge
    /// answered, a fresh connection, a download from zero): the last exchange's response is
    /// forgotten. Only between exchanges: a transfer in curl or finished is left as it is.
    mutating func restart(now: UInt64) {
        guard isBetweenExchanges else { return }
        beginExchange()
        phase = .ready
        settleClock(now)
    }

    /// The attempt that just ended goes to the retrier. False (and no change) unless the
    /// transfer is between exchanges (`.ready`).
    @discardableResult
    mutating func retrierAsked(error: SessionError?, now: UInt64) -> Bool {
        guard phase == .ready else { return false }
        phase = .awaitingDecision(.retrier)
        pendingError = error
        settleClock(now)
        return true
    }

    /// The attempt failed for want of a route and the configuration waits for one: the
    /// transfer is detached (no slot, no idle clock; the resource timeout still runs). False
    /// (and no change) unless it is between exchanges (`.ready`).
    @discardableResult
    mutating func connectivityAwaited(error: SessionError, now: UInt64) -> Bool {
        guard phase == .ready else { return false }
        routeWaitIsARetry = false
        phase = .awaitingDecision(.connectivity)
        pendingError = error
        settleClock(now)
        return true
    }

    /// The wait for a route ended: `returned` (a route appeared: send the request again, not
    /// counted as a retry) or not (a route was there all along: the attempt's error stands).
    mutating func connectivityDecided(returned: Bool, now: UInt64) -> RetryStep {
        guard phase == .awaitingDecision(.connectivity) else { return .ignore }
        let error = pendingError
        pendingError = nil
        phase = .ready  // between exchanges either way: the retrier may be asked next
        settleClock(now)
        // The retrier asked for this wait: it wanted the request sent again either way.
        let isRetry = routeWaitIsARetry
        routeWaitIsARetry = false
        return returned || isRetry ? .retryNow(error: error) : .finish(error)
    }

    /// The retrier answered. A delay that is negative, not finite or more than a century
    /// means no retry; `doNotRetryWithError` finishes with the retrier's error (as
    /// `SessionError.interceptorFailed`, stage `.retry`) instead of the attempt's. The response of the failed attempt stays until the driver prepares
    /// the next one (`restart`): a retry that cannot be sent completes with it.
    mutating func retryDecided(_ decision: RetryDecision, now: UInt64) -> RetryStep {
        guard phase == .awaitingDecision(.retrier) else { return .ignore }
        let error = pendingError
        switch decision {
        case .doNotRetry:
            return .finish(error)
        case .doNotRetryWithError(let failure):
            // The retrier's error replaces the attempt's (a token refresh that failed).
            pendingError = nil
            return .finish(.interceptorFailed(InterceptorFailure(stage: .retry, underlying: failure)))
        case .retry, .retryAfter(0):
            retryCount += 1
            pendingError = nil
            phase = .ready
            settleClock(now)
            return .retryNow(error: error)
        case .retryWhenConnected:
            // Counted as a retry now: the retrier's own limit bounds how often it waits.
            retryCount += 1
            phase = .awaitingDecision(.connectivity)
            routeWaitIsARetry = true
            settleClock(now)
            return .awaitRoute(error: error)
        case .retryAfter(let seconds):
            guard seconds > 0, let wait = TransferTimeouts.nanoseconds(seconds) else { return .finish(error) }
            let deadline = now &+ wait
            // A retry due when the resource timeout has ended the task would never be sent:
            // the attempt's answer (a 503 and its body) or error is the outcome now, rather
            // than a `.timedOut` after waiting for nothing.
            if let total = clock.timeouts.total, deadline >= clock.start &+ total { return .finish(error) }
            phase = .awaitingRetry
            retryDeadline = deadline
            settleClock(now)
            return .retryAt(deadline: deadline, delay: seconds, error: error)
        }
    }

    /// A scheduled retry's time came. Returns the failed attempt's error (`.some(nil)`: it
    /// ended with a response), or nil when no retry is due.
    mutating func retryDue(now: UInt64) -> SessionError?? {
        guard phase == .awaitingRetry, retryDeadline <= now else { return nil }
        let error = pendingError
        retryCount += 1
        pendingError = nil
        retryDeadline = .max
        phase = .ready
        settleClock(now)
        return .some(error)
    }

    /// The idle clock ran out: this attempt is over and out of curl (the retrier may send
    /// another).
    mutating func attemptTimedOut(now: UInt64) {
        if phase == .attached { phase = .ready }
        settleClock(now)
    }

    /// The task completes (its outcome decided, a cancel, the resource timeout).
    mutating func finish(now: UInt64) {
        phase = .finished
        settleClock(now)
    }

    /// The clock that ran out at `now`, if any (the total clock first).
    func expiry(at now: UInt64) -> TransferClock.Expiry? {
        phase == .finished ? nil : clock.expiry(at: now)
    }
}
