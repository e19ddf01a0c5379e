import Foundation
import Serialization
import Synchronization
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// A transfer run by a `URLSessionManager`: AFNetworking's `NSURLSessionTask`.
///
/// A new task starts suspended; `resume()` starts it. `state` changes at once when you call
/// `resume()`, `suspend()` or `cancel()`, and is `.completed` before the completion handler
/// runs. All members may be used from any thread.
public class SessionTask: @unchecked Sendable, Hashable, CustomStringConvertible {
    // @unchecked Sendable: every mutable member lives in `protected`, a Mutex; the rest are
    // immutable `let`s of Sendable types.

    /// The states a task moves through.
    public enum State: Sendable, Hashable {
        /// Transferring (or waiting for a connection).
        case running
        /// Not started yet, or paused by `suspend()`.
        case suspended
        /// `cancel()` was called; completion with `SessionError.cancelled` follows.
        case canceling
        /// Finished: the completion handler has run or is about to.
        case completed
    }

    struct MutableState {
        /// A new task's state, made where it is stored (`SessionTask.init`): built in a local
        /// and then moved into the lock, the struct was copied and the local destroyed, a few
        /// hundred instructions per task.
        init(callbacks: TaskCallbacks, request: URLRequest, prepared: PreparedRequest) {
            self.callbacks = callbacks
            currentRequest = request
            originalRequest = request
            self.prepared = prepared
            if case .data(let data) = prepared.body { bytesExpectedToSend = Int64(data.count) }
        }
        var lifecycle = TaskLifecycle()
        var currentRequest: URLRequest?
        /// The caller's request, replaced by the adapted one when the first attempt's request
        /// was adapted (`SessionEngine.adaptThenStart`).
        var originalRequest: URLRequest?
        /// The caller's request as it was before the first adaptation replaced
        /// `originalRequest`: what a retry's adapters adapt again (nil when none ran).
        var unadaptedRequest: URLRequest?
        /// The task's own interceptor (`interceptor`).
        var interceptor: (any RequestInterceptor)?
        var head: HTTPResponseHead?
        var error: (any Error)?
        var bytesReceived: Int64 = 0
        var bytesSent: Int64 = 0
        var bytesExpectedToReceive: Int64 = -1
        var bytesExpectedToSend: Int64 = -1
        var priority: Float = 0.5
        /// Per-task rate caps in bytes per second (`SessionTask+Rates.swift`); 0: none.
        var maximumReceiveRate: Double = 0
        var maximumSendRate: Double = 0
        var taskDescription: String?
        /// Ownership of the prepared request passes to the driver when the task starts.
        var prepared: PreparedRequest?
        /// The file an upload from a file sends (kept for `curlDescription`: `prepared` goes to the driver).
        var bodyFile: URL?
        var progressUpdatePending = false
        /// Body bytes already reported to the send-body-data hook, of the attempt
        /// `sendAttemptReported`.
        var bytesSentReported: Int64 = 0
        /// Counts the attempts that sent a body (a retry, a 307's hop; `beginSendAttempt`):
        /// libcurl counts each attempt's bytes from 0.
        var sendAttempt = 0
        /// The attempt `bytesSentReported` counts bytes of.
        var sendAttemptReported = 0
        /// Body bytes already reported to the download-wrote-data hook (from the resume offset
        /// on, for a resumed download).
        var bytesWrittenReported: Int64?
        /// Body bytes the task had before the current response (a resumed download's).
        var bodyOffset: Int64 = 0
        /// Internal observers of the Progress objects (the progress bindings): called on the
        /// operation queue after each update, released when the task completes.
        var progressObservers: [(upload: Bool, notify: @Sendable (Progress) -> Void)] = []
        /// Set when the request failed validation: `resume()` completes with it.
        var startFailure: SessionError?
        /// What the response cache found for this task (Features/Cache).
        var cacheContext: CacheContext?
        /// The caller's closures; emptied when the task completes (see `takeCallbacks()`).
        var callbacks: TaskCallbacks
    }

