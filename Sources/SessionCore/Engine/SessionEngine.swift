import Dispatch
import Foundation
import Serialization
import Synchronization
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The state a manager shares with its tasks and its driver: configuration, queues, hooks,
/// the registry of unfinished tasks, and the completion path.
///
/// Tasks reference the engine, never the manager, so a manager can be released while its
/// tasks still run; its `deinit` then cancels them and shuts the driver down.
final class SessionEngine: Sendable {
    /// The manager's hooks, as one snapshot: every transfer reads them a few times, and a
    /// snapshot is one reference to copy (a struct of ten closures was ten retains a read).
    ///
    /// `@unchecked Sendable`: a snapshot is changed only by `updateHooks`, on a fresh copy, under
    /// the engine's lock, before it is published; a published snapshot is never changed.
    final class Hooks: @unchecked Sendable {
        var redirect: (@Sendable (SessionTask, HTTPURLResponse, URLRequest) -> URLRequest?)?
        var dataReceived: (@Sendable (DataTask, Data) -> Void)?
        var taskDidComplete: (@Sendable (SessionTask, (any Error)?) -> Void)?
        var metrics: (@Sendable (SessionTask, TaskMetrics?) -> Void)?
        var sessionDidBecomeInvalid: (@Sendable ((any Error)?) -> Void)?
        var authenticationChallenge: (@Sendable (SessionTask, URLAuthenticationChallenge) -> AuthChallengeDisposition)?
        /// Server trust for the whole session (Features/Security/URLSessionManager+SessionChallenge.swift).
        var sessionChallenge: (@Sendable (URLAuthenticationChallenge) -> AuthChallengeDisposition)?
        var sentBodyData: (@Sendable (SessionTask, Int64, Int64, Int64) -> Void)?
        var dataTaskDidReceiveResponse: (@Sendable (DataTask, HTTPURLResponse) -> ResponseDisposition)?
        var downloadDidWriteData: (@Sendable (DownloadTask, Int64, Int64, Int64) -> Void)?
        var downloadDidFinish: (@Sendable (DownloadTask, URL) -> URL?)?
        /// Features/Download/URLSessionManager+DownloadResume.swift.
        var downloadDidResume: (@Sendable (DownloadTask, Int64, Int64) -> Void)?

        init() {}

        /// An unpublished copy, for `updateHooks` to change.
        fileprivate func copy() -> Hooks {
            let copy = Hooks()
            copy.redirect = redirect
            copy.dataReceived = dataReceived
            copy.taskDidComplete = taskDidComplete
            copy.metrics = metrics
            copy.sessionDidBecomeInvalid = sessionDidBecomeInvalid
            copy.authenticationChallenge = authenticationChallenge
            copy.sessionChallenge = sessionChallenge
            copy.sentBodyData = sentBodyData
            copy.dataTaskDidReceiveResponse = dataTaskDidReceiveResponse
            copy.downloadDidWriteData = downloadDidWriteData
            copy.downloadDidFinish = downloadDidFinish
            copy.downloadDidResume = downloadDidResume
            return copy
        }
    }

    struct State {
        var tasks = TaskRegistry()
        var nextIdentifier = 1
        var completionQueue: DispatchQueue
        /// Whether `completionQueue` is known to be serial (the manager's own, or the main
        /// queue), so that the driver may send it one pass's completions in one block.
        var completionQueueKind = CompletionQueueKind.own
        var hooks = Hooks()
        /// How a finished task's body becomes its result value (the manager's
        /// `responseSerializer`); AFNetworking's default is a JSON serializer.
        var responseSerializer = ResolvedSerializer(JSONResponseSerializer())
        var requestRetrier: (any RequestRetrier)?
        var requestAdapter: (any RequestAdapter)?
        var interceptor: (any RequestInterceptor)?
        /// The chains made from the three above (`updateInterception`).
        var adaptation: (any RequestAdapter)?
        var retrying: (any RequestRetrier)?
        var invalidation: Invalidation = .active
        var invalidationWaiters: [@Sendable () -> Void] = []
        /// Start a fresh driver once this invalidation is done (AFNetworking's
        /// `resetSession:`); any invalidation without a reset (the manager's deinit) clears it.
        var resetsAfterInvalidation = false
        /// The tasks the invalidation waits for: those registered when it began. Tasks made
        /// during a reset belong to the fresh session and are not waited for.
        var draining: Set<Int> = []
        /// Tasks resumed while a reset is under way: started on the fresh driver once the old
        /// one is gone and the jar and credentials are cleared (never on the old session).
        var parkedStarts: [ParkedStart] = []
    }

