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
        var sentBodyData: (@Sendable (SessionTask, Int64, Int64, Int64) -> Void)?
        var dataTaskDidReceiveResponse: (@Sendable (DataTask, HTTPURLResponse) -> ResponseDisposition)?
        var downloadDidWriteData: (@Sendable (DownloadTask, Int64, Int64, Int64) -> Void)?
        var downloadDidFinish: (@Sendable (DownloadTask, URL) -> URL?)?

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
            copy.sentBodyData = sentBodyData
            copy.dataTaskDidReceiveResponse = dataTaskDidReceiveResponse
            copy.downloadDidWriteData = downloadDidWriteData
            copy.downloadDidFinish = downloadDidFinish
            return copy
        }
    }

    private struct State {
        var tasks: [Int: SessionTask] = [:]
        var nextIdentifier = 1
        var completionQueue: DispatchQueue
        var hooks = Hooks()
        /// How a finished task's body becomes its result value (the manager's
        /// `responseSerializer`); AFNetworking's default is a JSON serializer.
        var responseSerializer: any ResponseSerialization = JSONResponseSerializer()
        var requestRetrier: (any RequestRetrier)?
        var requestAdapter: (any RequestAdapter)?
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
        var parkedStarts: [SessionTask] = []
    }

    enum Invalidation: Equatable { case active, invalidating, invalidated }

    let configuration: SessionConfiguration
    /// The serial completion queue the manager starts with. Completions are batched only
    /// for it and the main queue (`CompletionBatch`): a queue the caller sets may be
    /// concurrent, where one block per pass would serialise handlers that run in parallel
    /// (and deadlock one that waits for another).
    private let ownCompletionQueue: DispatchQueue
    /// Where hooks, streamed body chunks and progress run: user code never runs on the driver.
    let operationQueue: DispatchQueue
    private let state: Mutex<State>
    private let driverBox = Mutex<TransferDriver?>(nil)
    /// Why the driver could not start (libcurl unusable); every task then fails with it.
    private let startupError = Mutex<SessionError?>(nil)
    /// The security policy and its generation, read by every TLS request (Features/Security).
    let security = SessionSecurity()
    /// `SessionConfiguration.proxyBypassList` as libcurl's `NOPROXY` string, made once (nil
    /// when the list is empty).
    let proxyBypass: String?
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
    /// The engine's own debug messages (`SessionConfiguration.logger`); nil: silent.
    let debugLog: EngineLog?

    private static let managerCounter = Mutex(0)

    /// The variables libcurl 7.88 consults for an http or https proxy (`detect_proxy` in
    /// lib/url.c; it never reads `HTTP_PROXY`, which a CGI request could set).
    static let environmentProxyVariables = ["http_proxy", "https_proxy", "HTTPS_PROXY", "all_proxy", "ALL_PROXY"]

    init(configuration: SessionConfiguration, eventMonitors: [any EventMonitor] = []) {
        let number = SessionEngine.managerCounter.withLock { counter -> Int in
            counter += 1
            return counter
        }
        self.configuration = configuration
        monitorHub = MonitorHub(monitors: eventMonitors, identifier: number)
        debugLog = configuration.logger.map { EngineLog(logger: $0, identifier: number) }
        let bypass = configuration.proxyBypassList.map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
        proxyBypass = bypass.isEmpty ? nil : bypass.joined(separator: ",")
        environmentNamesProxy = Self.environmentProxyVariables.contains { name in
            guard let value = getenv(name) else { return false }
            return value.pointee != 0
        }
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
        set { state.withLock { $0.completionQueue = newValue } }
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

    /// The manager's retrier; `hasRequestRetrier` lets the driver skip the lock when none is set.
    var requestRetrier: (any RequestRetrier)? {
        get { hasRequestRetrier.load(ordering: .acquiring) ? state.withLock { $0.requestRetrier } : nil }
        set {
            state.withLock { state in
                state.requestRetrier = newValue
                hasRequestRetrier.store(newValue != nil, ordering: .releasing)
            }
        }
    }

    let hasRequestRetrier = Atomic<Bool>(false)

    /// The manager's adapter; `hasRequestAdapter` lets task creation skip the lock when none is set.
    var requestAdapter: (any RequestAdapter)? {
        get { hasRequestAdapter.load(ordering: .acquiring) ? state.withLock { $0.requestAdapter } : nil }
        set {
            state.withLock { state in
                state.requestAdapter = newValue
                hasRequestAdapter.store(newValue != nil, ordering: .releasing)
            }
        }
    }

    let hasRequestAdapter = Atomic<Bool>(false)

    /// Whether a send-body-data hook is set: read for every upload progress event, so it is
    /// an atomic rather than the hooks behind the lock.
    let observesSentBodyData = Atomic<Bool>(false)
    /// Whether a download-wrote-data hook is set (read for every download progress event).
    let observesWrittenData = Atomic<Bool>(false)
    var hooks: Hooks { state.withLock { $0.hooks } }
    var redirectHook: (@Sendable (SessionTask, HTTPURLResponse, URLRequest) -> URLRequest?)? { hooks.redirect }

    var responseSerializer: any ResponseSerialization {
        get { state.withLock { $0.responseSerializer } }
        set { state.withLock { $0.responseSerializer = newValue } }
    }

    // MARK: - Tasks

    /// Validates the request and registers a new, suspended task.
    func makeTask<T: SessionTask>(
        _ type: T.Type, request original: URLRequest, options: TaskOptions
    ) -> T {
        let request = requestAdapter?.adapt(original, attempt: 0) ?? original
        let identifier = state.withLock { state -> Int in
            defer { state.nextIdentifier += 1 }
            return state.nextIdentifier
        }
        let prepared: PreparedRequest
        var failure: SessionError?
        do {
            prepared = try PreparedRequest.prepare(request, configuration: configuration, urls: parsedURLs)
        } catch {
            failure = error
            prepared = PreparedRequest.placeholder(for: request)
        }
        let task = T(identifier: identifier, request: request, prepared: prepared, options: options, engine: self)
        let registered = state.withLock { state -> Bool in
            // During a reset, new tasks belong to the fresh session (AFNetworking's own reset
            // test creates one at once): they are registered and wait for it to start.
            guard state.invalidation == .active || state.resetsAfterInvalidation else { return false }
            state.tasks[identifier] = task
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
        state.withLock { Array($0.tasks.values) }
            .filter { $0.state != .completed }
            .sorted { $0.taskIdentifier < $1.taskIdentifier }
    }

    func start(_ task: SessionTask) {
        if resetPending.load(ordering: .acquiring), parkForReset(task) { return }
        if let cache = configuration.responseCache, consultsCache(task) {
            startThroughCache(task, cache: cache)
        } else {
            submitStart(task)
        }
    }

    /// Set while a reset is under way (read without the lock on every start).
    private let resetPending = Atomic<Bool>(false)

    /// During a reset, a task of the fresh session (one made or first resumed after the reset
    /// began) waits for it, before the response cache is asked: it never sees the old
    /// session's cookies, credentials or private cache partition. A task of the old session
    /// (one the invalidation waits for) goes on to the old driver, so the reset can finish.
    private func parkForReset(_ task: SessionTask) -> Bool {
        state.withLock { state -> Bool in
            guard state.invalidation == .invalidating, state.resetsAfterInvalidation,
                !state.draining.contains(task.taskIdentifier)
            else { return false }
            state.parkedStarts.append(task)
            return true
        }
    }

    /// Hands a task to the driver (or completes it when there is none).
    func submitStart(_ task: SessionTask) {
        if !submit(.start(task)) {
            let error = startupError.withLock { $0 } ?? .sessionInvalidated
            complete(task, outcome: TransferOutcome(error: error, request: task.currentRequest))
        }
    }

    /// Whether `task`'s body chunks go to user code (`hooks`: the engine's, read once by the caller).
    func wantsBodyDelivery(for task: SessionTask, hooks: Hooks) -> Bool {
        task.streamsBody || (task is DataTask && hooks.dataReceived != nil)
    }

    /// Hands a streamed body chunk to user code on the operation queue; resumes the paused
    /// transfer once enough has been consumed.
    func deliver(_ chunk: Data, for task: SessionTask, credit: StreamCredit) {
        let hook = hooks.dataReceived
        operationQueue.async { [self] in
            task.callbacks.dataHandler?(chunk)
            if let hook, let dataTask = task as? DataTask { hook(dataTask, chunk) }
            if credit.consume(chunk.count) { submit(.resumeReading(task)) }
        }
    }

    // MARK: - Completion

    /// Completes a task exactly once: state first, then (on the completion queue) the
    /// serializer, the handler, the hooks and the notification.
    ///
    /// `batch`: the driver loop's, to send the completion to its queue at the end of the loop's
    /// pass with the others of that pass (nil: at once).
    func complete(_ task: SessionTask, outcome: TransferOutcome, batch: CompletionBatch? = nil) {
        guard task.markCompleted(outcome) else {
            // Another outcome won (a cancel that raced): a file this one kept is nobody's.
            if let file = outcome.fileURL { unlink(file.path) }
            (task as? DownloadTask)?.releaseFileClaim()
            return
        }
        if let cache = configuration.responseCache, outcome.error == nil, outcome.head != nil {
            if task.hasCacheContext {
                // A 304 becomes the stored response, a response is stored: on the cache's
                // queue, never on the driver thread; the task is already completed meanwhile.
                cache.queue.async { [self] in
                    let answered = applyCache(cache, to: task, outcome: outcome)
                    if answered.head !== outcome.head, let head = answered.head { task.replaceHead(head) }
                    continueCompleting(task, outcome: answered)
                }
                return
            }
            invalidateCache(cache, after: task, head: outcome.head)
        }
        continueCompleting(task, outcome: outcome, batch: batch)
    }

    private func continueCompleting(_ task: SessionTask, outcome: TransferOutcome, batch: CompletionBatch? = nil) {
        let (queue, hooks, serializer) = state.withLock { ($0.completionQueue, $0.hooks, $0.responseSerializer) }
        if let download = task as? DownloadTask {
            // The file is moved on the operation queue (where AFNetworking's delegate moved it),
            // after the last progress update, before the completion handler.
            operationQueue.async { [self] in
                task.finishProgress()
                let settled = settle(download, outcome: outcome, hooks: hooks)
                queue.async { [self] in deliverCompletion(of: task, outcome: settled, hooks: hooks, serializer: serializer) }
            }
            return
        }
        // A streamed body's chunks and progress updates wait on the operation queue:
        // completion goes through it too, so the handler never runs before the last chunk was
        // delivered, and the task's Progress objects are finished after their last update.
        let viaOperationQueue = wantsBodyDelivery(for: task, hooks: hooks) || task.observesProgress
            || observesSentBodyData.load(ordering: .acquiring)
        let work: @Sendable () -> Void
        let target: DispatchQueue
        if serializer.enginePrefersConcurrentProcessing, outcome.error == nil, runsSerializer(for: task, outcome: outcome) {
            // Heavy serializers (image decoding) run in parallel, then the handler on its queue.
            target = Self.processingQueue
            work = { [self] in
                let result = serializeResult(of: task, outcome: outcome, serializer: serializer)
                queue.async { [self] in
                    deliverCompletion(of: task, outcome: outcome, hooks: hooks, serializer: serializer, result: result)
                }
            }
        } else {
            target = queue
            work = { [self] in deliverCompletion(of: task, outcome: outcome, hooks: hooks, serializer: serializer) }
        }
        if viaOperationQueue {
            operationQueue.async { task.finishProgress(); target.async(execute: work) }
        } else if let batch, target === ownCompletionQueue || target === DispatchQueue.main {
            batch.add(work, on: target)
        } else {
            target.async(execute: work)
        }
    }

    /// Where serializers that prefer concurrency run (`prefersConcurrentProcessing`).
    static let processingQueue = DispatchQueue(label: "Curlew.processing", attributes: .concurrent)

    /// Whether the manager's serializer makes the task's result: not for a download, a
    /// raw-data call, a body that was streamed away, or one the response hook sent to a file.
    private func runsSerializer(for task: SessionTask, outcome: TransferOutcome) -> Bool {
        !(task is DownloadTask) && !task.options.skipsSerializer && task.options.collectsBody && outcome.fileURL == nil
    }

    /// The serializer's result for a task that succeeded.
    private func serializeResult(
        of task: SessionTask, outcome: TransferOutcome, serializer: any ResponseSerialization
    ) -> Result<any Sendable, any Error> {
        Result {
            try SessionEngine.serialize(
                serializer, request: outcome.request ?? task.originalRequest, head: outcome.head, data: outcome.body)
        }
    }

    /// The result, the completion handler, the hooks and the notification (completion queue).
    /// `result`: already made by the serializer on the processing queue.
    private func deliverCompletion(
        of task: SessionTask, outcome: TransferOutcome, hooks: Hooks, serializer: any ResponseSerialization,
        result precomputed: Result<any Sendable, any Error>? = nil
    ) {
        // Taken out here, after the last streamed chunk: the closures are released when
        // this function returns, whatever they capture.
        let callbacks = task.takeCallbacks()
        let result: Result<any Sendable, any Error>
        if let precomputed {
            result = precomputed
        } else if let error = outcome.error {
            result = .failure(error)
        } else if task is DownloadTask || outcome.fileURL != nil {
            // As AFNetworking's: a download's response object is where its file is (a data
            // task the response hook turned into a download too).
            result = outcome.fileURL.map { .success($0) } ?? .failure(SessionError.fileWriteFailed("the download has no file"))
        } else if task.options.skipsSerializer || !task.options.collectsBody {
            // Raw-data calls (`data(for:)`) and tasks whose body was streamed away or not
            // kept have nothing for a serializer to read: the result is the raw body.
            result = .success(outcome.body ?? Data())
        } else {
            // Here, on the completion queue, never on the driver thread. The request goes
            // along so a serializer can accept the empty body of a HEAD.
            result = serializeResult(of: task, outcome: outcome, serializer: serializer)
        }
        let response = DataResponse(
            request: outcome.request, head: outcome.head, data: outcome.body,
            fileURL: outcome.fileURL, metrics: outcome.metrics, result: result)
        if case .failure(let error) = result, outcome.error == nil {
            task.recordSerializationError(error)
        }
        // Before the task is unregistered: an invalidation's event comes after its tasks'.
        monitorHub?.emit(.finished(task, outcome.metrics ?? .empty(), outcome.error, response))
        callbacks.completionHandler?(response)
        hooks.metrics?(task, outcome.metrics)
        hooks.taskDidComplete?(task, result.failureValue)
        unregister(task)
        let userInfo = CompletionUserInfo.make(
            body: outcome.body, result: result,
            serializer: serializer, serializerRan: !task.options.skipsSerializer && task.options.collectsBody,
            metrics: outcome.metrics, fileURL: outcome.fileURL)
        NotificationCenter.default.post(name: .taskDidComplete, object: task, userInfo: userInfo)
        if let temporary = outcome.fileURL, task.options.download?.fileURL == temporary || !(task is DownloadTask) {
            // No destination took the file: like URLSession's, it is gone once the
            // completion handler (which may move it) and the observers have run.
            try? FileManager.default.removeItem(at: temporary)
        }
        // A download's file stays claimed until it left the path resume data may name.
        (task as? DownloadTask)?.releaseFileClaim()
    }

    func post(_ name: Notification.Name, for task: SessionTask) {
        completionQueue.async {
            NotificationCenter.default.post(name: name, object: task)
        }
    }

    private func unregister(_ task: SessionTask) {
        let finishInvalidation = state.withLock { state -> Bool in
            state.tasks[task.taskIdentifier] = nil
            guard state.draining.remove(task.taskIdentifier) != nil else { return false }
            return state.invalidation == .invalidating && state.draining.isEmpty
        }
        if finishInvalidation { shutDownDriver() }
    }

    /// Cancels a started task's transfer. A start parked for a reset is taken back and the
    /// task completed here; so is a task whose driver is gone (nobody else will complete it).
    func cancelTransfer(of task: SessionTask, with error: SessionError) {
        let wasParked = state.withLock { state -> Bool in
            guard let index = state.parkedStarts.firstIndex(where: { $0 === task }) else { return false }
            state.parkedStarts.remove(at: index)
            return true
        }
        if wasParked || !submit(.cancel(task, error)) {
            complete(task, outcome: TransferOutcome(error: error, request: task.currentRequest))
        }
    }

    // MARK: - Invalidation

    /// Stops accepting tasks; cancels the unfinished ones when asked; shuts the driver down
    /// once none is left. `completion` runs (on the completion queue) after the driver has
    /// freed every curl handle — at once if that already happened.
    ///
    /// With `resetting`, the engine comes back with a fresh driver (new multi handle,
    /// connection pool, DNS and TLS session caches) once the old one is gone; hooks and
    /// settings stay. Tasks created while it is invalidating fail with `.sessionInvalidated`.
    func invalidate(cancelingTasks: Bool, resetting: Bool = false, completion: (@Sendable () -> Void)? = nil) {
        enum Step { case begin([SessionTask]), wait([SessionTask]), alreadyDone(DispatchQueue) }
        let step = state.withLock { state -> Step in
            switch state.invalidation {
            case .invalidated:
                return .alreadyDone(state.completionQueue)
            case .invalidating:
                if let completion { state.invalidationWaiters.append(completion) }
                if !resetting { state.resetsAfterInvalidation = false }
                // A second reset cancels what the first waits for, not the fresh session's
                // tasks; an invalidation for good cancels those too.
                let cancelled = state.tasks.values.filter { !resetting || state.draining.contains($0.taskIdentifier) }
                return .wait(cancelled)
            case .active:
                state.invalidation = .invalidating
                state.resetsAfterInvalidation = resetting
                state.draining = Set(state.tasks.keys)
                if resetting { resetPending.store(true, ordering: .releasing) }
                if let completion { state.invalidationWaiters.append(completion) }
                return .begin(Array(state.tasks.values))
            }
        }
        switch step {
        case .alreadyDone(let queue):
            if let completion { queue.async(execute: completion) }
            return
        case .wait(let tasks):
            if cancelingTasks { for task in tasks where task.state != .completed { task.cancel(with: .cancelled) } }
            return
        case .begin(let tasks):
            if cancelingTasks {
                for task in tasks { task.cancel(with: .cancelled) }
            }
            if state.withLock({ $0.draining.isEmpty }) { shutDownDriver() }
        }
    }

    private let driverShutdownSent = Mutex(false)

    private func shutDownDriver() {
        let first = driverShutdownSent.withLock { sent -> Bool in
            defer { sent = true }
            return !sent
        }
        guard first else { return }
        let sent = submit(.shutdown { [self] in self.didShutDown() })
        if !sent { didShutDown() }
    }

    private func didShutDown() {
        let resetRequested = state.withLock { $0.resetsAfterInvalidation }
        if resetRequested, configuration.httpShouldSetCookies {
            // Before any new task can start: a reset session sends none of the old cookies.
            configuration.cookieJar?.removeAll()
        }
        // A reset session (AFNetworking builds a new NSURLSession) forgets session credentials.
        credentialStore.removeAll()
        if resetRequested { renewCachePartition() }  // and the previous user's private cache entries
        let fresh = resetRequested ? makeFreshDriver() : nil
        let (queue, hook, waiters, parked, resets) = state.withLock { state in
            // A reset cancelled meanwhile (the manager went away) leaves the new driver unused.
            let resets = fresh != nil && state.resetsAfterInvalidation
            state.invalidation = resets ? .active : .invalidated
            state.resetsAfterInvalidation = false
            let parked = state.parkedStarts
            state.parkedStarts = []
            resetPending.store(false, ordering: .releasing)
            defer {
                state.invalidationWaiters.removeAll()
                // An invalidated manager calls no hook again: release them, so a hook that
                // captures its manager does not keep it alive. A reset manager keeps them.
                if !resets { state.hooks = Hooks() }
            }
            if resets, let fresh {
                driverBox.withLock { $0 = fresh }
                driverShutdownSent.withLock { $0 = false }
            }
            return (state.completionQueue, state.hooks.sessionDidBecomeInvalid, state.invalidationWaiters, parked, resets)
        }
        if let fresh, driver !== fresh {
            // Unused: shut it down at once (its thread exits when it sees the request).
            fresh.submit(.shutdown {})
        }
        // Tasks resumed during the reset start now, on the fresh session (or fail: no reset),
        // through the response cache as it is now (the old user's entries left behind).
        for task in parked {
            if resets {
                start(task)
            } else {
                complete(task, outcome: TransferOutcome(error: .sessionInvalidated, request: task.currentRequest))
            }
        }
        monitorHub?.emit(.invalidated)
        debugLog?.debug("driver stopped\(resets ? ", the session starts again" : "")")
        queue.async {
            hook?(nil)
            for waiter in waiters { waiter() }
        }
    }

    /// A new driver for a reset; nil when libcurl refuses (the engine then stays invalidated).
    private func makeFreshDriver() -> TransferDriver? {
        let number = SessionEngine.managerCounter.withLock { counter -> Int in
            counter += 1
            return counter
        }
        return try? TransferDriver(configuration: configuration, engine: self, identifier: number)
    }

    var invalidationState: Invalidation { state.withLock { $0.invalidation } }

    /// Runs `serializer` and boxes its output without `Optional` layers; a nil output (an
    /// empty JSON body) becomes a boxed `Optional<any Sendable>.none`, so `value as? T` is nil.
    static func serialize(
        _ serializer: any ResponseSerialization, request: URLRequest?, head: HTTPResponseHead?, data: Data?
    ) throws -> any Sendable {
        let boxed = try serializer.engineSendableResponseObject(for: request, head: head, data: data)
        // The raw-bytes serializer's output, found without the dynamic Optional check below.
        if let data = boxed as? Data { return data }
        if let value = boxed,
            let unwrapped = OptionalFlattening.nonNone(value)
        {
            return unwrapped
        }
        let none: (any Sendable)? = nil
        return none
    }
}

extension Result {
    var failureValue: Failure? {
        if case .failure(let error) = self { return error }
        return nil
    }
}

extension PreparedRequest {
    /// Stands in for a request that failed validation; it is never sent.
    static func placeholder(for request: URLRequest) -> PreparedRequest {
        let url = request.url ?? URL(fileURLWithPath: "/")
        return PreparedRequest(
            url: url, urlString: url.absoluteString, method: "GET", headerLines: [], acceptEncoding: "",
            body: .none, hasCookieHeader: false)
    }
}

extension SessionTask {
    /// Marks a task whose request cannot be sent: `resume()` completes it with `error`
    /// without touching the driver.
    func failBeforeStart(_ error: SessionError) {
        protected.withLock {
            $0.prepared = nil
            $0.startFailure = error
        }
    }

    func recordSerializationError(_ error: any Error) {
        protected.withLock { $0.error = error }
    }
}