    /// Unique within its manager.
    public let taskIdentifier: Int
    /// Where the manager's registry keeps the task until its completion (`TaskRegistry`).
    let registrySlot: Int
    /// The request the task was created with; once the task started under a request adapter
    /// (`URLSessionManager.requestAdapter` or `interceptor`), the request as adapted for its
    /// first attempt.
    public var originalRequest: URLRequest? { protected.withLock { $0.originalRequest } }
    /// The task's fixed choices. Its closures are not kept here but in `protected`, so that
    /// they can be released when the task completes.
    let options: TaskOptions
    /// Whether a data handler receives the body in chunks (fixed at creation; read by the
    /// driver for every chunk, so it is not behind the lock).
    let streamsBody: Bool
    /// Whether a progress closure was given (fixed at creation).
    let reportsProgress: Bool
    /// Set once `interceptor` was given, so tasks without one take no lock for it.
    let hasOwnInterceptor = Atomic<Bool>(false)
    /// Set when a control is bound to the task (`TaskStateBinding`): its notifications are
    /// posted even where the configuration turned them off (`postsTaskNotifications`).
    let isFollowedByBinding = Atomic<Bool>(false)
    /// Set by the driver once a redirect took the task to another origin: from then on no
    /// hop carries the configuration's or the adapters' credentials, even one back on the
    /// first origin. Read by `AuthenticationInterceptor`, whose refresh cannot cure a refusal
    /// of a request it was not allowed to authenticate.
    let hasCrossedOrigin = Atomic<Bool>(false)
    /// How many of this task's attempts `AuthenticationInterceptor` retried for a refusal:
    /// its limit counts these, not the attempts other retriers asked for (six 503s retried by
    /// a `RetryPolicy` left no room for the one refresh a 401 then needed).
    let authenticationRetries = Atomic<Int>(0)
    let engine: SessionEngine
    let protected: Mutex<MutableState>
    /// The two `Progress` objects, made on first use: most tasks never need them, and each
    /// costs a thread-local lookup and several allocations. Once one exists, the task keeps
    /// it current whether or not a progress closure was given.
    let progressObjects = Mutex<(upload: Progress?, download: Progress?)>((nil, nil))
    /// Set once a `Progress` object exists: progress updates are then scheduled for it.
    let hasProgressObjects = Atomic<Bool>(false)

    /// Upload progress; updated on the manager's operation queue.
    var uploadProgress: Progress { progress(upload: true) }

    /// Download progress; updated on the manager's operation queue.
    var downloadProgress: Progress { progress(upload: false) }

    /// The upload or download `Progress`, made on first use with the counts so far (finished
    /// if the task already completed). Cancelling it cancels the task; pausing and resuming it
    /// suspends and resumes the task.
    func progress(upload: Bool) -> Progress {
        progressObjects.withLock { objects in
            if let existing = upload ? objects.upload : objects.download { return existing }
            let snapshot = protected.withLock { $0 }
            let progress = Progress(parent: nil, userInfo: nil)  // never implicitly attached to Progress.current()
            Self.update(progress, upload: upload, from: snapshot)
            if snapshot.lifecycle.state == .completed { Self.finish(progress, succeeded: snapshot.error == nil) }
            progress.isCancellable = true
            progress.isPausable = true
            // Weak: the task owns its Progress objects, which must not own the task.
            progress.cancellationHandler = { [weak self] in self?.cancel() }
            progress.pausingHandler = { [weak self] in self?.suspend() }
            progress.resumingHandler = { [weak self] in self?.resume() }
            if upload { objects.upload = progress } else { objects.download = progress }
            hasProgressObjects.store(true, ordering: .releasing)
            return progress
        }
    }

    /// Copies the counts of `snapshot` into `progress` (upload or download side).
    static func update(_ progress: Progress, upload: Bool, from snapshot: MutableState) {
        if upload {
            progress.totalUnitCount = snapshot.bytesExpectedToSend
            progress.completedUnitCount = snapshot.bytesSent
        } else {
            progress.totalUnitCount = snapshot.head == nil ? -1 : snapshot.bytesExpectedToReceive
            progress.completedUnitCount = snapshot.bytesReceived
        }
    }

    /// A completed task's progress: finished on success (an unknown or zero total becomes the
    /// count done, at least 1, so `isFinished` and `fractionCompleted` read true and 1), left
    /// where it stopped on failure.
    static func finish(_ progress: Progress, succeeded: Bool) {
        guard succeeded else { return }
        let done = max(progress.completedUnitCount, progress.totalUnitCount, 1)
        progress.totalUnitCount = done
        progress.completedUnitCount = done
    }

