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
    func adaptThenStart(_ task: SessionTask, adapter: any RequestAdapter) {
        guard let original = task.originalRequest else { return startAdapted(task) }
        Task { [self] in
            let adapted: Result<AdaptedRequest, SessionError>
            do {
                let request = try await adapter.adapt(original, for: task, attempt: 0)
                adapted = Result { () throws(SessionError) -> AdaptedRequest in
                    AdaptedRequest(
                        request: request,
                        prepared: try PreparedRequest.prepare(request, configuration: configuration, urls: parsedURLs))
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
}
