import Dispatch
import Foundation
import Synchronization
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Creates and runs tasks over one libcurl multi handle: AFNetworking's `AFURLSessionManager`.
///
/// One manager owns one connection pool, DNS cache and TLS session cache, driven by a
/// dedicated thread, and a cookie jar (`cookieJar`; managers given the same jar share it,
/// and with it the DNS and TLS session caches). Create one manager per configuration and keep it: connections are
/// reused across its tasks. Completion handlers run on `completionQueue` (a serial queue of
/// the manager's own by default; a Linux command-line program never drains the main queue),
/// hooks, progress and streamed body chunks on `operationQueue`.
///
/// Releasing the manager cancels its unfinished tasks and frees every curl handle on the
/// driver thread; `invalidateSessionCancelingTasks(_:resetSession:)` does the same on demand.
open class URLSessionManager: @unchecked Sendable {
    // @unchecked Sendable: every mutable member lives in `engine` behind its Mutex; the
    // class is open for AFNetworking-style subclassing (HTTPSessionManager), so the compiler
    // cannot check that subclasses keep to this rule: they must.

    let engine: SessionEngine

    /// The configuration this manager was created with (a copy: later changes to yours do
    /// not affect it).
    public let configuration: SessionConfiguration

    /// Creates a manager and starts its driver thread. With `httpShouldSetCookies` on and no
    /// `cookieJar` in `configuration`, the manager creates a jar of its own.
    ///
    /// - Parameters:
    ///   - configuration: Timeouts, headers, limits and caches for every task.
    ///   - eventMonitors: Observers of every task's events, called on their own queues in
    ///     the order given (see `EventMonitor`).
    public init(configuration: SessionConfiguration = .default, eventMonitors: [any EventMonitor] = []) {
        var configuration = configuration
        if configuration.httpShouldSetCookies && configuration.cookieJar == nil {
            configuration.cookieJar = CookieJar(holdingHSTSForOneManager: configuration.strictTransportSecurity != .disabled)
        }
        self.configuration = configuration
        engine = SessionEngine(configuration: configuration, eventMonitors: eventMonitors)
        engine.monitorHub?.attach(to: self)
    }

    /// The monitors given at init, in order.
    public var eventMonitors: [any EventMonitor] { engine.monitorHub?.monitors ?? [] }

    /// The jar this manager sends and stores cookies with: the configuration's, or the one the
    /// manager created. nil when `httpShouldSetCookies` is off.
    public var cookieJar: CookieJar? {
        configuration.httpShouldSetCookies ? configuration.cookieJar : nil
    }

    deinit {
        // Only a request: the driver thread cancels and tears down on its own context.
        engine.invalidate(cancelingTasks: true)
    }

    // MARK: - Queues

    /// Where completion handlers run. Default: a serial queue owned by the manager.
    public var completionQueue: DispatchQueue {
        get { engine.completionQueue }
        set { engine.completionQueue = newValue }
    }

    /// The serial queue where hooks, progress closures and streamed body chunks run
    /// (AFNetworking's delegate queue). Curl itself runs on the manager's driver thread.
    public var operationQueue: DispatchQueue { engine.operationQueue }

    // MARK: - Tasks

    /// Unfinished tasks, in creation order.
    public var tasks: [SessionTask] { engine.unfinishedTasks }
    /// Unfinished data tasks (upload tasks included, as in URLSession).
    public var dataTasks: [DataTask] { tasks.compactMap { $0 as? DataTask } }
    /// Unfinished upload tasks.
    public var uploadTasks: [UploadTask] { tasks.compactMap { $0 as? UploadTask } }

    /// Creates a suspended data task whose body is collected in memory.
    ///
    /// - Parameters:
    ///   - request: The request; its `httpBody` or `httpBodyStream` is sent.
    ///   - uploadProgress: Called on `operationQueue` as the body is sent.
    ///   - downloadProgress: Called on `operationQueue` as the response arrives.
    ///   - completionHandler: Called once on `completionQueue` with the outcome.
    /// - Returns: The task; call `resume()` to start it. An invalid request (no URL, an
    ///   unsupported scheme, CR/LF in a header) is never sent: the task completes with a
    ///   `SessionError` when resumed.
    open func dataTask(
        with request: URLRequest,
        uploadProgress: (@Sendable (Progress) -> Void)? = nil,
        downloadProgress: (@Sendable (Progress) -> Void)? = nil,
        completionHandler: (@Sendable (DataResponse) -> Void)?
    ) -> DataTask {
        let options = TaskOptions(
            collectsBody: completionHandler != nil, completionHandler: completionHandler,
            uploadProgress: uploadProgress, downloadProgress: downloadProgress)
        return engine.makeTask(DataTask.self, request: request, options: options)
    }