    enum Invalidation: Equatable { case active, invalidating, invalidated }

    let configuration: SessionConfiguration
    /// The serial completion queue the manager starts with. Completions are batched only
    /// for it and the main queue (`CompletionBatch`): a queue the caller sets may be
    /// concurrent, where one block per pass would serialise handlers that run in parallel
    /// (and deadlock one that waits for another).
    let ownCompletionQueue: DispatchQueue
    /// Where hooks, streamed body chunks and progress run: user code never runs on the driver.
    let operationQueue: DispatchQueue
    let state: Mutex<State>
    let driverBox = Mutex<TransferDriver?>(nil)
    /// Whether the shutdown command went to the current driver (once per driver).
    let driverShutdownSent = Mutex(false)
    /// Why the driver could not start (libcurl unusable); every task then fails with it.
    let startupError = Mutex<SessionError?>(nil)
    /// The security policy and its generation, read by every TLS request (Features/Security).
    let security = SessionSecurity()
    /// `SessionConfiguration.proxyBypassList` as libcurl's `NOPROXY` string, made once (nil
    /// when no entry is libcurl's).
    let proxyBypass: String?
    /// The bypass list's IPv6 entries, which libcurl 7.88 cannot match (nil when none).
    let proxyBypassAddresses: ProxyBypassList?
    /// Under `Proxy.environment`: whether any proxy variable libcurl reads for http and https
    /// was set (non-empty) when the manager was made. When none was, transfers tell libcurl
    /// "no proxy" instead of letting it read five variables from the environment per request.
    let environmentNamesProxy: Bool
    /// HTTP credentials given for the session (`URLCredential.Persistence.forSession`).
    let credentialStore = SessionCredentialStore()
    /// The token of this manager's personal response-cache entries; renewed by a reset.
    let cachePartition = CachePartition()
    /// URLs this manager prepared recently, parsed (`PreparedRequest.prepare`).
    let parsedURLs = ParsedURLCache()
    /// The user's event monitors; nil when none was given, so the request path checks one
    /// `let` and does nothing more (Monitoring/MonitorDispatch.swift).
    let monitorHub: MonitorHub?
    /// `.taskDidResume` and `.taskDidSuspend` waiting for the next completion or the driver.
    let stateNotices = StateNotices()
    /// What the driver made for finished requests, handed back to it to be freed there.
    let allocationReturn = AllocationReturn()
    /// The engine's own debug messages (`SessionConfiguration.logger`); nil: silent.
    let debugLog: EngineLog?
    /// How many times the driver probed a silent transfer (`DriverLoop.probe`; tests and
    /// measurements).
    let silenceProbes = Atomic<Int>(0)
    /// How many times the driver lifted a send pause after an answer
    /// (`DriverLoop.liftSendPauses`; tests and measurements).
    let sendPauseLifts = Atomic<Int>(0)

    static let managerCounter = Mutex(0)

    /// The variables libcurl 7.88 consults for an http or https proxy (`detect_proxy` in
    /// lib/url.c; it never reads `HTTP_PROXY`, which a CGI request could set).
    static let environmentProxyVariables = ["http_proxy", "https_proxy", "HTTPS_PROXY", "all_proxy", "ALL_PROXY"]
    /// Whom the proxy knows this manager's requests as, for the response cache's identity
    /// (`proxyIdentity(of:environmentNamesProxy:)`); nil: no proxy credential.
    let cacheProxyIdentity: String?
    /// The configuration's `httpAdditionalHeaders` name a `Host`: every request then reaches
    /// its URL's server as another site, and goes past the response cache (`consultsCache`).
    let additionalHeadersNameHost: Bool
    /// The response cache's `CacheTrust` for the current policy generation (`cacheTrust(for:)`).
    let cacheTrustMemo = Mutex<CacheTrust?>(nil)

