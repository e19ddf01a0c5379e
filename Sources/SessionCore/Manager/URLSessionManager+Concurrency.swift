import Foundation
import Synchronization
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

extension URLSessionManager {
    /// Sends `request` and returns the raw body and response. The manager's response
    /// serializer is not applied; a 4xx or 5xx status is a response, not an error.
    ///
    /// Cancelling the calling Swift `Task` cancels the transfer promptly with
    /// `SessionError.cancelled`.
    public func data(for request: URLRequest) async throws -> (Data, HTTPURLResponse) {
        let response = try await dataResponse(for: request)
        guard let http = response.response else {
            throw SessionError.badServerResponse("no HTTP response")
        }
        return (response.data ?? Data(), http)
    }

    /// ``data(for:)`` with everything the transfer produced: the response head with its
    /// fields in arrival order (`head`), the raw body (`data`, also the `result`'s value),
    /// the metrics and the final request. The response serializer is not applied.
    ///
    /// - Throws: `SessionError` when the transfer fails (a 4xx or 5xx is a response).
    public func dataResponse(for request: URLRequest) async throws -> DataResponse {
        let direct = CallerExecutor.resumesOnGlobalExecutor(isolation: #isolation)
        return try await perform { completion in
            var options = TaskOptions.asyncCall(completionHandler: completion)
            options.resumesDirectly = direct
            return engine.makeTask(DataTask.self, request: request, options: options)
        }
    }

    /// Runs a task made by `makeTask` (which must hand the given completion to the task) and
    /// returns its response, or throws its error. Swift `Task` cancellation cancels it; a call
    /// whose `Task` is cancelled already sends nothing (its task is cancelled before it starts).
    func perform(_ makeTask: (@escaping @Sendable (DataResponse) -> Void) -> SessionTask) async throws -> DataResponse {
        let box = Mutex<SessionTask?>(nil)
        return try await withTaskCancellationHandler {
            let response = await withCheckedContinuation { (continuation: CheckedContinuation<DataResponse, Never>) in
                let task = makeTask { continuation.resume(returning: $0) }
                box.withLock { $0 = task }
                // A cancellation before the box held the task found nothing to cancel: it is
                // seen here, and the task ends before it starts. One after it, the handler takes.
                if Task.isCancelled {
                    task.cancel()
                    return
                }
                task.resume()
            }
            if case .failure(let error) = response.result { throw error }
            return response
        } onCancel: {
            box.withLock { $0 }?.cancel()
        }
    }
}