    /// Creates a suspended data task that hands the body to `dataHandler` chunk by chunk
    /// (on `operationQueue`) instead of collecting it: memory stays flat whatever the size.
    ///
    /// The transfer pauses while more than 4 MiB wait in `dataHandler` and resumes as it
    /// catches up. The completion handler's `data` is nil.
    open func dataTask(
        with request: URLRequest,
        dataHandler: @escaping @Sendable (Data) -> Void,
        completionHandler: (@Sendable (DataResponse) -> Void)?
    ) -> DataTask {
        let options = TaskOptions(
            collectsBody: false, completionHandler: completionHandler, dataHandler: dataHandler)
        return engine.makeTask(DataTask.self, request: request, options: options)
    }

    /// Creates a suspended upload task sending `bodyData` (the request's own body is ignored).
    open func uploadTask(
        with request: URLRequest, from bodyData: Data,
        progress: (@Sendable (Progress) -> Void)? = nil,
        completionHandler: (@Sendable (DataResponse) -> Void)?
    ) -> UploadTask {
        var request = request
        request.httpBody = bodyData
        return engine.makeTask(UploadTask.self, request: request, options: uploadOptions(progress, completionHandler))
    }

    /// Creates a suspended upload task streaming the file at `fileURL`: the file is read in
    /// buffer-sized chunks, never loaded whole.
    open func uploadTask(
        with request: URLRequest, fromFile fileURL: URL,
        progress: (@Sendable (Progress) -> Void)? = nil,
        completionHandler: (@Sendable (DataResponse) -> Void)?
    ) -> UploadTask {
        var request = request
        request.httpBody = nil
        request.httpBodyStream = nil
        var options = uploadOptions(progress, completionHandler)
        options.defaultReceiveBufferSize = 16 * 1024
        let task = engine.makeTask(UploadTask.self, request: request, options: options)
        task.replaceBody(with: .file(fileURL))
        return task
    }

    /// Creates a suspended upload task streaming the request's `httpBodyStream`. Its length
    /// comes from the request's `Content-Length` header; without one the body is sent with
    /// chunked transfer coding.
    open func uploadTask(
        withStreamedRequest request: URLRequest,
        progress: (@Sendable (Progress) -> Void)? = nil,
        completionHandler: (@Sendable (DataResponse) -> Void)?
    ) -> UploadTask {
        engine.makeTask(UploadTask.self, request: request, options: uploadOptions(progress, completionHandler))
    }

    private func uploadOptions(
        _ progress: (@Sendable (Progress) -> Void)?, _ completionHandler: (@Sendable (DataResponse) -> Void)?
    ) -> TaskOptions {
        TaskOptions(collectsBody: completionHandler != nil, completionHandler: completionHandler, uploadProgress: progress)
    }

    /// The upload progress of a task of this manager.
    public func uploadProgress(for task: SessionTask) -> Progress? {
        task.engine === engine ? task.uploadProgress : nil
    }

    /// The download progress of a task of this manager.
    public func downloadProgress(for task: SessionTask) -> Progress? {
        task.engine === engine ? task.downloadProgress : nil
    }

    // MARK: - Invalidation

    /// Stops the manager: no new task can be created (they complete with
    /// `.sessionInvalidated`); with `cancelPendingTasks`, unfinished tasks are cancelled,
    /// otherwise they run to completion first. Then the driver thread frees every curl
    /// handle, the session-invalid hook runs and `.sessionDidInvalidate` is posted.
    ///
    /// With `resetSession` (AFNetworking's reset, which builds a fresh session), the manager
    /// then works again on a fresh driver: new connections, DNS and TLS session caches, and an
    /// emptied ``cookieJar`` (a jar shared with other managers is emptied for them too). Its
    /// hooks, queues, serializer and security policy stay. Tasks created after this call
    /// returns belong to the fresh session: they are accepted at once, and their transfers
    /// start as soon as the old session is gone (its tasks cancelled or, without
    /// `cancelPendingTasks`, finished) and the jar and session credentials are cleared, so
    /// they never run on the old session or send its cookies.
    ///
    /// - Parameters:
    ///   - cancelPendingTasks: Cancel unfinished tasks instead of letting them finish.
    ///   - resetSession: Come back with a fresh session and an empty cookie jar.
    open func invalidateSessionCancelingTasks(_ cancelPendingTasks: Bool, resetSession: Bool) {
        // The engine empties the jar itself on a reset, before the fresh driver takes tasks.
        // Weak: a reset must not keep a manager that its owner released alive until it ends.
        engine.invalidate(cancelingTasks: cancelPendingTasks, resetting: resetSession) { [weak self] in
            NotificationCenter.default.post(name: .sessionDidInvalidate, object: self)
        }
    }