    /// Brings existing `Progress` objects to their final state (operation queue, after every
    /// progress update of the task).
    func finishProgress() {
        let (upload, download) = progressObjects.withLock { ($0.upload, $0.download) }
        guard upload != nil || download != nil else { return }
        let snapshot = protected.withLock { state -> MutableState in
            defer { state.progressObservers = [] }  // the task ends: its observers go
            return state
        }
        for (progress, isUpload) in [(upload, true), (download, false)] {
            guard let progress else { continue }
            Self.update(progress, upload: isUpload, from: snapshot)
            Self.finish(progress, succeeded: snapshot.error == nil)
            for observer in snapshot.progressObservers where observer.upload == isUpload { observer.notify(progress) }
        }
    }

    /// Calls `notify` on the operation queue with the upload or download `Progress` after each
    /// of its updates, until the task completes; at once (on that queue) with its state now.
    func observeProgress(upload: Bool, _ notify: @escaping @Sendable (Progress) -> Void) {
        let progress = upload ? uploadProgress : downloadProgress  // made now: updates flow to it
        protected.withLock { state in
            // A completed task's Progress was made finished: the call below is its last news.
            if state.lifecycle.state != .completed { state.progressObservers.append((upload, notify)) }
        }
        engine.operationQueue.async { notify(progress) }
    }

    /// Whether progress has a consumer: a closure, or a `Progress` object someone asked for.
    var observesProgress: Bool { reportsProgress || hasProgressObjects.load(ordering: .acquiring) }

    /// `options` is consumed: its closures move into the lock, the rest into `options`, with
    /// no copy of either struct.
    required init(
        identifier: Int, registrySlot: Int, request: URLRequest, prepared: PreparedRequest,
        options: consuming TaskOptions, engine: SessionEngine
    ) {
        taskIdentifier = identifier
        self.registrySlot = registrySlot
        streamsBody = options.callbacks.dataHandler != nil || options.responseStream != nil
        reportsProgress = options.callbacks.uploadProgress != nil || options.callbacks.downloadProgress != nil
        self.engine = engine
        let callbacks = options.callbacks
        options.callbacks = TaskCallbacks()
        self.options = options
        protected = Mutex(MutableState(callbacks: callbacks, request: request, prepared: prepared))
    }

    // MARK: - Public state

    /// The request being sent now: differs from `originalRequest` after a redirect.
    public var currentRequest: URLRequest? { protected.withLock { $0.currentRequest } }
    /// The response, once its head arrived (built from ``responseHead`` on first use).
    public var response: HTTPURLResponse? { responseHead?.httpURLResponse }
    /// The response's status line and header fields as received, once its head arrived:
    /// cheaper to read than ``response``.
    public var responseHead: HTTPResponseHead? { protected.withLock { $0.head } }
    /// The task's state.
    public var state: State { protected.withLock { $0.lifecycle.state } }
    /// The error the task failed with, once completed.
    public var error: (any Error)? { protected.withLock { $0.error } }
    /// Body bytes received so far (after content decoding).
    public var countOfBytesReceived: Int64 { protected.withLock { $0.bytesReceived } }
    /// Body bytes sent so far.
    public var countOfBytesSent: Int64 { protected.withLock { $0.bytesSent } }
    /// The response's `Content-Length`, or -1 when unknown.
    public var countOfBytesExpectedToReceive: Int64 { protected.withLock { $0.bytesExpectedToReceive } }
    /// The request body's length, or -1 when unknown.
    public var countOfBytesExpectedToSend: Int64 { protected.withLock { $0.bytesExpectedToSend } }
    /// A hint from 0 (low) to 1 (high); default 0.5. Sent as the HTTP/2 stream weight
    /// (1 + priority × 255) when the request can be multiplexed; read when the transfer starts.
    public var priority: Float {
        get { protected.withLock { $0.priority } }
        set { protected.withLock { $0.priority = min(1, max(0, newValue)) } }
    }
    /// This task's own adapter and retrier (nil, the default), beside the manager's: set it
    /// before `resume()`. Its adapter runs after the manager's (`requestAdapter`, then
    /// `interceptor`) and is given their output; its retrier is asked after the manager's,
    /// only when they answer `.doNotRetry`. A change after `resume()` applies from the next
    /// failed attempt on.
    public var interceptor: (any RequestInterceptor)? {
        get { hasOwnInterceptor.load(ordering: .acquiring) ? protected.withLock { $0.interceptor } : nil }
        set {
            protected.withLock { $0.interceptor = newValue }
            hasOwnInterceptor.store(true, ordering: .releasing)
        }
    }

    /// A description of your choosing.
    public var taskDescription: String? {
        get { protected.withLock { $0.taskDescription } }
        set { protected.withLock { $0.taskDescription = newValue } }
    }

