import Foundation
import Serialization
import Synchronization
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// What the driver and the engine tell a task as its transfer runs: the response, counts,
/// progress, redirects and completion (any thread; the task's lock orders them).
extension SessionTask {
    // MARK: - Driver-side updates

    func setCacheContext(_ context: CacheContext) {
        protected.withLock { $0.cacheContext = context }
    }

    var hasCacheContext: Bool { protected.withLock { $0.cacheContext != nil } }

    /// The cache's context while the transfer runs (left in place; `takeCacheContext` ends it).
    var cacheContext: CacheContext? { protected.withLock { $0.cacheContext } }

    /// The response the task completed with, replaced (the cache answered a 304 with the
    /// stored response) before its completion handler runs.
    func replaceHead(_ head: HTTPResponseHead) {
        protected.withLock { $0.head = head }
    }

    func takeCacheContext() -> CacheContext? {
        protected.withLock { state in
            defer { state.cacheContext = nil }
            return state.cacheContext
        }
    }

    /// Adds header lines to the request the task has not started yet (the cache's
    /// conditional fields).
    func addHeaderLines(_ lines: [String]) {
        protected.withLock { state in
            state.prepared = state.prepared?.adding(headerLines: lines)
        }
    }

    /// Starts the task's resource clock before the driver has it (an adaptation, a park for a
    /// reset) at `uptime`, unless it started earlier; returns its start.
    func startClockBeforeDriver(at uptime: UInt64) -> UInt64 {
        protected.withLock { state in
            guard let prepared = state.prepared else { return uptime }
            if let start = prepared.adaptationStart { return start }
            state.prepared = prepared.with(body: prepared.body, adaptationStart: uptime)
            return uptime
        }
    }

    /// Takes the first attempt's adapted request as the task's own (keeping the task's body,
    /// which may be a file or a stream set after creation). False when the task completed or
    /// is being cancelled meanwhile: the adapted request is then dropped.
    func adoptFirstRequest(_ adapted: AdaptedRequest) -> Bool {
        protected.withLock { state in
            guard state.lifecycle.state == .running || state.lifecycle.state == .suspended,
                let prepared = state.prepared
            else { return false }
            // The clock's earliest start: a park for a reset may have started it before.
            let start = [prepared.adaptationStart, adapted.started].compactMap { $0 }.min()
            state.prepared = adapted.prepared.with(body: prepared.body, adaptationStart: start)
            state.unadaptedRequest = state.originalRequest
            state.originalRequest = adapted.request
            state.currentRequest = adapted.request
            return true
        }
    }

    /// The first hop's request before any adapter (see `MutableState.unadaptedRequest`).
    var unadaptedRequest: URLRequest? { protected.withLock { $0.unadaptedRequest } }

    func takePrepared() -> PreparedRequest? {
        protected.withLock { state in
            defer { state.prepared = nil }
            return state.prepared
        }
    }

    func didRedirect(to request: URLRequest) {
        protected.withLock { $0.currentRequest = request }
    }

    /// `offset`: body bytes the task already had (a resumed download's partial file), counted
    /// in what is received and expected.
    /// The response head arrived; `announced` is its `Content-Length` when the caller
    /// already read it (the driver's parser noted it), else it is read from the head.
    func didReceive(head: HTTPResponseHead, announced knownLength: Int64? = nil, offset: Int64 = 0) {
        let announced = knownLength ?? head.expectedContentLength
        let expected = announced >= 0 ? announced + offset : -1
        protected.withLock {
            $0.head = head
            $0.bytesExpectedToReceive = expected
            if offset > 0 || $0.bodyOffset > 0 || $0.bytesReceived > 0 {
                // A resumed (or restarted) download: counts start from what is in the file.
                $0.bodyOffset = offset
                $0.bytesReceived = offset
                // A retry continuing this task's own bytes: what the written-data hook has not
                // heard of yet (an update still coalescing when the attempt was cut) is still
                // reported. A new body (offset 0), or resume data's bytes, start the count again.
                $0.bytesWrittenReported = offset > 0 ? $0.bytesWrittenReported.map { min($0, offset) } : nil
            }
        }
        scheduleProgressUpdate()
    }

    /// Another attempt is about to be sent: the response an earlier one delivered (a 503 a
    /// retrier retried) is not this task's any more. Kept, it stood beside a retry that failed
    /// before any answer (`response` 503, the error the retry's), while the task's
    /// `DataResponse` had no response. A download keeps its byte counts: the file keeps its
    /// bytes, and the next head counts from them.
    func forgetEarlierAttemptsResponse(keepingByteCounts: Bool) {
        protected.withLock { state in
            state.head = nil
            guard !keepingByteCounts else { return }
            state.bytesReceived = 0
            state.bytesExpectedToReceive = -1
        }
    }

    func didReceiveBodyBytes(_ total: Int64) {
        protected.withLock { $0.bytesReceived = total }
        scheduleProgressUpdate()
    }

