internal import CCurl
import Foundation
import Serialization
import Synchronization
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Retries: every failed attempt goes through `endAttempt` and the manager's retrier.
extension DriverLoop {
    // MARK: - Retries

    /// An attempt ended (with `error`, or nil: with its response): the retrier decides
    /// whether another follows, else the task completes. Every failed attempt goes through
    /// here, an idle timeout included, so one rule decides them all.
    func endAttempt(_ delegate: TaskDelegate, error: SessionError?) {
        // Only an attempt that could be sent again: no body bytes went to user code, and the
        // request body can be replayed (the retrier's own rule).
        if let error, engine.configuration.waitsForConnectivity, ConnectivityWait.mayBeForWantOfARoute(error),
            !delegate.hasStreamedBody, delegate.canReplayBody, Self.maySendAgainAfterWaiting(delegate, error: error)
        {
            let targets = connectivityTargets(of: delegate)
            if !targets.isEmpty {
                awaitConnectivity(delegate, targets: targets, error: error)
                return
            }
        }
        if let retrier = engine.retrier(for: delegate.task), asksRetrier(delegate, error: error) {
            askRetrier(retrier, delegate: delegate, error: error)
            return
        }
        finish(delegate, outcome: outcome(of: delegate, error: error))
    }

    /// Whether an attempt that failed this way may be sent again once a route is back: when
    /// it never reached the server (no connection was made, the name did not resolve), or when
    /// sending it twice does no harm (an idempotent method, RFC 9110 §9.2.2). A connection lost
    /// after the request went out (`.networkLost`) may have had a POST acted on: sent again on
    /// its own, the server acted twice, and the retrier (whose `RetryPolicy` refuses such
    /// methods) was never asked. Such an attempt goes to the retrier instead.
    static func maySendAgainAfterWaiting(_ delegate: TaskDelegate, error: SessionError) -> Bool {
        switch error {
        case .cannotConnect, .dnsFailure: return true
        default: return PreparedRequest.idempotentMethods.contains(delegate.prepared.method)
        }
    }

    /// Whether the retrier is asked about an attempt that ended this way: an error other than
    /// a cancellation, or a status of 400 or more; never once body bytes went to user code or
    /// when the request body cannot be sent again.
    func asksRetrier(_ delegate: TaskDelegate, error: SessionError?) -> Bool {
        TransferStateMachine.asksRetrier(
            error: error, status: delegate.responseHead?.statusCode ?? 0,
            hasStreamedBody: delegate.hasStreamedBody, canReplayBody: delegate.canReplayBody)
    }

    /// Detaches the transfer and asks the retrier in a Swift concurrency task (user code never
    /// runs here; it may suspend, e.g. for a token refresh, while the driver goes on); then,
    /// when it asks for another attempt, the adapter for that attempt's request. The answer
    /// comes back as `.retryDecision`.
    func askRetrier(_ retrier: any RequestRetrier, delegate: TaskDelegate, error: SessionError?) {
        // Detached while user code decides: not the server's silence, and no slot held.
        transition(delegate) { $0.retrierAsked(error: error, now: TaskDelegate.uptime) }
        let task = delegate.task
        let head = delegate.responseHead
        let attempt = delegate.state.retryCount
        // The hop's request before adapters, adapted anew for each attempt (as Alamofire
        // adapts its request again): adapted again, an adapted request gathered what each
        // adapter appended (`X-Client: 1,1,1`, a second `access_token` in the query, which a
        // server reads as the stale first one).
        let current = delegate.redirectHop ?? delegate.task.unadaptedRequest ?? delegate.request
        // After a redirect to another origin, the configuration's credentials stay behind on
        // retries too (the adapted request is prepared as the redirect's was), and so do any
        // the adapters add.
        let omitsCredentials = delegate.hasCrossedOrigin
        let driver = self.driver
        let engine = self.engine
        let adapter = engine.adapter(for: task)
        Task {
            let decision: RetryDecision
            do {
                decision = try await retrier.shouldRetry(task, attempt: attempt, error: error, response: head?.httpURLResponse)
            } catch {
                decision = .doNotRetryWithError(error)
            }
            var adapted: Result<AdaptedRequest, SessionError>?
            if decision.asksForAnotherAttempt, let adapter {
                do {
                    var request = try await adapter.adapt(current, for: task, attempt: attempt + 1)
                    // A hop on another origin gets no credential from adapters meant for the first.
                    if omitsCredentials { request = RedirectPolicy.keepingCredentials(of: current, in: request) }
                    adapted = Result { () throws(SessionError) -> AdaptedRequest in
                        AdaptedRequest(
                            request: request,
                            prepared: try PreparedRequest.prepare(
                                request, configuration: engine.configuration, omittingCredentials: omitsCredentials,
                                urls: engine.parsedURLs))
                    }
                } catch {
                    adapted = .failure(.interceptorFailed(InterceptorFailure(stage: .adaptation, underlying: error)))
                }
            }
            driver.submit(.retryDecision(task, decision, adapted))
        }
    }

