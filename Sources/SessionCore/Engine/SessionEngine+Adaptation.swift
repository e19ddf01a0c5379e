import Foundation
import Serialization
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The first attempt's adaptation: when the task starts, off the caller's thread and the
/// driver thread, before the task holds anything (no easy handle, no connection slot, no place
/// in line). The driver learns of the task only once its request is final.
extension SessionEngine {
    /// What adapts `task`'s requests: the manager's chain, then the task's own interceptor.
    func adapter(for task: SessionTask) -> (any RequestAdapter)? {
        let manager = adaptation
        guard let own = task.interceptor else { return manager }
        guard let manager else { return own }
        return Interceptor(adapters: [manager, own])
    }

    /// What decides about `task`'s failed attempts: the manager's chain, then the task's own
    /// interceptor.
    func retrier(for task: SessionTask) -> (any RequestRetrier)? {
        let manager = retrying
        guard let own = task.interceptor else { return manager }
        guard let manager else { return own }
        return Interceptor(retriers: [manager, own])
    }

    /// Adapts `task`'s request in a Swift concurrency task, then starts it with the adapted
    /// request, or completes it with the adapter's error (wrapped as
    /// `SessionError.interceptorFailed`, surfaced unwrapped) or the validation error of the
    /// adapted request. A task cancelled meanwhile was completed by the cancel (the driver
    /// does not know it yet, so `.cancel` completes it there); the answer is then dropped.
    ///
    /// The resource timeout bounds the adaptation too (`adaptationWatchdog`): an adapter that
    /// never returns (a token refresh whose server never answers) ends the task `.timedOut`.
    func adaptThenStart(_ task: SessionTask, adapter: any RequestAdapter) {
        guard let original = task.originalRequest else { return startAdapted(task) }
        let started = TaskDelegate.uptime
        let watchdog = preDriverWatchdog(for: task, since: task.startClockBeforeDriver(at: started), while: "its request was adapted") {
            $0.takePrepared() != nil
        }
        watchdog?.resume()
        Task { [self] in
            defer { watchdog?.cancel() }  // its handler (and what it holds) goes with it
            let adapted: Result<AdaptedRequest, SessionError>
            do {
                let request = try await adapter.adapt(original, for: task, attempt: 0)
                adapted = Result { () throws(SessionError) -> AdaptedRequest in
                    AdaptedRequest(
                        request: request,
                        prepared: try PreparedRequest.prepare(request, configuration: configuration, urls: parsedURLs),
                        started: started)
                }
            } catch {
                adapted = .failure(.interceptorFailed(InterceptorFailure(stage: .adaptation, underlying: error)))
            }
            switch adapted {
            case .success(let next):
                guard task.adoptFirstRequest(next) else { return }
                startAdapted(task)
            case .failure(let error):
                complete(task, outcome: TransferOutcome(error: error, request: task.currentRequest))
            }
        }
    }

    /// A timer that ends `task` with `.timedOut` when it is still before the driver (its
    /// first request adapted, its start parked for a reset) once `timeoutIntervalForResource`
    /// has passed since `since` (uptime); nil when that timeout is no limit. The driver's own
    /// clock starts with the transfer, so without it an adapter that never returned, or a
    /// reset waiting on a long download, held the task past its timeout. `take` takes the
    /// task from that phase first (its request, its parked start): a phase that ends later
    /// finds nothing, and a task the phase handed on already is not ended here. Returned not
    /// yet resumed: the caller resumes it once `take` can find the task (a libdispatch source
    /// must be resumed before it is released, cancelled or not).
    func preDriverWatchdog(
        for task: SessionTask, since: UInt64, while phase: String, take: @escaping @Sendable (SessionTask) -> Bool
    ) -> (any DispatchSourceTimer)? {
        guard let total = TransferTimeouts.nanoseconds(configuration.timeoutIntervalForResource) else { return nil }
        let elapsed = TaskDelegate.uptime &- since
        let timer = DispatchSource.makeTimerSource(queue: .global())
        timer.schedule(deadline: .now() + .nanoseconds(Int(clamping: total > elapsed ? total - elapsed : 0)))
        timer.setEventHandler { [weak self, weak task] in
            guard let self, let task, take(task) else { return }
            let error = SessionError.timedOut(
                "the task took longer than its resource timeout of \(TransferTimeouts.describe(total)) while \(phase)")
            complete(task, outcome: TransferOutcome(error: error, request: task.currentRequest))
        }
        return timer
    }
}