    /// The body is about to be sent again (a retry, a redirect's hop): its bytes count from 0,
    /// as libcurl counts them, and the send-body-data hook reports them again.
    func beginSendAttempt() {
        protected.withLock { state in
            guard state.bytesSent > 0 else { return }  // nothing of it went yet
            state.sendAttempt += 1
            state.bytesSent = 0
        }
    }

    func didSend(bytes: Int64, expected: Int64) {
        let changed = protected.withLock { state -> Bool in
            guard state.bytesSent != bytes || state.bytesExpectedToSend != expected else { return false }
            state.bytesSent = bytes
            state.bytesExpectedToSend = expected  // -1: unknown (a body sent chunked)
            return true
        }
        if changed { scheduleProgressUpdate() }
    }

    /// Coalesces progress: at most one update waits on the operation queue per task.
    func scheduleProgressUpdate() {
        guard observesProgress || engine.observesSentBodyData.load(ordering: .acquiring)
            || (engine.observesWrittenData.load(ordering: .acquiring) && self is DownloadTask)
        else { return }
        let alreadyPending = protected.withLock { state -> Bool in
            defer { state.progressUpdatePending = true }
            return state.progressUpdatePending
        }
        guard !alreadyPending else { return }
        engine.operationQueue.async { [self] in
            let snapshot = protected.withLock { state -> MutableState in
                state.progressUpdatePending = false
                return state
            }
            publishProgress(snapshot, callbacks: snapshot.callbacks)
        }
    }

    /// Updates the Progress objects that exist and calls the progress closures (operation
    /// queue). A closure's object is made here on first use.
    func publishProgress(_ snapshot: MutableState, callbacks: TaskCallbacks) {
        let (existingUpload, existingDownload) = progressObjects.withLock { ($0.upload, $0.download) }
        if snapshot.bytesExpectedToSend > 0 || snapshot.bytesSent > 0,
            callbacks.uploadProgress != nil || existingUpload != nil
        {
            let progress = existingUpload ?? uploadProgress
            Self.update(progress, upload: true, from: snapshot)
            callbacks.uploadProgress?(progress)
        }
        if let hook = engine.hooks.sentBodyData {
            let delta = protected.withLock { state -> Int64 in
                // Another attempt sends the body again: its bytes are reported from 0, as the
                // task's count and its upload progress count them.
                if snapshot.sendAttempt != state.sendAttemptReported {
                    state.sendAttemptReported = snapshot.sendAttempt
                    state.bytesSentReported = 0
                }
                defer { state.bytesSentReported = max(state.bytesSentReported, snapshot.bytesSent) }
                return snapshot.bytesSent - state.bytesSentReported
            }
            if delta > 0 { hook(self, delta, snapshot.bytesSent, snapshot.bytesExpectedToSend) }
        }
        if let hook = engine.hooks.downloadDidWriteData, let download = self as? DownloadTask, snapshot.head != nil {
            let delta = protected.withLock { state -> Int64 in
                // A resumed download reports what it writes now, not the partial file's bytes.
                let reported = state.bytesWrittenReported ?? state.bodyOffset
                state.bytesWrittenReported = max(reported, snapshot.bytesReceived)
                return snapshot.bytesReceived - reported
            }
            if delta > 0 { hook(download, delta, snapshot.bytesReceived, snapshot.bytesExpectedToReceive) }
        }
        if snapshot.head != nil, callbacks.downloadProgress != nil || existingDownload != nil {
            let progress = existingDownload ?? downloadProgress
            Self.update(progress, upload: false, from: snapshot)
            callbacks.downloadProgress?(progress)
        }
        for observer in snapshot.progressObservers {
            if let progress = observer.upload ? existingUpload : existingDownload { observer.notify(progress) }
        }
    }

    /// Moves to `.completed` and records the outcome; false if it already had completed.
    func markCompleted(_ outcome: TransferOutcome) -> Bool {
        protected.withLock { state in
            guard state.lifecycle.complete() else { return false }
            state.error = outcome.error?.surfaced
            if let head = outcome.head { state.head = head }
            if let request = outcome.request { state.currentRequest = request }
            state.prepared = nil
            return true
        }
    }

    /// The caller's closures, while the task has not completed.
    var callbacks: TaskCallbacks { protected.withLock { $0.callbacks } }

    /// Hands the closures over and forgets them (completion queue, once the task completed):
    /// a closure that captures its own task or manager then keeps neither alive.
    func takeCallbacks() -> TaskCallbacks {
        protected.withLock { state in
            defer { state.callbacks = TaskCallbacks() }
            return state.callbacks
        }
    }

    /// Takes the completion handler alone out (a completed task's, for `resumeDirectly`): the
    /// completion queue then finds none to call, and the other closures stay for it.
    func takeCompletionHandler() -> (@Sendable (DataResponse) -> Void)? {
        protected.withLock { state in
            defer { state.callbacks.completionHandler = nil }
            return state.callbacks.completionHandler
        }
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

    /// The serializer's error, which becomes the task's `error`.
    func recordSerializationError(_ error: any Error) {
        protected.withLock { $0.error = error }
    }
}