    /// Carries out the retrier's answer (the adapted request, if any, already adopted).
    func retryDecided(_ delegate: TaskDelegate, _ decision: RetryDecision) {
        // The attempt number before the machine counts the retry, for the log.
        let attempt = delegate.state.retryCount + 1
        switch transition(delegate, { $0.retryDecided(decision, now: TaskDelegate.uptime) }) {
        case .ignore:
            break
        case .finish(let error):
            finish(delegate, outcome: outcome(of: delegate, error: error))
        case .retryNow(let error):
            noteRetry(of: delegate, after: 0, error: error, attempt: attempt)
            retry(delegate, otherwise: error)
        case .retryAt(let deadline, let delay, let error):
            noteRetry(of: delegate, after: delay, error: error, attempt: attempt)
            scheduledRetries.append((deadline, delegate))
            nextRetry = min(nextRetry, deadline)
        case .awaitRoute(let error):
            noteRetry(of: delegate, after: 0, error: error, attempt: attempt)
            let targets = connectivityTargets(of: delegate)
            guard !targets.isEmpty else {
                retry(delegate, otherwise: error)  // no host to watch a route to: send it now
                return
            }
            startConnectivityWait(delegate, targets: targets)
        }
    }

    /// The routes the transfer's attempt may have wanted (`ConnectivityWait.Routes`): the
    /// proxy's when libcurl takes one for its URL, else the origin's. Only after a failure.
    func connectivityTargets(of delegate: TaskDelegate) -> [ConnectivityWait.Target] {
        let configuration = engine.configuration
        let routes = ConnectivityWait.Routes(
            proxies: ProxyChoice(
                proxy: configuration.proxy, environmentNamesProxy: engine.environmentNamesProxy,
                noProxy: engine.proxyBypass, bypassAddresses: engine.proxyBypassAddresses),
            overrides: configuration.hostOverrides, viaUnixSocket: configuration.unixSocketPath != nil)
        // The request as it is now (an adapted retry's included), and libcurl's HSTS rule as
        // `configure` applies it.
        var url = delegate.prepared.url
        var mayBecomeHTTPS = shareHoldsHSTS && !delegate.prepared.urlOrigin.isHTTPS
        if mayBecomeHTTPS, let sent = delegate.easy.info(string: CURLINFO_EFFECTIVE_URL), let sentURL = URL(string: sent),
            sentURL.host?.lowercased() == url.host?.lowercased()
        {
            // libcurl rewrites a URL its HSTS cache upgrades before it connects: which scheme
            // (and so which proxy, which port) the failed attempt used is known, and only its
            // routes count. (The handle still holds the attempt: it is reset when sent again.)
            url = sentURL
            mayBecomeHTTPS = false
        }
        return ConnectivityWait.Routes.adding(
            tried: delegate.easy.info(string: CURLINFO_PRIMARY_IP), to: routes.targets(for: url, mayBecomeHTTPS: mayBecomeHTTPS))
    }

