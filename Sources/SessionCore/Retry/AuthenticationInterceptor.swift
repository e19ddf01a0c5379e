import Foundation
import Synchronization
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Adds a credential to every request and keeps it fresh (Alamofire's idea of the same name).
///
/// - Each request gets the current credential (``Authenticator/apply(_:to:)``) when its task
///   starts and before each retry.
/// - A credential that ``AuthenticationCredential/requiresRefresh`` is refreshed before it is
///   used, and a request refused for authentication (``Authenticator/didRequest(_:failWith:error:)``,
///   a 401 by default) is answered with a refresh and a retry.
/// - Refreshes are single-flight: one ``Authenticator/refresh(_:)`` runs however many requests
///   need it; requests that arrive meanwhile wait (detached, holding no connection) and go on
///   with the new credential. A refusal of a request sent with an older credential is retried
///   at once with the current one, without another refresh.
/// - A failed refresh fails every request waiting for it with the refresh's error (the
///   task's `error` is that error).
/// - Only the origin of the task's first request is its concern: a redirect to another
///   origin leaves the credential behind, retries of that hop get none, and that origin's
///   refusals are the task's answers (no refresh, no retry).
/// - It never loops: more than ``RefreshWindow/maximumRefreshes`` refreshes within
///   ``RefreshWindow/interval`` seconds, or a task refused more often than that, fail with
///   ``AuthenticationError/excessiveRefresh(maximumRefreshes:interval:)``.
///
/// Set it as `URLSessionManager.interceptor` (or put it in an ``Interceptor``). The
/// authenticator's synchronous members are called under the interceptor's lock: they must
/// be quick and must not use the interceptor.
public final class AuthenticationInterceptor<AuthenticatorType: Authenticator>: RequestInterceptor, Sendable {
    /// The credential type.
    public typealias Credential = AuthenticatorType.Credential

    /// How many refreshes are allowed in how long before the interceptor gives up.
    public struct RefreshWindow: Sendable, Equatable {
        /// The length of the window, in seconds.
        public var interval: TimeInterval
        /// Refreshes allowed within any `interval`.
        public var maximumRefreshes: Int

        /// At most `maximumRefreshes` refreshes in any `interval` seconds (default: 5 in 30 s).
        public init(interval: TimeInterval = 30, maximumRefreshes: Int = 5) {
            self.interval = interval
            self.maximumRefreshes = maximumRefreshes
        }
    }

    private struct State {
        var credential: Credential?
        var isRefreshing = false
        /// Requests waiting for the refresh under way.
        var waiters: [CheckedContinuation<Credential, any Error>] = []
        /// When the refreshes within the window began.
        var refreshTimes: [ContinuousClock.Instant] = []
        var refreshCount = 0
        /// Bumped by every assignment of ``credential``: a refresh started before one (a
        /// sign-out, another user's sign-in) does not store its result over it.
        var revision = 0
    }

    /// What a request does once the lock is released.
    private enum Step {
        case use(Credential)
        case wait
        case refresh(Credential, revision: Int)
        case fail(any Error, [CheckedContinuation<Credential, any Error>])
    }

    /// The authenticator.
    public let authenticator: AuthenticatorType
    /// The refresh limit.
    public let refreshWindow: RefreshWindow
    private let state: Mutex<State>

    /// An interceptor that authenticates requests with `credential` (nil: requests fail with
    /// ``AuthenticationError/missingCredential`` until one is set).
    public init(authenticator: AuthenticatorType, credential: Credential? = nil, refreshWindow: RefreshWindow = RefreshWindow()) {
        self.authenticator = authenticator
        self.refreshWindow = refreshWindow
        state = Mutex(State(credential: credential))
    }

    /// The current credential; setting it (after a log-in) is seen by the next request. A
    /// refresh under way when it is set does not overwrite it: its result was the previous
    /// credential's, and the requests waiting for it go on with the one set (or fail with
    /// ``AuthenticationError/missingCredential`` when it was set to nil).
    public var credential: Credential? {
        get { state.withLock { $0.credential } }
        set {
            state.withLock { state in
                state.credential = newValue
                state.revision &+= 1
            }
        }
    }

    /// How many refreshes completed, successful or not (for diagnostics and tests).
    public var refreshCount: Int { state.withLock { $0.refreshCount } }

    /// How many requests are waiting for the refresh under way (tests).
    var waitingRequestCount: Int { state.withLock { $0.waiters.count } }

    // MARK: - RequestInterceptor

    /// `request` with the current credential, refreshed first when it requires it.
    public func adapt(_ request: URLRequest, for task: SessionTask, attempt: Int) async throws -> URLRequest {
        let credential = try await obtainCredential { $0.requiresRefresh }
        var request = request
        authenticator.apply(credential, to: &request)
        return request
    }

    /// Retries a request refused for authentication: at once when it was sent with an older
    /// credential, else after the single refresh (or with the refresh's error).
    public func shouldRetry(
        _ task: SessionTask, attempt: Int, error: SessionError?, response: HTTPURLResponse?
    ) async throws -> RetryDecision {
        guard let request = task.currentRequest,
            authenticator.didRequest(request, failWith: response, error: error)
        else { return .doNotRetry }
        // Only refusals of requests that carried the credential: a redirect to another origin
        // left it behind (as it leaves every credential) for every later hop, one back on the
        // first origin too (A → B → A), so such a 401 is not about it, and neither a refresh
        // nor a retry would change what is sent (it was retried until `excessiveRefresh`).
        if task.hasCrossedOrigin.load(ordering: .relaxed) { return .doNotRetry }
        // A refusal per refresh allowed, and one more for a request that raced a refresh: a
        // task is never retried for ever, whatever the authenticator answers. Counted per task
        // and only for refusals: `attempt` counts every retry, a `RetryPolicy`'s 503s too.
        guard task.authenticationRetries.add(1, ordering: .relaxed).newValue <= refreshWindow.maximumRefreshes + 1 else {
            return .doNotRetryWithError(excessiveRefresh)
        }
        let authenticator = self.authenticator
        do {
            _ = try await obtainCredential { current in
                authenticator.isRequest(request, authenticatedWith: current) || current.requiresRefresh
            }
            return .retry
        } catch {
            return .doNotRetryWithError(error)
        }
    }

    private var excessiveRefresh: AuthenticationError {
        .excessiveRefresh(maximumRefreshes: refreshWindow.maximumRefreshes, interval: refreshWindow.interval)
    }

    // MARK: - The single refresh

    /// The credential to use: the current one, unless `needsRefresh` says so, or a refresh is
    /// under way; then the refresh's result (a refresh is started when none is).
    private func obtainCredential(needsRefresh: @escaping @Sendable (Credential) -> Bool) async throws -> Credential {
        try await withCheckedThrowingContinuation { continuation in
            let step = state.withLock { state -> Step in
                if state.isRefreshing {
                    state.waiters.append(continuation)
                    return .wait
                }
                guard let current = state.credential else {
                    return .fail(AuthenticationError.missingCredential, [continuation])
                }
                guard needsRefresh(current) else { return .use(current) }
                state.waiters.append(continuation)
                let now = ContinuousClock.now
                // A window of a century or more (`.infinity`: "at most N refreshes, ever") keeps
                // every refresh; its milliseconds would not fit an Int64 (a trap).
                let seconds = refreshWindow.interval
                if !(seconds >= TransferTimeouts.longest) {
                    let window = Duration.milliseconds(Int64((max(0, seconds) * 1000).rounded()))
                    state.refreshTimes.removeAll { now - $0 >= window }
                }
                guard state.refreshTimes.count < refreshWindow.maximumRefreshes else {
                    defer { state.waiters = [] }
                    return .fail(excessiveRefresh, state.waiters)
                }
                state.refreshTimes.append(now)
                state.isRefreshing = true
                return .refresh(current, revision: state.revision)
            }
            switch step {
            case .use(let credential): continuation.resume(returning: credential)
            case .wait: break
            case .refresh(let stale, let revision): Task { await self.refresh(stale, revision: revision) }
            case .fail(let error, let waiters): for waiter in waiters { waiter.resume(throwing: error) }
            }
        }
    }

    /// Runs the refresh and releases every request waiting for it. When ``credential`` was
    /// set meanwhile, the result is dropped: the waiting requests go on with the credential set
    /// (or fail without one).
    private func refresh(_ stale: Credential, revision: Int) async {
        var result: Result<Credential, any Error>
        do {
            result = .success(try await authenticator.refresh(stale))
        } catch {
            result = .failure(error)
        }
        let waiters = state.withLock { state -> [CheckedContinuation<Credential, any Error>] in
            if state.revision == revision {
                if case .success(let fresh) = result { state.credential = fresh }
            } else {
                result = state.credential.map { .success($0) } ?? .failure(AuthenticationError.missingCredential)
            }
            state.isRefreshing = false
            state.refreshCount += 1
            defer { state.waiters = [] }
            return state.waiters
        }
        for waiter in waiters { waiter.resume(with: result) }
    }
}
