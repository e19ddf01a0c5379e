import Dispatch
import Foundation
import Serialization
import Synchronization
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Completion: exactly once per task, off the driver thread (the cache, the serializer, the
/// handler, the hooks, the monitors and the notification, in that order).
extension SessionEngine {
    // MARK: - Completion

    /// Completes a task exactly once: state first, then (on the completion queue) the
    /// serializer, the handler, the hooks and the notification.
    ///
    /// `batch`: the driver loop's, to send the completion to its queue at the end of the loop's
    /// pass with the others of that pass (nil: at once).
    func complete(_ task: SessionTask, outcome: TransferOutcome, batch: CompletionBatch<FinishedTransfer>? = nil) {
        guard task.markCompleted(outcome) else {
            // Another outcome won (a cancel that raced): a file this one kept is nobody's, and
            // so is its claim. A losing outcome without a file (a cancel read after the download
            // finished) holds no claim: the one held is the winner's, until its file has moved.
            if let file = outcome.fileURL {
                unlink(file.path)
                (task as? DownloadTask)?.releaseFileClaim()
            }
            return
        }
        if let cache = configuration.responseCache, outcome.head != nil {
            if outcome.error == nil, task.hasCacheContext {
                // On the cache's queue, never on the driver thread (the task is already
                // completed meanwhile). Only a 304 changes what the task completes with (the
                // stored response answers): the completion waits for the cache then. Any other
                // response is stored there while the completion goes on at once; a later
                // lookup queues behind the store on the same serial queue, so it sees it.
                if outcome.head?.statusCode == 304 {
                    cache.queue.async { [self] in
                        let answered = applyCache(cache, to: task, outcome: outcome)
                        if answered.head !== outcome.head, let head = answered.head { task.replaceHead(head) }
                        continueCompleting(task, outcome: answered)
                    }
                    return
                }
                cache.queue.async { [self] in _ = applyCache(cache, to: task, outcome: outcome) }
                continueCompleting(task, outcome: outcome, batch: batch)
                return
            }
            // Also when the body then failed (cut, timed out, the consumer left): the server
            // answered the unsafe request, so it acted on it.
            invalidateCache(cache, after: task, head: outcome.head)
        }
        continueCompleting(task, outcome: outcome, batch: batch)
    }

    /// A finished transfer on its way to the completion queue (in the driver's
    /// `CompletionBatch`, or alone).
    struct FinishedTransfer: Sendable {
        let task: SessionTask
        let outcome: TransferOutcome
    }

    /// Delivers a finished transfer on the completion queue: the hooks and the serializer are
    /// read here, where they are used, rather than on the driver thread and carried across
    /// (each a retain on one thread and a release on the other per request).
    func deliverCompletion(of finished: FinishedTransfer) {
        let (hooks, serializer) = state.withLock { ($0.hooks, $0.responseSerializer) }
        deliverCompletion(of: finished.task, outcome: finished.outcome, hooks: hooks, serializer: serializer)
    }

    func continueCompleting(_ task: SessionTask, outcome: TransferOutcome, batch: CompletionBatch<FinishedTransfer>? = nil) {
        if let download = task as? DownloadTask {
            let (queue, hooks, serializer) = state.withLock { ($0.completionQueue, $0.hooks, $0.responseSerializer) }
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
        let viaOperationQueue = outcome.bodyWentToUserCode || task.observesProgress
            || observesSentBodyData.load(ordering: .acquiring)
        if task.options.resumesDirectly, !viaOperationQueue, batch?.claimDirectResume() ?? true {
            resumeDirectly(task, outcome: outcome)
        }
        let (queue, kind, concurrent) = state.withLock {
            ($0.completionQueue, $0.completionQueueKind, $0.responseSerializer.prefersConcurrentProcessing)
        }
        let processesConcurrently = concurrent && outcome.error == nil && runsSerializer(for: task, outcome: outcome)
        let finished = FinishedTransfer(task: task, outcome: outcome)
        if let batch, !viaOperationQueue, !processesConcurrently, kind != .other {
            batch.add(finished, on: queue, kind: kind)
            return
        }
        // Every route reads the hooks and the serializer where they are used, never here.
        let work: @Sendable () -> Void
        let target: DispatchQueue
        if processesConcurrently {
            // Heavy serializers (image decoding) run in parallel, then the handler on its queue.
            target = Self.processingQueue
            work = { [self] in
                let (hooks, serializer) = state.withLock { ($0.hooks, $0.responseSerializer) }
                let result = serializeResult(of: task, outcome: outcome, serializer: serializer)
                queue.async { [self] in
                    deliverCompletion(of: task, outcome: outcome, hooks: hooks, serializer: serializer, result: result)
                }
            }
        } else {
            target = queue
            work = { [self] in deliverCompletion(of: finished) }
        }
        if viaOperationQueue {
            operationQueue.async { task.finishProgress(); target.async(execute: work) }
        } else {
            target.async(execute: work)
        }
    }

    /// Calls the continuation of an async raw-data call where its task completed (the driver
    /// thread, usually; `TaskOptions.resumesDirectly`) instead of from the completion queue.
    ///
    /// At one request at a time each thread hop is a wakeup (~30 µs of latency on the
    /// benchmark VM): the completion queue's worker waking only to resume a continuation,
    /// whose task then wakes a thread of the Swift pool, made an async call one hop slower
    /// than a completion handler. The continuation is Curlew's closure and resuming it only
    /// enqueues the caller's task on the global executor: no code of the caller's runs here.
    /// The response is the one the completion queue would have given (raw body, or the
    /// error). The completion queue then runs the rest as for any task — the hooks, the
    /// monitors' `.finished`, `unregister`, the notifications — without the handler it
    /// finds gone; so the caller may go on before `taskDidResume` and `taskDidComplete` are
    /// posted (`taskDidComplete` always followed the handler's return; the caller's code after
    /// `await` was never ordered with it). Not for a body that went to a file: the completion
    /// queue removes that file after the handler, and the caller would race it.
    func resumeDirectly(_ task: SessionTask, outcome: TransferOutcome) {
        guard outcome.fileURL == nil, let result = unserializedResult(of: task, outcome: outcome),
            let handler = task.takeCompletionHandler()
        else { return }
        var response = DataResponse(
            request: outcome.request, head: outcome.head, data: outcome.body, fileURL: nil,
            metrics: outcome.metrics, result: result)
        response.admittedByTrustOverride = outcome.admittedByTrustOverride
        handler(response)
    }

    /// Where serializers that prefer concurrency run (`prefersConcurrentProcessing`).
    static let processingQueue = DispatchQueue(label: "Curlew.processing", attributes: .concurrent)

    /// Whether the manager's serializer makes the task's result: not for a download, a
    /// raw-data call, a body that was streamed away, or one the response hook sent to a file.
    func runsSerializer(for task: SessionTask, outcome: TransferOutcome) -> Bool {
        !(task is DownloadTask) && !task.options.skipsSerializer && task.options.collectsBody && outcome.fileURL == nil
    }

    /// The serializer's result for a task that succeeded.
    func serializeResult(
        of task: SessionTask, outcome: TransferOutcome, serializer: ResolvedSerializer
    ) -> Result<any Sendable, any Error> {
        Result {
            try SessionEngine.serialize(
                serializer, request: outcome.request ?? task.originalRequest, head: outcome.head, data: outcome.body)
        }
    }

    /// The result, the completion handler, the hooks and the notification (completion queue).
    func deliverCompletion(of task: SessionTask, outcome: TransferOutcome, hooks: Hooks, serializer: ResolvedSerializer) {
        // Waiting `taskDidResume`/`taskDidSuspend` notices first (this task's among them),
        // before its handler and before a serializer's work.
        stateNotices.postPending()
        // The serializer here, on the completion queue, never on the driver thread. The
        // request goes along so a serializer can accept the empty body of a HEAD.
        let result = unserializedResult(of: task, outcome: outcome)
            ?? serializeResult(of: task, outcome: outcome, serializer: serializer)
        deliverCompletion(of: task, outcome: outcome, hooks: hooks, serializer: serializer, result: consume result)
    }

    /// The result of a task whose serializer does not run — its error, a download's file, a
    /// raw body — or nil when the serializer makes it.
    func unserializedResult(of task: SessionTask, outcome: TransferOutcome) -> Result<any Sendable, any Error>? {
        if let error = outcome.error { return .failure(error.surfaced) }
        if task is DownloadTask || outcome.fileURL != nil {
            // As AFNetworking's: a download's response object is where its file is (a data
            // task the response hook turned into a download too).
            return outcome.fileURL.map { .success($0) } ?? .failure(SessionError.fileWriteFailed("the download has no file"))
        }
        // Raw-data calls (`data(for:)`) and tasks whose body was streamed away or not kept
        // have nothing for a serializer to read: the result is the raw body.
        if task.options.skipsSerializer || !task.options.collectsBody { return .success(outcome.body ?? Data()) }
        return nil
    }

    /// The completion handler, the hooks and the notification for a task whose `result` is
    /// made (completion queue).
    ///
    /// `result` is consumed into the response and its error read once: each copy of a
    /// `Result<any Sendable, any Error>` (or of an optional one) goes through its payload's
    /// value witnesses, ~130 instructions, and this path made seven per request.
    func deliverCompletion(
        of task: SessionTask, outcome: TransferOutcome, hooks: Hooks, serializer: ResolvedSerializer,
        result: consuming Result<any Sendable, any Error>
    ) {
        // Also here for the processing queue's route (a second call finds nothing waiting).
        stateNotices.postPending()
        // Taken out here, after the last streamed chunk: the closures are released when
        // this function returns, whatever they capture.
        let callbacks = task.takeCallbacks()
        var response = DataResponse(
            request: outcome.request, head: outcome.head, data: outcome.body,
            fileURL: outcome.fileURL, metrics: outcome.metrics, result: result)
        response.admittedByTrustOverride = outcome.admittedByTrustOverride
        let failure: (any Error)?
        if case .failure(let error) = response.result { failure = error } else { failure = nil }
        if let failure, outcome.error == nil {
            task.recordSerializationError(failure)
        }
        // Before the task is unregistered: an invalidation's event comes after its tasks'.
        if let monitorHub { monitorHub.emit(.finished(.init(task, outcome.metrics ?? .empty(), outcome.error, response))) }
        callbacks.completionHandler?(response)
        EngineObservers.taskHandlerDidReturn(task, metrics: outcome.metrics, error: failure, hooks: hooks)
        unregister(task)
        if EngineObservers.postsNotifications(of: task, engine: self) {
            EngineObservers.taskDidComplete(
                task, body: outcome.body, result: response.result,
                serializer: serializer.serializer, serializerRan: !task.options.skipsSerializer && task.options.collectsBody,
                metrics: outcome.metrics, fileURL: outcome.fileURL)
        }
        if let temporary = outcome.fileURL, task.options.download?.fileURL == temporary || !(task is DownloadTask) {
            // No destination took the file: like URLSession's, it is gone once the
            // completion handler (which may move it) and the observers have run.
            try? FileManager.default.removeItem(at: temporary)
        }
        // A download's file stays claimed until it left the path resume data may name.
        (task as? DownloadTask)?.releaseFileClaim()
    }

    func unregister(_ task: SessionTask) {
        let finishInvalidation = state.withLock { state -> Bool in
            state.tasks.remove(task)
            // Hashing into an empty set still costs a SipHash: only an invalidation fills it.
            guard !state.draining.isEmpty, state.draining.remove(task.taskIdentifier) != nil else { return false }
            return state.invalidation == .invalidating && state.draining.isEmpty
        }
        if finishInvalidation { shutDownDriver() }
    }

    /// Cancels a started task's transfer. A start parked for a reset is taken back and the
    /// task completed here; so is a task whose driver is gone (nobody else will complete it).
    func cancelTransfer(of task: SessionTask, with error: SessionError) {
        let wasParked = takeParkedStart(of: task) != nil
        if wasParked || !submit(.cancel(task, error)) {
            complete(task, outcome: TransferOutcome(error: error, request: task.currentRequest))
        }
    }
}