    /// Detaches the transfer while `ConnectivityWait` finds out whether a route is missing
    /// and, if so, waits for one (off this thread); the answer comes back as
    /// `.connectivityDecision`. The resource timeout bounds the wait.
    func awaitConnectivity(_ delegate: TaskDelegate, targets: [ConnectivityWait.Target], error: SessionError) {
        transition(delegate) { $0.connectivityAwaited(error: error, now: TaskDelegate.uptime) }
        startConnectivityWait(delegate, targets: targets)
    }

    /// Starts the watcher for a transfer already detached in `.awaitingDecision(.connectivity)`.
    func startConnectivityWait(_ delegate: TaskDelegate, targets: [ConnectivityWait.Target]) {
        let task = delegate.task
        let driver = self.driver
        // The notice goes through the driver, which knows whether the task still waits: told
        // from the watcher, it could reach the monitors after the task's completion.
        let announces = engine.monitorHub != nil
        delegate.connectivityWait = ConnectivityWait(
            targets: targets,
            waiting: { if announces { driver.submit(.connectivityWaiting(task)) } },
            decided: { returned in driver.submit(.connectivityDecision(task, returned: returned)) })
    }

    /// Carries out the end of a wait for a route.
    func connectivityDecided(_ delegate: TaskDelegate, returned: Bool) {
        delegate.connectivityWait = nil
        switch transition(delegate, { $0.connectivityDecided(returned: returned, now: TaskDelegate.uptime) }) {
        case .ignore:
            break
        case .finish(let error):
            // A route was there: the failure was not for want of one, and the retrier is
            // asked about it as about any other.
            if let retrier = engine.retrier(for: delegate.task), asksRetrier(delegate, error: error) {
                askRetrier(retrier, delegate: delegate, error: error)
            } else {
                finish(delegate, outcome: outcome(of: delegate, error: error))
            }
        case .retryNow(let error):
            if let log = engine.debugLog {
                log.debug("task #\(delegate.task.taskIdentifier) is sent again: a route to its host appeared")
            }
            retry(delegate, otherwise: error)
        case .retryAt, .awaitRoute:
            break  // not answers this decision gives
        }
    }

    /// Tells the monitors and the engine's log that a retry follows (before its `willSend`).
    func noteRetry(of delegate: TaskDelegate, after delay: TimeInterval, error: SessionError?, attempt: Int) {
        if let hub = engine.monitorHub {
            // A failure held back from a stream or a data handler while the retrier decided
            // (`heldForRetrier`) was not reported at its head: the monitors hear of it now,
            // before its retry, as they hear of a collected task's at its head.
            if let head = delegate.responseHead { reportUnheardHead(head, of: delegate, to: hub) }
            hub.emit(.willRetry(delegate.task, delay, error, delegate.responseHead))
        }
        if let log = engine.debugLog {
            let identifier = delegate.task.taskIdentifier
            let status = delegate.responseHead?.statusCode ?? 0
            log.debug { "task #\(identifier) retries in \(delay) s (attempt \(attempt)) after \(error.map { "\($0)" } ?? "status \(status)")" }
        }
    }

    /// Starts the retries whose wait is over (driver loop).
    func startDueRetries() {
        guard nextRetry != .max else { return }  // none scheduled: no clock to read
        let now = TaskDelegate.uptime
        guard now >= nextRetry else { return }
        var due: [(TaskDelegate, SessionError?)] = []
        var earliest = UInt64.max
        scheduledRetries.removeAll { entry in
            // A task cancelled or timed out meanwhile is no longer in `delegates`.
            guard delegates[entry.delegate.task] === entry.delegate else { return true }
            if let error = entry.delegate.state.retryDue(now: now) {
                due.append((entry.delegate, error))
                return true
            }
            earliest = min(earliest, entry.deadline)
            return false
        }
        nextRetry = earliest
        // The wait is over: the new attempt's silence counts again once it has a connection
        // (unless the caller suspended the task meanwhile).
        for (delegate, error) in due { retry(delegate, otherwise: error) }
    }
}