    init(configuration: SessionConfiguration, eventMonitors: [any EventMonitor] = []) {
        let number = SessionEngine.managerCounter.withLock { counter -> Int in
            counter += 1
            return counter
        }
        self.configuration = configuration
        monitorHub = MonitorHub(monitors: eventMonitors, allocationReturn: allocationReturn)
        debugLog = configuration.logger.map { EngineLog(logger: $0, identifier: number) }
        let bypass = ProxyBypassList(configuration.proxyBypassList)
        proxyBypass = bypass.noProxy
        proxyBypassAddresses = bypass.hasAddressRanges ? bypass : nil
        environmentNamesProxy = Self.environmentProxyVariables.contains { name in
            guard let value = getenv(name) else { return false }
            return value.pointee != 0
        }
        cacheProxyIdentity = Self.proxyIdentity(of: configuration, environmentNamesProxy: environmentNamesProxy)
        additionalHeadersNameHost = configuration.httpAdditionalHeaders.keys.contains { $0.lowercased() == "host" }
        operationQueue = DispatchQueue(label: "Curlew.operationQueue.\(number)")
        ownCompletionQueue = DispatchQueue(label: "Curlew.completionQueue.\(number)")
        state = Mutex(State(completionQueue: ownCompletionQueue))
        do {
            let driver = try TransferDriver(configuration: configuration, engine: self, identifier: number)
            driverBox.withLock { $0 = driver }
        } catch {
            startupError.withLock { $0 = error }
        }
        attachToResponseCache()
    }

    /// The driver; nil only when libcurl could not be set up.
    var driver: TransferDriver? { driverBox.withLock { $0 } }

    /// Sends a command to the driver; false when there is none or it has shut down.
    @discardableResult
    func submit(_ command: TransferDriver.Command) -> Bool {
        driver?.submit(command) ?? false
    }

    // MARK: - Settings

    var completionQueue: DispatchQueue {
        get { state.withLock { $0.completionQueue } }
        set {
            let kind = CompletionQueueKind(newValue, own: ownCompletionQueue)
            state.withLock {
                $0.completionQueue = newValue
                $0.completionQueueKind = kind
            }
        }
    }

    func updateHooks(_ body: (Hooks) -> Void) {
        state.withLock { state in
            let changed = state.hooks.copy()
            body(changed)
            state.hooks = changed
            observesSentBodyData.store(state.hooks.sentBodyData != nil, ordering: .releasing)
            observesWrittenData.store(state.hooks.downloadDidWriteData != nil, ordering: .releasing)
        }
    }

    /// The manager's retrier (`URLSessionManager.requestRetrier`).
    var requestRetrier: (any RequestRetrier)? {
        get { state.withLock { $0.requestRetrier } }
        set { updateInterception { $0.requestRetrier = newValue } }
    }

    /// The manager's adapter (`URLSessionManager.requestAdapter`).
    var requestAdapter: (any RequestAdapter)? {
        get { state.withLock { $0.requestAdapter } }
        set { updateInterception { $0.requestAdapter = newValue } }
    }

    /// The manager's interceptor (`URLSessionManager.interceptor`).
    var interceptor: (any RequestInterceptor)? {
        get { state.withLock { $0.interceptor } }
        set { updateInterception { $0.interceptor = newValue } }
    }

    /// Changes one of the three settings and remakes the chains the transfers use.
    private func updateInterception(_ body: (inout State) -> Void) {
        state.withLock { state in
            body(&state)
            let adapters: [any RequestAdapter] = [state.requestAdapter, state.interceptor].compactMap { $0 }
            let retriers: [any RequestRetrier] = [state.requestRetrier, state.interceptor].compactMap { $0 }
            state.adaptation = adapters.count > 1 ? Interceptor(adapters: adapters) : adapters.first
            state.retrying = retriers.count > 1 ? Interceptor(retriers: retriers) : retriers.first
            hasAdaptation.store(state.adaptation != nil, ordering: .releasing)
            hasRetrying.store(state.retrying != nil, ordering: .releasing)
        }
    }

    /// What adapts every request: `requestAdapter`, then `interceptor` (nil: neither is set).
    /// `hasAdaptation` lets the start of a task skip the lock when none is set.
    var adaptation: (any RequestAdapter)? {
        hasAdaptation.load(ordering: .acquiring) ? state.withLock { $0.adaptation } : nil
    }

    /// What decides about failed attempts: `requestRetrier`, then `interceptor`, asked in that
    /// order until one asks for anything but `.doNotRetry` (nil: neither is set).
    var retrying: (any RequestRetrier)? {
        hasRetrying.load(ordering: .acquiring) ? state.withLock { $0.retrying } : nil
    }

    let hasAdaptation = Atomic<Bool>(false)
    let hasRetrying = Atomic<Bool>(false)

