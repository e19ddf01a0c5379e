import Dispatch
import Foundation
import Serialization
import Synchronization
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Invalidation and AFNetworking's reset (`resetSession:`): draining the old session, parking
/// the fresh session's starts, and the fresh driver.
extension SessionEngine {
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
                let cancelled = state.tasks.tasks.filter { !resetting || state.draining.contains($0.taskIdentifier) }
                return .wait(cancelled)
            case .active:
                state.invalidation = .invalidating
                state.resetsAfterInvalidation = resetting
                state.draining = state.tasks.identifiers
                if resetting { resetPending.store(true, ordering: .releasing) }
                if let completion { state.invalidationWaiters.append(completion) }
                return .begin(state.tasks.tasks)
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
            sessionDidEnd()
            if cancelingTasks {
                for task in tasks { task.cancel(with: .cancelled) }
            }
            if state.withLock({ $0.draining.isEmpty }) { shutDownDriver() }
        }
    }


    func shutDownDriver() {
        let first = driverShutdownSent.withLock { sent -> Bool in
            defer { sent = true }
            return !sent
        }
        guard first else { return }
        let sent = submit(.shutdown { [self] in self.didShutDown() })
        if !sent { didShutDown() }
    }

    func didShutDown() {
        let resetRequested = state.withLock { $0.resetsAfterInvalidation }
        if resetRequested, configuration.httpShouldSetCookies {
            // Before any new task can start: a reset session sends none of the old cookies.
            configuration.cookieJar?.removeAll()
        }
        // A reset session (AFNetworking builds a new NSURLSession) forgets session credentials.
        credentialStore.removeAll()
        if resetRequested {
            renewCachePartition()  // and the previous user's private cache entries
            // And its TLS sessions and DNS answers: the fresh driver's own share starts empty,
            // but a cookie jar's share (the manager's own jar, by default) outlives the driver.
            // Replaced now unless another manager's transfer uses the jar; the new policy
            // generation refuses a session from before the reset in any case.
            security.renewGeneration()
            _ = cookieShare?.replaceSessionCachesIfIdle()
        }
        let fresh = resetRequested ? makeFreshDriver() : nil
        let (queue, hook, waiters, parked, resets) = state.withLock { state in
            // A reset cancelled meanwhile (the manager went away) leaves the new driver unused.
            let resets = fresh != nil && state.resetsAfterInvalidation
            state.invalidation = resets ? .active : .invalidated
            state.resetsAfterInvalidation = false
            let parked = state.parkedStarts
            state.parkedStarts = []
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
            // Cleared only once the fresh driver is in place: a start that reads it cleared
            // (without the lock) goes straight to the driver box, which held the closed old
            // driver until the line above, and failed with `.sessionInvalidated`.
            resetPending.store(false, ordering: .releasing)
            return (state.completionQueue, state.hooks.sessionDidBecomeInvalid, state.invalidationWaiters, parked, resets)
        }
        if let fresh, driver !== fresh {
            // Unused: shut it down at once (its thread exits when it sees the request).
            fresh.submit(.shutdown {})
        }
        // Tasks resumed during the reset start now, on the fresh session (or fail: no reset),
        // through the response cache as it is now (the old user's entries left behind).
        for parkedStart in parked {
            parkedStart.watchdog?.cancel()
            let task = parkedStart.task
            if resets {
                start(task)
            } else {
                complete(task, outcome: TransferOutcome(error: .sessionInvalidated, request: task.currentRequest))
            }
        }
        debugLog?.debug("driver stopped\(resets ? ", the session starts again" : "")")
        let hub = monitorHub
        // Through the operation queue, then from the completion queue: after the completions
        // queued above (the parked starts a reset refused), whose events are emitted there, a
        // download's or a streamed task's after a hop through the operation queue. Told at
        // once, the monitors heard of the invalidation before those tasks' completions.
        operationQueue.async {
            queue.async {
                hub?.emitInvalidated()
                hook?(nil)
                for waiter in waiters { waiter() }
            }
        }
    }

    /// A new driver for a reset; nil when libcurl refuses (the engine then stays invalidated).
    func makeFreshDriver() -> TransferDriver? {
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
        _ serializer: ResolvedSerializer, request: URLRequest?, head: HTTPResponseHead?, data: Data?
    ) throws -> any Sendable {
        let boxed = try serializer.sendableResponseObject(for: request, head: head, data: data)
        // The raw-bytes serializer's output, found without the dynamic Optional check below.
        if serializer.producesData, let data = boxed as? Data { return data }
        if let value = boxed,
            let unwrapped = OptionalFlattening.nonNone(value)
        {
            return unwrapped
        }
        let none: (any Sendable)? = nil
        return none
    }
}

/// Starts resumed while a reset is under way, parked until the fresh session is in place.
extension SessionEngine {
    /// A start parked for a reset, with the timer that ends it at its resource timeout.
    struct ParkedStart: Sendable {
        let task: SessionTask
        /// Only ever cancelled, from any thread: libdispatch's sources are thread-safe objects
        /// (`dispatch_source_cancel` may be called anywhere), which the Swift overlay does not
        /// declare `Sendable`.
        nonisolated(unsafe) let watchdog: (any DispatchSourceTimer)?
    }

    /// During a reset, a task of the fresh session (one made or first resumed after the reset
    /// began) waits for it, before the response cache is asked: it never sees the old
    /// session's cookies, credentials or private cache partition. A task of the old session
    /// (one the invalidation waits for) goes on to the old driver, so the reset can finish.
    ///
    /// The wait counts in the task's resource timeout: the reset may wait on an old task for
    /// days (a long download, a stream), and a timer ends the parked task `.timedOut` then.
    func parkForReset(_ task: SessionTask) -> Bool {
        let watchdog = preDriverWatchdog(
            for: task, since: task.startClockBeforeDriver(at: TaskDelegate.uptime), while: "it waited for a reset of the session"
        ) { [weak self] task in self?.takeParkedStart(of: task) != nil }
        let parked = state.withLock { state -> Bool in
            guard state.invalidation == .invalidating, state.resetsAfterInvalidation,
                !state.draining.contains(task.taskIdentifier)
            else { return false }
            state.parkedStarts.append(ParkedStart(task: task, watchdog: watchdog))
            return true
        }
        // Resumed once the start is in the list: a timer with no time left fires at once, and
        // found nothing to take before.
        if !parked { watchdog?.cancel() }
        watchdog?.resume()
        return parked
    }

    /// Takes `task`'s parked start back (a cancel, its timeout), its timer cancelled; nil when
    /// it is not parked.
    func takeParkedStart(of task: SessionTask) -> SessionTask? {
        let taken = state.withLock { state -> ParkedStart? in
            guard let index = state.parkedStarts.firstIndex(where: { $0.task === task }) else { return nil }
            return state.parkedStarts.remove(at: index)
        }
        taken?.watchdog?.cancel()
        return taken?.task
    }
}