    // MARK: - Control

    /// Starts the task, or continues it after `suspend()`.
    public func resume() {
        let (action, startFailure, postsNow) = protected.withLock { state in
            let action = state.lifecycle.resume()
            var postsNow = false
            // Under the lock, so racing calls report in the order they took effect, and
            // before the start: `taskDidResume` precedes the first `willSend`, and the
            // completion of a request that cannot be made (completed inside this call) or of
            // a cached answer (perhaps before this call returns).
            if action != .none {
                if let hub = engine.monitorHub { hub.emit(.resumed(self)) }
                postsNow = !EngineObservers.queueStateNotice(.taskDidResume, for: self, engine: engine)
            }
            return (action, state.startFailure, postsNow)
        }
        if postsNow { EngineObservers.postStateNow(.taskDidResume, for: self, engine: engine) }
        switch action {
        case .start:
            if let startFailure {
                engine.complete(self, outcome: TransferOutcome(error: startFailure, request: currentRequest))
            } else {
                engine.start(self)
            }
        case .unpause:
            // Rare, and the driver may not know the task yet (its adapter still runs): posted
            // soon rather than left for a completion (`StateNotices`).
            engine.postStateNoticesSoon()
            engine.submit(.unpause(self))
        case .none: break
        }
    }

    /// Pauses a running task: its transfer stops reading and writing until `resume()`.
    /// While suspended the idle timeout does not run (as in URLSession); the resource
    /// timeout (`timeoutIntervalForResource`) does.
    public func suspend() {
        let (action, postsNow) = protected.withLock { state in
            let action = state.lifecycle.suspend()
            var postsNow = false
            if action == .pause {
                if let hub = engine.monitorHub { hub.emit(.suspended(self)) }
                postsNow = !EngineObservers.queueStateNotice(.taskDidSuspend, for: self, engine: engine)
            }
            return (action, postsNow)
        }
        guard action == .pause else { return }
        if postsNow {
            EngineObservers.postStateNow(.taskDidSuspend, for: self, engine: engine)
        } else {
            engine.postStateNoticesSoon()  // no completion follows a pause soon
        }
        engine.submit(.pause(self))
    }

    /// Cancels the task: it completes soon with `SessionError.cancelled`.
    public func cancel() {
        cancel(with: .cancelled)
    }

    func cancel(with error: SessionError) {
        let action = protected.withLock { state in
            let action = state.lifecycle.cancel()
            // Under the lock: the completion that follows (`markCompleted` takes it too)
            // reports after this, so `taskDidCancel` precedes `didCompleteWithError`.
            if action != .none, let hub = engine.monitorHub { hub.emit(.cancelled(self)) }
            return action
        }
        switch action {
        case .cancelTransfer: engine.cancelTransfer(of: self, with: error)
        case .completeWithoutTransfer: engine.complete(self, outcome: TransferOutcome(error: error, request: currentRequest))
        case .none: break
        }
    }

    /// A hook or handler of the caller's cancelled the task on the driver (the response
    /// hook's `.cancel`, a challenge handler's `.cancel`): the task reads `.canceling` and the
    /// monitors hear `taskDidCancel` before its completion, as after `cancel()`. The driver
    /// ends the transfer itself. Nothing when the task is cancelled or completed already.
    func noteCancelledByCaller() {
        protected.withLock { state in
            if state.lifecycle.cancel() != .none, let hub = engine.monitorHub { hub.emit(.cancelled(self)) }
        }
    }

    // MARK: - Hashable

    /// Tasks are equal when they are the same object.
    public static func == (lhs: SessionTask, rhs: SessionTask) -> Bool { lhs === rhs }
    /// Hashes the object identity.
    public func hash(into hasher: inout Hasher) { hasher.combine(ObjectIdentifier(self)) }

    /// "DataTask #3 GET http://… (running)".
    public var description: String {
        let request = originalRequest
        return "\(type(of: self)) #\(taskIdentifier) \(request?.httpMethod ?? "GET") \(request?.url?.absoluteString ?? "-") (\(state))"
    }
}

/// A task whose response body arrives in memory (or is streamed to a data handler).
public class DataTask: SessionTask, @unchecked Sendable {}  // adds no state: SessionTask's Mutex covers it

/// A data task that sends a body (from `Data`, a file or a stream).
public final class UploadTask: DataTask, @unchecked Sendable {}  // adds no state