    /// Whether a send-body-data hook is set: read for every upload progress event, so it is
    /// an atomic rather than the hooks behind the lock.
    let observesSentBodyData = Atomic<Bool>(false)
    /// Whether a download-wrote-data hook is set (read for every download progress event).
    let observesWrittenData = Atomic<Bool>(false)
    var hooks: Hooks { state.withLock { $0.hooks } }
    var redirectHook: (@Sendable (SessionTask, HTTPURLResponse, URLRequest) -> URLRequest?)? { hooks.redirect }

    var responseSerializer: any ResponseSerialization {
        get { state.withLock { $0.responseSerializer.serializer } }
        set {
            let resolved = ResolvedSerializer(newValue)  // its casts outside the lock
            state.withLock { $0.responseSerializer = resolved }
        }
    }

    // MARK: - Tasks

    /// Validates the request and registers a new, suspended task.
    func makeTask<T: SessionTask>(
        _ type: T.Type, request: URLRequest, options: consuming TaskOptions
    ) -> T {
        let (identifier, slot) = state.withLock { state -> (Int, Int) in
            defer { state.nextIdentifier += 1 }
            return (state.nextIdentifier, state.tasks.reserveSlot())
        }
        let prepared: PreparedRequest
        var failure: SessionError?
        do {
            prepared = try PreparedRequest.prepare(request, configuration: configuration, urls: parsedURLs)
        } catch {
            failure = error
            prepared = PreparedRequest.placeholder(for: request)
        }
        let task = T(
            identifier: identifier, registrySlot: slot, request: request, prepared: prepared, options: options, engine: self)
        let registered = state.withLock { state -> Bool in
            // During a reset, new tasks belong to the fresh session (AFNetworking's own reset
            // test creates one at once): they are registered and wait for it to start.
            guard state.invalidation == .active || state.resetsAfterInvalidation else {
                state.tasks.release(slot)
                return false
            }
            state.tasks.fill(slot, with: task)
            return true
        }
        if !registered {
            failure = .sessionInvalidated
        }
        if let failure {
            // A request that cannot be sent completes at once with the reason; nothing is
            // ever put on the wire for it.
            task.failBeforeStart(failure)
        }
        monitorHub?.emit(.created(task))
        return task
    }

    /// Tasks not yet completed, in creation order. A completed task stays registered until
    /// its completion block has run (invalidation waits for that), but is not listed.
    var unfinishedTasks: [SessionTask] {
        state.withLock { $0.tasks.tasks }
            .filter { $0.state != .completed }
            .sorted { $0.taskIdentifier < $1.taskIdentifier }
    }

    func start(_ task: SessionTask) {
        if resetPending.load(ordering: .acquiring), parkForReset(task) {
            postStateNoticesSoon()
            return
        }
        if let adapter = adapter(for: task) {
            // Adapted first (Engine/SessionEngine+Adaptation.swift), so the cache and the
            // driver see the request that is sent.
            postStateNoticesSoon()
            adaptThenStart(task, adapter: adapter)
            return
        }
        startAdapted(task)
    }

    /// Queues a post of the waiting `taskDidResume`/`taskDidSuspend` notices now, for a start
    /// that goes first to an adapter, the response cache or a reset (those may take any
    /// time, and nothing there carries the notice to the completion queue or wakes the
    /// driver), and for `suspend()` and the `resume()` after it (`StateNotices`). Such a start
    /// costs a hop already; this adds the wakeup that every start paid before the notices
    /// waited.
    func postStateNoticesSoon() {
        _ = stateNotices.flushIfDue(now: .max, on: completionQueue)
    }

    /// Starts a task whose request needs no more adaptation: through the response cache when
    /// it may answer, else on the driver.
    func startAdapted(_ task: SessionTask) {
        if let cache = configuration.responseCache, consultsCache(task) {
            postStateNoticesSoon()
            startThroughCache(task, cache: cache)
        } else {
            submitStart(task)
        }
    }

    /// Set while a reset is under way (read without the lock on every start).
    let resetPending = Atomic<Bool>(false)

    /// Counts the sessions that ended: each invalidation and each reset, as it begins
    /// (`SessionEndWaiters`). Written under `sessionEndWaiters`' lock.
    let sessionGeneration = Atomic<Int>(0)
    /// The waits that end with the session (`waitForSessionEnd(after:)`).
    let sessionEndWaiters = Mutex(SessionEndWaiters())

    /// Hands a task to the driver (or completes it when there is none).
    func submitStart(_ task: SessionTask) {
        if !submit(.start(task)) {
            let error = startupError.withLock { $0 } ?? .sessionInvalidated
            complete(task, outcome: TransferOutcome(error: error, request: task.currentRequest))
        }
    }
}