    /// Waits until the manager has finished invalidating (for orderly shutdown in tools and tests).
    public func waitUntilInvalidated() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            engine.invalidate(cancelingTasks: false) { continuation.resume() }
        }
    }

    // MARK: - Hooks

    /// Decides each redirect: return the request to send (the proposed one, a changed one)
    /// or nil to deliver the redirect response itself. Runs on `operationQueue`. Without a
    /// hook, redirects are followed up to `maximumRedirects`, and `Authorization`, `Cookie`
    /// and `Proxy-Authorization` never cross to another origin.
    public func setTaskWillPerformHTTPRedirectionBlock(
        _ block: (@Sendable (SessionTask, HTTPURLResponse, URLRequest) -> URLRequest?)?
    ) {
        engine.updateHooks { $0.redirect = block }
    }

    /// Called on `operationQueue` with each chunk of every data task's body, as it arrives (an
    /// answer from the response cache: its whole body, in one chunk).
    /// A 4xx or 5xx answer the retrier may still send again is shown only once it is the
    /// task's (the retrier declined it): the hook never sees the body of a retried attempt.
    public func setDataTaskDidReceiveDataBlock(_ block: (@Sendable (DataTask, Data) -> Void)?) {
        engine.updateHooks { $0.dataReceived = block }
    }

    /// Decides whether failed attempts are sent again (nil, the default: never). See
    /// ``RequestRetrier`` and ``RetryPolicy``; applies to attempts that end after it is set.
    /// Asked before ``interceptor``'s retrier: the interceptor is asked only when this one
    /// answers `.doNotRetry`.
    public var requestRetrier: (any RequestRetrier)? {
        get { engine.requestRetrier }
        set { engine.requestRetrier = newValue }
    }

    /// Changes each request when its task starts, and again before each retry (nil, the
    /// default: requests go as they are). See ``RequestAdapter``. Runs before
    /// ``interceptor``'s adapter, which is given this one's output.
    public var requestAdapter: (any RequestAdapter)? {
        get { engine.requestAdapter }
        set { engine.requestAdapter = newValue }
    }

    /// An adapter and retrier in one (nil, the default), e.g. an ``AuthenticationInterceptor``
    /// or an ``Interceptor`` chain. It works alongside the two settings above as if all were
    /// one ``Interceptor``: adaptation runs ``requestAdapter`` then this; a failed attempt asks
    /// ``requestRetrier`` first and this only when that answers `.doNotRetry`. Applies to tasks
    /// that start, and attempts that end, after it is set.
    public var interceptor: (any RequestInterceptor)? {
        get { engine.interceptor }
        set { engine.interceptor = newValue }
    }

    /// Asked on `operationQueue` when a data task's final response head arrives (not for
    /// redirects the manager follows): `.allow` lets the body come, `.cancel` ends the task
    /// with `SessionError.cancelled`, `.becomeDownload` sends the body to a file instead of
    /// memory (see `ResponseDisposition.becomeDownload`). The transfer waits for the answer without reading the
    /// body (its idle timeout does not run meanwhile). An answer from the response cache is
    /// asked about too, as URLSession asks. Applies to transfers that start after it is set.
    public func setDataTaskDidReceiveResponseBlock(
        _ block: (@Sendable (DataTask, HTTPURLResponse) -> ResponseDisposition)?
    ) {
        engine.updateHooks { $0.dataTaskDidReceiveResponse = block }
    }

    /// Called on `operationQueue` as each task's request body is sent, with the bytes sent
    /// since the last call, the total sent, and the total expected (-1 when unknown).
    /// Updates are coalesced: a fast upload reports in few, larger steps, and the last call's
    /// total is the whole body, before the task's completion handler runs.
    public func setTaskDidSendBodyDataBlock(_ block: (@Sendable (SessionTask, Int64, Int64, Int64) -> Void)?) {
        engine.updateHooks { $0.sentBodyData = block }
    }

    /// Called on `completionQueue` after each task's completion handler.
    public func setTaskDidCompleteBlock(_ block: (@Sendable (SessionTask, (any Error)?) -> Void)?) {
        engine.updateHooks { $0.taskDidComplete = block }
    }

    /// Called on `completionQueue` with each task's metrics when it completes.
    public func setTaskDidFinishCollectingMetricsBlock(_ block: (@Sendable (SessionTask, TaskMetrics?) -> Void)?) {
        engine.updateHooks { $0.metrics = block }
    }

    /// Called on `completionQueue` once the manager has been invalidated.
    public func setSessionDidBecomeInvalidBlock(_ block: (@Sendable ((any Error)?) -> Void)?) {
        engine.updateHooks { $0.sessionDidBecomeInvalid = block }
    }
}

extension SessionTask {
    /// Replaces the prepared body before the task starts (file uploads).
    func replaceBody(with body: RequestBody) {
        protected.withLock { state in
            guard let prepared = state.prepared else { return }
            state.prepared = prepared.with(body: body)
            if case .file(let url) = body { state.bodyFile = url }
            if case .feed(let feed) = body, let length = feed.length { state.bytesExpectedToSend = length }
            if case .file(let url) = body,
                let size = (try? FileManager.default.attributesOfItem(atPath: url.path))?[.size] as? Int64
            {
                state.bytesExpectedToSend = size
            }
        }
    }
}
